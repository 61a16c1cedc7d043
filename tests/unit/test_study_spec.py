"""Study files: grid / zip / exclude / rules / seeds expansion, stable point ids, validation before running."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from hetero_ns3.errors import ScenarioError
from hetero_ns3.studies import expand, load_study_file, study_from_dict

REPO = Path(__file__).resolve().parent.parent.parent
TOPO = str(REPO / "tests" / "data" / "one-node-4gpu.toml")


def _base() -> dict:
    return {
        "model": {"name": "gpt3-125m", "seq_len": 256, "layers": 2},
        "parallelism": {"tp": 2, "global_batch": 4, "micro_batch": 1},
        "cluster": {"topology": TOPO},
        "run": {"backend": "analytic"},
    }


def _study(**tables) -> dict:
    doc = {"study": {"name": "t"}, "base": _base()}
    doc.update(tables)
    return doc


def test_grid_is_the_product_in_axis_order():
    pts = expand(study_from_dict(_study(axes={"parallelism.tp": [1, 2, 4], "model.seq_len": [128, 256]})))
    assert [dict(p.coords) for p in pts] == [
        {"parallelism.tp": tp, "model.seq_len": s} for tp in (1, 2, 4) for s in (128, 256)
    ]
    assert pts[3].raw["parallelism"]["tp"] == 2 and pts[3].raw["model"]["seq_len"] == 256
    assert len({p.point_id for p in pts}) == 6 and all(len(p.point_id) == 12 for p in pts)


def test_zip_mode_and_zip_groups_vary_together():
    doc = _study(axes={"parallelism.tp": [1, 2, 4], "model.seq_len": [128, 256, 512]})
    doc["study"]["mode"] = "zip"
    assert [tuple(v for _, v in p.coords) for p in expand(study_from_dict(doc))] == [(1, 128), (2, 256), (4, 512)]
    doc = _study(
        axes={"network.cc.kind": ["dcqcn", "hpcc"]}, zip=[{"parallelism.tp": [2, 4], "model.seq_len": [128, 512]}]
    )
    coords = [dict(p.coords) for p in expand(study_from_dict(doc))]
    assert len(coords) == 4 and {(c["parallelism.tp"], c["model.seq_len"]) for c in coords} == {(2, 128), (4, 512)}
    doc["zip"][0]["model.seq_len"] = [128]
    with pytest.raises(ScenarioError, match=r"zip\[0\].*equal lengths"):
        study_from_dict(doc)


def test_exclude_rules_seeds_and_backend():
    doc = _study(
        axes={"parallelism.tp": [1, 2, 4], "network.cc.kind": ["dcqcn", "hpcc"]},
        exclude=[{"parallelism.tp": [1, 4], "network.cc.kind": "hpcc"}],
        rules=[{"when": {"network.cc.kind": "hpcc"}, "set": {"network.ecn.kmin_bytes": 50_000}}],
    )
    doc["study"].update(seeds=[1, 2], backend="analytic")
    study = study_from_dict(doc)
    pts = expand(study)
    assert study.axis_keys == ("parallelism.tp", "network.cc.kind", "run.seed")
    assert len(pts) == (3 * 2 - 2) * 2
    for p in pts:
        c = dict(p.coords)
        assert p.raw["run"]["seed"] == c["run.seed"] and p.raw["run"]["backend"] == "analytic"
        assert (p.raw.get("network", {}).get("ecn", {}).get("kmin_bytes") == 50_000) == (c["network.cc.kind"] == "hpcc")
    assert not any(dict(p.coords)["parallelism.tp"] != 2 and dict(p.coords)["network.cc.kind"] == "hpcc" for p in pts)


def test_an_unknown_axis_key_fails_with_the_study_field():
    with pytest.raises(ScenarioError, match=r'axes\."model\.layerz".*model\.layerz.*not a known key'):
        study_from_dict(_study(axes={"model.layerz": [2, 4]}))
    with pytest.raises(ScenarioError, match=r'axes\."parallelism\.tp".*must be an integer'):
        study_from_dict(_study(axes={"parallelism.tp": ["two"]}))
    with pytest.raises(ScenarioError, match=r"study\.modes"):
        study_from_dict({"study": {"modes": "grid"}, "base": _base()})
    with pytest.raises(ScenarioError, match=r'exclude\[0\]\."model\.seq_len".*not an axis'):
        study_from_dict(_study(axes={"parallelism.tp": [2, 4]}, exclude=[{"model.seq_len": 1}]))
    with pytest.raises(ScenarioError, match="resolve to the same scenario"):
        expand(study_from_dict(_study(axes={"parallelism.tp": [2, 2.0]})))


def test_unknown_axis_key_fails_in_the_cli_before_anything_runs(tmp_path):
    d = tmp_path / "bad"
    d.mkdir()
    (d / "study.toml").write_text('[study]\nbase = "s.toml"\n[axes]\n"model.layerz" = [2]\n', encoding="utf-8")
    (d / "s.toml").write_text(
        f'[model]\nname = "gpt3-125m"\n[parallelism]\ntp = 4\n[cluster]\ntopology = "{TOPO}"\n', encoding="utf-8"
    )
    out = tmp_path / "out"
    res = subprocess.run(
        [sys.executable, "-m", "hetero_ns3", "sweep", str(d), "--out", str(out)], capture_output=True, text=True
    )
    assert res.returncode == 2, res.stderr
    assert 'axes."model.layerz"' in res.stderr and "Traceback" not in res.stderr
    assert not out.exists()


def test_point_ids_are_stable_across_processes(tmp_path):
    doc = _study(axes={"parallelism.tp": [1, 2, 4], "model.seq_len": [128, 256]})
    (tmp_path / "study.toml").write_text(_toml(doc), encoding="utf-8")
    here = [p.point_id for p in expand(load_study_file(tmp_path))]
    code = (
        "import json,sys; from hetero_ns3.studies import expand, load_study_file;"
        "print(json.dumps([p.point_id for p in expand(load_study_file(sys.argv[1]))]))"
    )
    for seed in ("1", "12345"):
        env = {**os.environ, "PYTHONHASHSEED": seed}
        res = subprocess.run([sys.executable, "-c", code, str(tmp_path)], capture_output=True, text=True, env=env)
        assert res.returncode == 0, res.stderr
        assert json.loads(res.stdout) == here
    assert here == [p.point_id for p in expand(study_from_dict(doc))]  # inline base or file: same ids


def _toml(doc: dict) -> str:
    """A small TOML writer for the test's nested tables of scalars."""

    def val(v):
        return json.dumps(v) if not isinstance(v, bool) else str(v).lower()

    lines = []
    for name, table in doc.items():
        if name == "base":
            for sec, body in table.items():
                lines.append(f"[base.{sec}]")
                lines += [f"{k} = {val(v)}" for k, v in body.items()]
            continue
        lines.append(f"[{name}]")
        lines += [f'"{k}" = {val(v)}' if "." in k else f"{k} = {val(v)}" for k, v in table.items()]
    return "\n".join(lines) + "\n"


