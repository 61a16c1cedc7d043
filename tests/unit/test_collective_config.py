"""Tuning file, schedule files and call validation: typed errors naming the field."""

from __future__ import annotations

import tomllib

import pytest

from hetero_ns3.collectives import CollectiveCall, CollectiveEnv, get_algorithm, load_tuning, plan_collective
from hetero_ns3.collectives.schedules import schedule_from_dict
from hetero_ns3.collectives.tuning import default_tuning_path, tuning_from_dict
from hetero_ns3.errors import PlanningError, ScenarioError
from hetero_ns3.plan.builder import PlanBuilder
from hetero_ns3.topology import star


def test_tuning_constants_match_nccl_tables():
    t = load_tuning()
    assert t.base_latency_s["ring"]["Simple"] == pytest.approx(8.4e-6)
    assert t.base_latency_s["ring"]["LL"] == pytest.approx(6.6e-6)  # NCCL v2.30.7 baseLat
    assert t.hw_latency("network", "ring", "Simple") == pytest.approx(14.0e-6)  # v2.30.7 hwLat
    assert t.hw_latency("nvlink", "ring", "LL") == pytest.approx(0.6e-6)
    assert t.hw_latency("nvlink", "tree", "LL128") == pytest.approx(1.25e-6)
    assert t.bandwidth["ring_ll"] == 0.5
    assert t.ll_max_busbw_Bps is not None and t.ll_max_busbw_Bps.one_node["Hopper"] == pytest.approx(141e9)
    assert t.wire_factor["LL"] == 2.0
    assert "tuning.cc" in default_tuning_path().read_text()


def _data():
    with open(default_tuning_path(), "rb") as f:
        return tomllib.load(f)


def test_tuning_errors_name_the_field():
    d = _data()
    d["links"]["network"]["efficiency"] = -1
    with pytest.raises(ScenarioError, match=r"links\.network\.efficiency"):
        tuning_from_dict(d)
    d = _data()
    d["channels"]["max"] = 0
    with pytest.raises(ScenarioError, match=r"channels\.max \(0\)"):
        tuning_from_dict(d)
    d = _data()
    del d["hw_latency_us"]["pcie"]["ring"]["LL128"]
    with pytest.raises(ScenarioError, match=r"hw_latency_us\.pcie\.ring\.LL128"):
        tuning_from_dict(d)


def test_schedule_errors():
    ok = {"schedule": {"name": "x", "ranks": 3, "rings": [[0, 2, 1]]}}
    assert schedule_from_dict(ok).rings == [[0, 2, 1]]
    with pytest.raises(ScenarioError, match=r"rings\[0\].*permutation"):
        schedule_from_dict({"schedule": {"name": "x", "ranks": 3, "rings": [[0, 1, 1]]}})
    with pytest.raises(ScenarioError, match=r"ops"):
        schedule_from_dict({"schedule": {"name": "x", "ranks": 3, "rings": [[0, 1, 2]], "ops": ["all_to_all"]}})
    with pytest.raises(ScenarioError, match=r"kind"):
        schedule_from_dict({"schedule": {"name": "x", "kind": "tree", "ranks": 3, "rings": [[0, 1, 2]]}})


def test_call_validation():
    with pytest.raises(ScenarioError, match=r"call\.op \('allreduse'\)"):
        CollectiveCall("allreduse", ("h0", "h1"), 1)
    assert CollectiveCall("All-Reduce", ("h0", "h1"), 1).op == "all_reduce"
    with pytest.raises(ScenarioError, match=r"call\.group"):
        CollectiveCall("all_reduce", ("h0", "h0"), 1)
    with pytest.raises(ScenarioError, match=r"call\.root \(5\)"):
        CollectiveCall("broadcast", ("h0", "h1"), 1, root=5)
    with pytest.raises(ScenarioError, match=r"call\.protocol"):
        CollectiveCall("all_reduce", ("h0", "h1"), 1, protocol="LL64")
    with pytest.raises(ScenarioError, match=r"call\.pair_bytes"):
        CollectiveCall("all_to_all_v", ("h0", "h1"), 0, pair_bytes=((0, 1),))


