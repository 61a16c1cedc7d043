"""Scenario TOML loading: frozen sections, dotted-path errors, --set overrides, the section registry."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from hetero_ns3.errors import ScenarioError
from hetero_ns3.scenario import apply_overrides, load_scenario, parse_override, scenario_from_dict
from hetero_ns3.workload.parallel import ParallelismSpec

REPO = Path(__file__).resolve().parents[2]
EXAMPLE = REPO / "scenarios" / "plan_example.toml"

BASE = {
    "model": {"name": "gpt3-1.3b"},
    "parallelism": {"tp": 2, "pp": 2, "global_batch": 16},
    "cluster": {"groups": [{"gpu_type": "H100-SXM", "nodes": 1, "gpus_per_node": 8}]},
}


def test_example_loads_into_frozen_sections() -> None:
    sc = load_scenario(EXAMPLE)
    assert isinstance(sc.parallelism, ParallelismSpec)
    assert sc.parallelism.tp == 4 and sc.parallelism.sequence_parallel is True
    assert sc.model.name == "llama2-7b" and sc.model.seq_len == 2048 and sc.model.hidden == 4096
    assert sc.compute.memory_reserve == 2 * 2**30
    assert len(sc.cluster.groups) == 2 and sc.cluster.groups[1].gpu_type == "A100-SXM-80GB"
    with pytest.raises(dataclasses.FrozenInstanceError):
        sc.parallelism.tp = 8  # type: ignore[misc]
    res = sc.resolved()
    assert res["parallelism"]["tp"] == 4 and res["model"]["layers"] == 32


def test_overrides_coerce_types() -> None:
    sc = load_scenario(
        EXAMPLE,
        [
            "parallelism.tp=2",
            "parallelism.schedule=interleaved",
            "parallelism.vpp=2",
            "parallelism.stage_layers=[8, 8, 8, 8]",
            "parallelism.sequence_parallel=false",
            "model.seq_len=1024",
            "compute.launch_overhead=5us",
        ],
    )
    p = sc.parallelism
    assert (p.tp, p.schedule, p.vpp, p.stage_layers, p.sequence_parallel) == (2, "interleaved", 2, (8, 8, 8, 8), False)
    assert sc.model.seq_len == 1024
    assert sc.compute.launch_overhead == pytest.approx(5e-6)
    assert sc.overrides[0] == "parallelism.tp=2"


def test_numbers_strict() -> None:
    """A TOML literal override is its type; a quoted number is a string and is not converted (issue 17)."""
    sc = scenario_from_dict(BASE, ["parallelism.tp=4", "parallelism.global_batch=32.0"])
    assert sc.parallelism.tp == 4 and sc.parallelism.global_batch == 32
    with pytest.raises(ScenarioError, match=r"parallelism\.tp \('4'\) must be an integer; write it without quotes"):
        scenario_from_dict(BASE, ['parallelism.tp="4"'])


@pytest.mark.parametrize(
    ("override", "pattern"),
    [
        (
            "parallelism.tpp=4",
            r"parallelism\.tpp \(4\) is not a known key; did you mean 'tp'\? valid keys: \[.*'tp'.*\]",
        ),
        ("parallelism.tp=four", r"parallelism\.tp \('four'\) must be an integer"),
        (
            "parallelism.schedule=zigzag",
            r"parallelism\.schedule \('zigzag'\) is not a valid choice; use one of \['1f1b', 'gpipe', 'interleaved'\]",
        ),
        ("parallelism.sequence_parallel=maybe", r"parallelism\.sequence_parallel \('maybe'\) must be true or false"),
        (
            "netwrk.rate=1",
            r"\[netwrk\] is not a known scenario section; did you mean 'network'\? valid sections: \[.*'parallelism'.*\]",
        ),
        ("model.name=gpt5", r"model\.name \('gpt5'\) is not a catalog model"),
        ("parallelism.tp=0", r"parallelism\.tp \(0\) must be >= 1"),
        ("cluster.groups=[{gpu_type='H100-SXM', nodez=1}]", r"cluster\.groups\[0\]\.nodez \(1\) is not a known key"),
        ("compute.memory_reserve=lots", r"compute\.memory_reserve \('lots'\) is not a size"),
        ("tp=4", r"needs a dotted key with a section"),
    ],
)
def test_errors_name_dotted_path(override: str, pattern: str) -> None:
    with pytest.raises(ScenarioError, match=pattern):
        scenario_from_dict(BASE, [override])


def test_missing_required_field() -> None:
    raw = {"model": {"name": "custom", "layers": 2, "hidden": 64, "heads": 4, "vocab": 100, "seq_len": 32}}
    with pytest.raises(ScenarioError, match=r"model\.ffn_hidden is missing"):
        scenario_from_dict(raw)


def test_custom_model_in_scenario() -> None:
    raw = {
        "model": {"name": "tiny", "layers": 2, "hidden": 64, "heads": 4, "ffn_hidden": 256, "vocab": 100, "seq_len": 32}
    }
    sc = scenario_from_dict(raw)
    assert sc.model.head_dim == 16 and sc.model.n_kv_heads == 4


def test_cluster_needs_exactly_one_source() -> None:
    with pytest.raises(ScenarioError, match=r"cluster needs exactly one of cluster\.topology"):
        scenario_from_dict({"cluster": {}})


def test_apply_overrides_does_not_mutate() -> None:
    out = apply_overrides(BASE, ["parallelism.tp=8", "run.seed=3"])
    assert BASE["parallelism"]["tp"] == 2 and out["parallelism"]["tp"] == 8 and out["run"] == {"seed": 3}
    assert parse_override("a.b.c=[1,2]") == (("a", "b", "c"), [1, 2])
    with pytest.raises(ScenarioError, match="is a value, not a table"):
        apply_overrides(BASE, ["parallelism.tp.x=1"])


def test_sections_are_typed_fields_and_unknown_sections_fail() -> None:
    from hetero_ns3.scenario import SECTIONS

    sc = scenario_from_dict(BASE, ["run.seed=7"])
    assert sc.run.seed == 7 and sc.present >= {"parallelism", "run"}
    assert sc.faults.gpus == () and sc.network.cc.kind  # absent sections take their defaults
    assert [f for f in SECTIONS if not hasattr(sc, f)] == []
    with pytest.raises(ScenarioError, match=r"\[test_demo_section\] is not a known scenario section; valid sections"):
        scenario_from_dict({**BASE, "test_demo_section": {"rate": "400Gbps"}})
    with pytest.raises(ScenarioError, match=r"\[model\] section is missing"):
        scenario_from_dict({"run": {"seed": 2}}).require("model", purpose="planning")


def test_bad_toml_and_missing_file(tmp_path) -> None:
    bad = tmp_path / "bad.toml"
    bad.write_text("[parallelism\ntp = 1")
    with pytest.raises(ScenarioError, match="not valid TOML"):
        load_scenario(bad)
    with pytest.raises(ScenarioError, match="does not exist"):
        load_scenario(tmp_path / "nope.toml")


def test_custom_gpu_type_in_scenario() -> None:
    from hetero_ns3.workload.planner import plan_scenario

    raw = {
        "model": {"name": "gpt3-125m"},
        "parallelism": {"tp": 2, "global_batch": 4},
        "cluster": {"groups": [{"gpu_type": "MyAccel", "nodes": 1, "gpus_per_node": 2}]},
        "compute": {
            "gpus": {
                "MyAccel": {
                    "architecture": "Hopper",
                    "bf16_tflops": 500,
                    "fp16_tflops": 500,
                    "hbm_gib": 64,
                    "hbm_tbps": 2.0,
                    "tdp_w": 500,
                    "sm_count": 100,
                    "source": "test",
                }
            }
        },
    }
    p = plan_scenario(scenario_from_dict(raw))
    assert p.peak_flops == pytest.approx(2 * 500e12)
    assert p.memory[0].capacity == 64 * 2**30
    with pytest.raises(ScenarioError, match=r"compute\.gpus\.MyAccel\.hbm_tbps is missing"):
        bad = {
            **raw,
            "compute": {
                "gpus": {"MyAccel": {k: v for k, v in raw["compute"]["gpus"]["MyAccel"].items() if k != "hbm_tbps"}}
            },
        }
        scenario_from_dict(bad)


def test_overrides_index_arrays_of_tables() -> None:
    raw = {"jobs": [{"placement": {"policy": "packed"}}, {"name": "b"}]}
    out = apply_overrides(raw, ['jobs[1].placement.policy="spread"', "jobs[0].placement.policy=spread"])
    assert out["jobs"][1]["placement"] == {"policy": "spread"} and out["jobs"][0]["placement"]["policy"] == "spread"
    assert raw["jobs"][1] == {"name": "b"}  # a copy
    with pytest.raises(ScenarioError, match=r"jobs\[2\] indexes an array of 2 table"):
        apply_overrides(raw, ["jobs[2].start=1"])


def test_a_scalar_where_a_table_belongs_names_the_keys_and_the_fix() -> None:
    """``network.buffer = "0B"`` said only "must be a table": which keys, and how to write one?"""
    demo = REPO / "scenarios" / "demo.toml"
    with pytest.raises(ScenarioError) as err:
        load_scenario(demo, ['network.buffer="0B"'])
    assert str(err.value) == (
        "network.buffer ('0B') must be a table with keys among ['switch_buffer_bytes', 'egress_dynamic', "
        "'egress_alpha', 'egress_static_threshold_bytes']; write it as a table, e.g. buffer = { switch_buffer_bytes = ... }"
    )
    with pytest.raises(ScenarioError, match=r"^network.cc \(5\) must be a table with keys among \['kind'"):
        load_scenario(demo, ["network.cc=5"])


def test_set_paths_into_arrays_of_tables_say_how_to_fix_them() -> None:
    """Out-of-range, negative and missing indexes, and a key set on the array itself: the fix, not a dump."""
    raw = {"jobs": [{"name": "a", "model": {"name": "gpt3-125m"}}, {"name": "b"}], "faults": {"gpus": []}}
    cases = [
        ('jobs[5].name="x"', "jobs[5] indexes an array of 2 table(s); use an index in 0..1"),
        ('jobs[-1].name="x"', "jobs[-1] is not a valid index; write name[i] with i a whole number >= 0"),
        ('jobs.name="x"', "jobs is an array of 2 table(s), not a table; index one, e.g. jobs[0].name"),
        # a dotted index: the example was jobs[0].1 (the index taken for a key)
        ('jobs.1.name="x"', "jobs is an array of 2 table(s), not a table; index one, e.g. jobs[1].name"),
        (
            "faults.gpus[0].factor=2",
            "there is none to index; set the whole array instead, e.g. --set 'faults.gpus=[{...}]'",
        ),
    ]
    for text, needle in cases:
        with pytest.raises(ScenarioError) as err:
            apply_overrides(raw, [text])
        assert needle in str(err.value) and len(str(err.value)) < 200, str(err.value)
    assert apply_overrides(raw, ['jobs[1].name="c"'])["jobs"][1]["name"] == "c"
