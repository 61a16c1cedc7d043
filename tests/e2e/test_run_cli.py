"""``hetero-ns3 run`` as a user runs it (subprocess): summary, run directory, clear errors."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent.parent
DATA = REPO / "tests" / "data"


def _cli(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "hetero_ns3", *args], capture_output=True, text=True, timeout=600, cwd=cwd
    )


def _scenario(tmp_path: Path) -> Path:
    path = tmp_path / "small.toml"
    path.write_text(
        f"""
[model]
name = "gpt3-125m"
seq_len = 512
[parallelism]
tp = 4
pp = 2
global_batch = 4
micro_batch = 1
[cluster]
topology = "{DATA / "two-node-h100.toml"}"
[run]
backend = "analytic"
"""
    )
    return path


def test_run_prints_a_summary_and_writes_the_run_directory(tmp_path):
    out = tmp_path / "run"
    res = _cli("run", str(_scenario(tmp_path)), "--out", str(out), "--no-progress", cwd=tmp_path)
    assert res.returncode == 0, res.stderr
    assert "iteration time:" in res.stdout and "H100-SXM" in res.stdout and "MFU" in res.stdout
    summary = json.loads((out / "summary.json").read_text())
    assert summary["status"] == "ok" and summary["run"]["backend"] == "analytic"
    assert (out / "trace.json").is_file() and (out / "tasks.csv").is_file()


def test_set_overrides_apply_and_bad_values_exit_2_without_traceback(tmp_path):
    sc = _scenario(tmp_path)
    res = _cli("run", str(sc), "--set", "parallelism.tp=3", "--no-progress", cwd=tmp_path)
    assert res.returncode == 2
    assert "parallelism.tp" in res.stderr and "3 x 2" in res.stderr and "Traceback" not in res.stderr
    res = _cli("run", str(sc), "--set", "network.cc.kind=tcp", "--no-progress", cwd=tmp_path)
    assert res.returncode == 2 and "network.cc.kind ('tcp')" in res.stderr
    res = _cli("run", str(tmp_path / "missing.toml"), cwd=tmp_path)
    assert res.returncode == 2 and "not found" in res.stderr


def test_run_tables_and_trace_choose_the_files_and_the_report_still_reads_them(tmp_path):
    out = tmp_path / "pq"
    sc = str(_scenario(tmp_path))
    res = _cli(
        "run",
        sc,
        "--out",
        str(out),
        "--set",
        'run.tables=["parquet"]',
        "--set",
        "run.trace=false",
        "--no-progress",
        cwd=tmp_path,
    )
    assert res.returncode == 0, res.stderr
    files = {p.name for p in out.iterdir()}
    assert {"tasks.parquet", "flows.parquet", "summary.json"} <= files
    assert not {"tasks.csv", "flows.csv", "trace.json"} & files
    res = _cli("report", str(out), "--out", str(tmp_path / "r.html"), cwd=tmp_path)
    assert res.returncode == 0, res.stderr
    assert "Slowest flows" in (tmp_path / "r.html").read_text()
    for bad in ('["xlsx"]', "[]", '"parquet"'):
        res = _cli("run", sc, "--out", str(tmp_path / "x"), "--set", f"run.tables={bad}", "--no-progress", cwd=tmp_path)
        assert res.returncode == 2 and "run.tables (" in res.stderr and "Traceback" not in res.stderr, res.stderr


def test_a_failed_run_exits_2_and_leaves_a_partial_directory(tmp_path):
    out = tmp_path / "bad"
    res = _cli(
        "run",
        str(_scenario(tmp_path)),
        "--out",
        str(out),
        "--set",
        'collectives.dp.algo="pxn"',  # an all-to-all algorithm: found when the DP all-reduce is planned
        "--no-progress",
        cwd=tmp_path,
    )
    assert res.returncode == 2 and "does not implement all_reduce" in res.stderr
    summary = json.loads((out / "summary.json").read_text())
    assert summary["status"] == "failed" and "does not implement all_reduce" in summary["reason"]


def test_several_iterations_are_reported_per_iteration(tmp_path):
    out = tmp_path / "iters"
    res = _cli(
        "run", str(_scenario(tmp_path)), "--out", str(out), "--set", "run.iterations=3", "--no-progress", cwd=tmp_path
    )
    assert res.returncode == 0, res.stderr
    assert "mean of iterations 2..3" in res.stdout and "3 iterations in" in res.stdout
    summary = json.loads((out / "summary.json").read_text())
    assert summary["iterations"] == 3 and len(summary["iteration_times_s"]) == 3
    assert summary["run"]["iterations"] == 3
    header = (out / "tasks.csv").read_text().splitlines()[0].split(",")
    assert "iteration" in header


def test_bad_iteration_counts_exit_2_with_one_line_naming_the_field(tmp_path):
    sc = _scenario(tmp_path)
    for bad in ("0", "-1", "x"):
        res = _cli("run", str(sc), "--set", f"run.iterations={bad}", "--no-progress", cwd=tmp_path)
        assert res.returncode == 2, (bad, res.stderr)
        lines = [ln for ln in res.stderr.splitlines() if "error" in ln]
        assert len(lines) == 1 and "run.iterations (" in lines[0] and bad in lines[0], (bad, res.stderr)
        assert "Traceback" not in res.stderr


def test_bad_input_leaves_a_previous_run_directory_untouched(tmp_path):
    """A typo caught on the cluster, the parallel layout or a fault selector is refused before the run
    directory is cleared: it used to replace a finished run's files with a failed summary.json."""
    from tests.cli_harness import assert_clean, run_cli

    scenario, out = str(_scenario(tmp_path)), tmp_path / "out"
    assert run_cli(["run", scenario, "--out", str(out), "--no-progress"]).rc == 0
    before = {p.name: p.read_bytes() for p in out.iterdir() if p.is_file()}
    assert {"summary.json", "tasks.parquet", "flows.parquet"} <= set(before)
    for bad, needle in [
        ('cluster.topology="no-such-topology"', "cluster.topology ('no-such-topology') is neither a topology file"),
        ("parallelism.tp=3", "does not divide the cluster's 16 GPUs"),
        ("faults.gpus=[{node = 5, factor = 2.0}]", "faults.gpus[0].node (5) is not a node of topology"),
    ]:
        argv = ["run", scenario, "--out", str(out), "--no-progress", "--set", bad]
        res = run_cli(argv)
        assert_clean(res, argv, allowed=(2,))
        assert needle in res.err, (bad, res.err)
        assert {p.name: p.read_bytes() for p in out.iterdir() if p.is_file()} == before, bad
    res = run_cli(["run", scenario, "--out", str(tmp_path / "new"), "--set", "parallelism.tp=3"])
    assert res.rc == 2 and not (tmp_path / "new").exists()  # nothing written for a refused run