@pytest.mark.parametrize("name", sorted(p.name for p in (REPO / "scenarios" / "studies").iterdir() if p.is_dir()))
def test_shipped_studies_validate_and_expand(name):
    d = REPO / "scenarios" / "studies" / name
    pts = expand(load_study_file(d))
    assert len(pts) >= 4 and (d / "README.md").is_file()
    text = (d / "README.md").read_text(encoding="utf-8")
    assert (
        "**Question.**" in text
        and "**Expected shape.**" in text
        and f"hetero-ns3 sweep scenarios/studies/{name}" in text
    )


def test_axes_may_index_arrays_of_tables_and_the_table_keeps_them_as_strings(tmp_path) -> None:
    """The job-contention study: `jobs[i].placement.policy` axes expand, and the study table keeps those
    bracketed axis columns as axes (strings), not as per-GPU-type breakdown columns."""
    from hetero_ns3.studies.table import study_frame

    repo = Path(__file__).resolve().parents[2]
    study = load_study_file(repo / "scenarios" / "studies" / "job-contention" / "study.toml")
    points = expand(study)
    assert len(points) == 4
    df = study_frame(study, points, tmp_path)
    assert str(df["jobs[0].placement.policy"].dtype) == "string"
    assert sorted(df["jobs[1].placement.policy"]) == ["packed", "packed", "spread", "spread"]