def test_planning_errors():
    env = CollectiveEnv.from_graph(star(4))
    b = PlanBuilder(env.gpus)
    with pytest.raises(PlanningError, match="h9"):
        plan_collective(b, CollectiveCall("all_reduce", ("h0", "h9"), 1024), env)
    with pytest.raises(PlanningError, match="does not implement"):
        plan_collective(b, CollectiveCall("all_gather", env.gpus, 1024, algo="tree"), env)
    with pytest.raises(PlanningError, match="written for 8 ranks"):
        plan_collective(b, CollectiveCall("all_reduce", env.gpus, 1024, algo="ring_interleaved_8"), env)
    with pytest.raises(ScenarioError, match="not a known algorithm.*ring"):
        get_algorithm("rnig")


def test_scenario_collective_overrides_are_checked_and_named():
    """``[collectives.<dim>]`` algo and protocol are checked when the scenario loads and errors name the
    field; an algorithm that lacks an op of its dimension names the dimension when the plan is lowered
    (both said ``call.algo`` / ``call.protocol``, the unknown names only after the run had started)."""
    from pathlib import Path

    from hetero_ns3.pipeline import load_run_cluster, lower_scenario
    from hetero_ns3.scenario.loader import scenario_from_dict
    from hetero_ns3.topology import build_graph

    topo = Path(__file__).resolve().parent.parent / "data" / "one-node-4gpu.toml"
    raw = {
        "model": {"name": "toy", "layers": 2, "hidden": 256, "heads": 4, "ffn_hidden": 1024, "vocab": 512,
                  "seq_len": 128},
        "parallelism": {"tp": 2, "pp": 2, "global_batch": 2, "micro_batch": 1},
        "cluster": {"topology": str(topo)},
        "run": {"backend": "analytic"},
    }  # fmt: skip
    with pytest.raises(ScenarioError, match=r"collectives\.tp\.algo \('rign'\) is not a known algorithm; .*'ring'"):
        scenario_from_dict({**raw, "collectives": {"tp": {"algo": "rign"}}})
    with pytest.raises(ScenarioError, match=r"collectives\.dp\.protocol \('ll'\) is not a protocol; .*'LL128'"):
        scenario_from_dict({**raw, "collectives": {"dp": {"protocol": "ll"}}})
    assert scenario_from_dict({**raw, "collectives": {"tp": {"algo": "ring_interleaved_8"}}})  # a user schedule
    sc = scenario_from_dict({**raw, "collectives": {"pp": {"algo": "ring"}}})
    cluster = load_run_cluster(sc)
    with pytest.raises(
        PlanningError, match=r"collectives\.pp\.algo \('ring'\) does not implement send_recv, which the pp"
    ):
        lower_scenario(sc, build_graph(cluster), cluster)


def test_every_congestion_control_is_offered_by_the_collective_command_and_study_points():
    """``collective --cc`` and a collective study point's ``run.cc`` take every kind ``network.cc.kind`` does (the
    point refused dctcp and timely; the help listed three)."""
    import contextlib
    import io

    from hetero_ns3.cli.main import main
    from hetero_ns3.network.config import CC_KINDS
    from hetero_ns3.studies.collective_point import load_collective

    for kind in CC_KINDS:
        raw = {"collective": {"op": "all_reduce", "size": "1MiB"}, "cluster": {"topology": "star:4"},
               "run": {"backend": "ns3", "cc": kind}}  # fmt: skip
        assert load_collective(raw).run.cc == kind
    out = io.StringIO()
    with contextlib.redirect_stdout(out), pytest.raises(SystemExit):
        main(["collective", "--help"])
    assert all(kind in " ".join(out.getvalue().split()) for kind in CC_KINDS)
