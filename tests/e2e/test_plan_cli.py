"""``hetero-ns3 plan`` end to end through the CLI entry point."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from hetero_ns3.cli.main import main

REPO = Path(__file__).resolve().parents[2]
EXAMPLE = REPO / "scenarios" / "plan_example.toml"

pytestmark = pytest.mark.e2e


def test_plan_writes_artefacts(tmp_path, capsys) -> None:
    rc = main(
        [
            "plan",
            str(EXAMPLE),
            "--out",
            str(tmp_path),
            "--per-rank",
            "--set",
            "parallelism.tp=2",
            "--set",
            "parallelism.global_batch=8",
        ]
    )
    assert rc == 0
    out = capsys.readouterr().out
    assert "llama2-7b" in out and "tp=2 pp=2 dp=4" in out and "MFU" in out
    plan = json.loads((tmp_path / "plan.json").read_text())
    assert plan["parallelism"]["tp"] == 2
    assert sum(plan["stage_layers"]) == 32
    assert sum(plan["replica_microbatches"]) == 8
    assert len(plan["memory"]) == 16 and all(m["total"] < m["capacity"] for m in plan["memory"])
    wl = json.loads((tmp_path / "workload.json").read_text())
    assert wl["format"] == "hetero_ns3.workload/1" and len(wl["ranks"]) == 16
    assert sum(len(p["ops"]) * len(p["ranks"]) for p in wl["programs"]) == plan["ops"]
    dims = {op["dim"] for p in wl["programs"] for op in p["ops"] if op["kind"] == "comm"}
    assert dims == {"tp", "pp", "dp"}
    resolved = json.loads((tmp_path / "scenario.resolved.json").read_text())
    assert resolved["parallelism"]["tp"] == 2 and resolved["overrides"][0] == "parallelism.tp=2"
    import pandas as pd

    progs = pd.read_csv(tmp_path / "programs.csv")
    ops = pd.read_csv(tmp_path / "ops.csv")
    assert len(ops) == plan["ops"] and {"id", "rank", "gpu", "deps", "duration", "instance"} <= set(ops.columns)
    assert len(progs) == plan["program_ops"] and {"stage", "replica", "ranks", "collective", "groups"} <= set(
        progs.columns
    )


def test_plan_json_summary(capsys) -> None:
    assert main(["plan", str(EXAMPLE), "--json", "--set", "parallelism.global_batch=8"]) == 0
    s = json.loads(capsys.readouterr().out)
    assert s["model"] == "llama2-7b" and 0 < s["mfu_compute_only"] < 1


def test_bad_override_exits_2_naming_field(capsys) -> None:
    assert main(["plan", str(EXAMPLE), "--set", "parallelism.global_batch=2"]) == 2
    err = capsys.readouterr().err
    assert "ScenarioError: parallelism.global_batch (2) gives 1 microbatches per replica" in err
    assert "fewer than parallelism.pp (2)" in err
    assert main(["plan", str(EXAMPLE), "--set", "parallelism.tpp=2"]) == 2
    assert "parallelism.tpp (2) is not a known key; did you mean 'tp'? valid keys:" in capsys.readouterr().err


def test_console_script_runs() -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "hetero_ns3", "plan", str(EXAMPLE), "--set", "parallelism.pp=64"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 2
    assert "parallelism.tp x parallelism.pp ('4 x 64 = 256') does not divide the cluster's 16 GPUs" in proc.stderr


def test_plan_of_a_jobs_scenario_points_to_run() -> None:
    """It said "[model] section is missing" of a [[jobs]] scenario, whose jobs each have a model."""
    from tests.cli_harness import assert_clean, run_cli

    argv = ["plan", str(Path(__file__).resolve().parents[2] / "scenarios" / "two-jobs.toml")]
    res = run_cli(argv)
    assert_clean(res, argv, allowed=(2,))
    assert "this scenario has 2 [[jobs]]; `hetero-ns3 run` plans and simulates every job" in res.err


def test_plan_refuses_a_gpu_fault_that_selects_no_gpu(capsys) -> None:
    """`run` refuses a [[faults.gpus]] rule that matches no GPU; `plan` of the same scenario used to accept it."""
    demo = str(REPO / "scenarios" / "demo.toml")
    assert main(["plan", demo, "--set", "faults.gpus=[{node = 7, factor = 2.0}]"]) == 2
    assert "faults.gpus[0].node (7) is not a node" in capsys.readouterr().err
    assert main(["plan", demo, "--set", "faults.gpus=[{node = 1, factor = 2.0}]"]) == 0


def test_cli_stops_quietly_when_its_reader_goes() -> None:
    """``hetero-ns3 plan ... | head -1``: the reader closes the pipe; the CLI ends with SIGPIPE's status, no traceback."""
    scenario = str(EXAMPLE)
    proc = subprocess.Popen(
        [sys.executable, "-m", "hetero_ns3.cli.main", "plan", scenario],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert proc.stdout is not None and proc.stderr is not None
    proc.stdout.close()  # nobody reads: the first write fails with EPIPE
    err = proc.stderr.read()
    assert proc.wait() == 141, err
    assert "Traceback" not in err