def test_bad_jobs_input_leaves_a_previous_run_directory_untouched(tmp_path):
    """The same for [[jobs]] scenarios (run_jobs cleared the directory before placing the jobs)."""
    from tests.cli_harness import assert_clean, run_cli

    out = tmp_path / "out"
    out.mkdir()
    (out / "summary.json").write_text('{"status": "ok", "iteration_time_s": 1.0}')
    (out / "tasks.csv").write_text("id\n0\n")
    two_jobs = str(REPO / "scenarios" / "two-jobs.toml")
    for bad, needle in [
        ("jobs[0].parallelism.dp=40", "jobs[0] (a) needs 160 GPUs"),
        ("jobs[0].parallelism.tp=5", "jobs[0] (a): parallelism.tp (5) must divide model.heads (12)"),
        ("faults.gpus=[{node = 99, factor = 2.0}]", "faults.gpus[0].node (99) is not a node"),
    ]:
        argv = ["run", two_jobs, "--out", str(out), "--no-progress", "--set", bad]
        res = run_cli(argv)
        assert_clean(res, argv, allowed=(2,))
        assert needle in res.err, (bad, res.err)
        assert sorted(p.name for p in out.iterdir()) == ["summary.json", "tasks.csv"], bad
        assert (out / "summary.json").read_text() == '{"status": "ok", "iteration_time_s": 1.0}'


def test_bad_link_faults_are_refused_before_the_run_directory_is_touched(tmp_path):
    """A [[faults.links]] rule naming a node the simulated network lacks, two nodes without a link between
    them, or what the flow level does not model (a fault at t > 0, a link down) used to be found by the
    backend, after planning and lowering, once the previous run had been cleared. The messages name the
    field and nodes to use."""
    from tests.cli_harness import assert_clean, run_cli

    out = tmp_path / "out"
    out.mkdir()
    (out / "summary.json").write_text('{"status": "ok"}')
    cases = [
        ('{a = "nic0", b = "rail0.0", rate_factor = 0.5}', "faults.links[0].a ('nic0') is not a node of the network the analytic"),
        ('{a = "n0.g0", b = "rail0.1", rate_factor = 0.5}', "no link between 'n0.g0' and 'rail0.1'; name two adjacent nodes: 'n0.g0' is "
                                         "linked to ['n0.nvsw', 'n0.pcie0']"),
        ('{a = "n0.nic0", b = "rail0.0", rate_factor = 0.5, at = "1ms"}', "faults.links[0].at (0.001 s) > 0 needs"),
        ('{a = "n0.nic0", b = "rail0.0", rate_factor = 0.0}', "faults.links[0].rate_factor (0) takes the link down"),
    ]  # fmt: skip
    for scenario in (str(_scenario(tmp_path)), str(REPO / "scenarios" / "two-jobs.toml")):
        for rule, needle in cases[:1] if "two-jobs" in scenario else cases:
            argv = ["run", scenario, "--out", str(out), "--backend", "analytic", "--set", f"faults.links=[{rule}]"]
            res = run_cli(argv)
            assert_clean(res, argv, allowed=(2,))
            assert needle in res.err, (rule, res.err)
            assert [p.name for p in out.iterdir()] == ["summary.json"], rule
            assert (out / "summary.json").read_text() == '{"status": "ok"}'
