"""``hetero-ns3 sweep`` as a user runs it: a 6-point analytic study on 2 local workers, resume after SIGTERM,
failing points, the same sweep on a Dask LocalCluster, and the Parquet tables' documented types."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from hetero_ns3.cli.main import main as cli_main
from hetero_ns3.errors import ScenarioError
from hetero_ns3.studies import expand, load_study_file
from hetero_ns3.studies.table import BASE_COLUMNS, TRAINING_COLUMNS

pytestmark = pytest.mark.e2e
REPO = Path(__file__).resolve().parent.parent.parent
TOPO = REPO / "tests" / "data" / "one-node-4gpu.toml"
VOLATILE = ["wall_s", "host"]  # wall time and worker host differ run to run


def _cli(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "hetero_ns3", *args], capture_output=True, text=True, timeout=300, cwd=cwd
    )


def write_study(root: Path, tps=(2, 4), seq_lens=(128, 256, 512), extra: str = "") -> Path:
    d = root / "study"
    d.mkdir(parents=True, exist_ok=True)
    (d / "base.toml").write_text(
        f"""
[model]
name = "gpt3-125m"
layers = 2
seq_len = 256
[parallelism]
tp = 2
global_batch = 2
micro_batch = 1
[cluster]
topology = "{TOPO}"
[run]
backend = "analytic"
""",
        encoding="utf-8",
    )
    (d / "study.toml").write_text(
        f"""
[study]
name = "tiny"
base = "base.toml"
[axes]
"parallelism.tp" = {list(tps)}
"model.seq_len" = {list(seq_lens)}
{extra}
""",
        encoding="utf-8",
    )
    return d


@pytest.fixture(scope="module")
def swept(tmp_path_factory):
    root = tmp_path_factory.mktemp("sweep")
    study = write_study(root)
    out = root / "out"
    res = _cli("sweep", str(study), "--workers", "2", "--out", str(out), "--no-progress", cwd=root)
    assert res.returncode == 0, res.stderr
    return root, study, out, res


def test_six_points_on_two_workers_match_single_runs(swept, tmp_path):
    root, study, out, res = swept
    points = expand(load_study_file(study))
    assert sorted(p.name for p in (out / "runs").iterdir()) == sorted(p.point_id for p in points)
    assert res.stderr.count(" ok ") >= 6 and "6 points: 6 ran ok, 0 failed" in res.stdout
    df = pd.read_parquet(out / "study.parquet")
    assert len(df) == 6 and (df["status"] == "ok").all()
    assert len(set(df["host"] + df["run_dir"])) == 6
    pids = {json.loads((out / "runs" / p.point_id / "point.json").read_text())["pid"] for p in points}
    assert len(pids) == 2  # two worker processes, each ran several points
    for p in points:
        sets = [f"{k}={v}" for k, v in p.coords]
        run_out = tmp_path / p.point_id
        args = ["run", str(study / "base.toml"), "--out", str(run_out), "--no-progress"]
        assert cli_main([*args, *[x for s in sets for x in ("--set", s)]]) == 0
        single = json.loads((run_out / "summary.json").read_text())
        row = df[df["point_id"] == p.point_id].iloc[0]
        assert row["iteration_time_s"] == single["iteration_time_s"]
        assert row["compute_s[H100-SXM]"] == single["breakdown"]["per_gpu_type"]["H100-SXM"]["compute_s"]
        assert row["mfu"] == single["run"]["mfu"]
        assert row["tokens_per_s"] == pytest.approx(2 * dict(p.coords)["model.seq_len"] / row["iteration_time_s"])


def test_study_and_run_tables_round_trip_with_the_documented_types(swept):
    _, _, out, _ = swept
    schema = pq.read_schema(out / "study.parquet")
    arrow = {"string": pa.string(), "int64": pa.int64(), "float64": pa.float64()}
    for col, dtype in {**BASE_COLUMNS, **TRAINING_COLUMNS}.items():
        assert schema.field(col).type == arrow[dtype], col
    assert schema.field("parallelism.tp").type == pa.int64() and schema.field("model.seq_len").type == pa.int64()
    assert schema.field("compute_s[H100-SXM]").type == pa.float64()
    run = max((out / "runs").iterdir())  # any point; each has a flows table (empty where every call is fused)
    tasks = pq.read_schema(run / "tasks.parquet")
    for col, t in {"id": pa.int64(), "gpu": pa.string(), "start_s": pa.float64(), "size_bytes": pa.int64()}.items():
        assert tasks.field(col).type == t
    flows = pq.read_schema(run / "flows.parquet")
    for col, t in {
        "fct_s": pa.float64(),
        "size_bytes": pa.int64(),
        "intra_node": pa.bool_(),
        "src": pa.string(),
    }.items():
        assert flows.field(col).type == t
    csv = pd.read_csv(run / "flows.csv")
    par = pd.read_parquet(run / "flows.parquet")
    assert list(par.columns) == list(csv.columns) and len(par) == len(csv)
    assert (par["fct_s"].to_numpy() == csv["fct_s"].to_numpy()).all()
    from hetero_ns3.results import load_study

    st = load_study(out)
    assert st.attrs["axes"] == ["parallelism.tp", "model.seq_len"] and len(st) == 6


def _sweep_cmd(study: Path, out: Path) -> list[str]:
    """``hetero-ns3 sweep STUDY`` on one worker as a subprocess command (for the signal and kill tests)."""
    return [
        sys.executable,
        "-m",
        "hetero_ns3",
        "sweep",
        str(study),
        "--workers",
        "1",
        "--out",
        str(out),
        "--no-progress",
    ]


@pytest.mark.slow
def test_resume_after_sigterm_finishes_the_rest_and_reruns_nothing_complete(tmp_path):
    study = write_study(tmp_path, seq_lens=(128, 256, 384))
    out = tmp_path / "out"
    cmd = _sweep_cmd(study, out)
    proc = subprocess.Popen(cmd, cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.time() + 120
    done: dict[str, tuple] = {}
    while time.time() < deadline and len(done) < 2:
        time.sleep(0.1)
        for pj in (out / "runs").glob("*/point.json") if (out / "runs").is_dir() else []:
            doc = json.loads(pj.read_text())
            if doc["status"] == "ok":
                done[pj.parent.name] = (pj.stat().st_mtime_ns, (pj.parent / "summary.json").stat().st_mtime_ns)
    assert len(done) >= 2, "the sweep did not finish two points in time"
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 143, err
    assert "--resume" in err
    finished = {
        pj.parent.name: (pj.stat().st_mtime_ns, (pj.parent / "summary.json").stat().st_mtime_ns)
        for pj in (out / "runs").glob("*/point.json")
        if json.loads(pj.read_text())["status"] == "ok"
    }
    assert 2 <= len(finished) < 6  # stopped mid-way
    res = _cli("sweep", str(study), "--workers", "1", "--out", str(out), "--resume", "--no-progress", cwd=tmp_path)
    assert res.returncode == 0, res.stderr
    assert f"{len(finished)} already complete" in res.stdout
    for pid, stamps in finished.items():  # untouched
        pj = out / "runs" / pid / "point.json"
        assert (pj.stat().st_mtime_ns, (pj.parent / "summary.json").stat().st_mtime_ns) == stamps
    df = pd.read_parquet(out / "study.parquet")
    assert len(df) == 6 and (df["status"] == "ok").all()


def test_a_failing_point_is_recorded_and_the_exit_code_is_non_zero(tmp_path):
    # tp = 1 on 4 GPUs makes dp = 4 replicas for a global batch of 2: the planner rejects it at run time.
    study = write_study(tmp_path, tps=(1, 4), seq_lens=(128,))
    out = tmp_path / "out"
    res = _cli("sweep", str(study), "--workers", "1", "--out", str(out), "--no-progress", cwd=tmp_path)
    assert res.returncode == 1, res.stderr
    assert "1 ran ok, 1 failed" in res.stdout and "failed" in res.stderr
    df = pd.read_parquet(out / "study.parquet").set_index("parallelism.tp")
    assert df.loc[4, "status"] == "ok" and df.loc[1, "status"] == "failed"
    assert "ScenarioError" in df.loc[1, "error"] and pd.isna(df.loc[1, "iteration_time_s"])
    summary = json.loads((out / df.loc[1, "run_dir"] / "summary.json").read_text())
    assert summary["status"] == "failed" and summary["reason"]
    # --resume reruns the failed point (and only it)
    res = _cli("sweep", str(study), "--out", str(out), "--resume", "--no-progress", cwd=tmp_path)
    assert res.returncode == 1 and "1 already complete" in res.stdout
    # a sweep killed before its end leaves no table: the readers say how to write it, and that works
    (out / "study.parquet").unlink()
    from hetero_ns3.results import load_study

    with pytest.raises(ScenarioError, match="its sweep stopped before writing the table") as err:
        load_study(out)
    hinted = re.search(r"`hetero-ns3 (sweep [^`]+)`", str(err.value)).group(1).split()
    assert _cli(*hinted, "--no-progress", cwd=tmp_path).returncode == 1  # the failed point fails again
    assert len(load_study(out)) == 2


def test_the_same_sweep_on_a_dask_local_cluster_gives_identical_rows(swept, tmp_path):
    distributed = pytest.importorskip("dask.distributed")
    _, study, out, _ = swept
    with distributed.LocalCluster(
        n_workers=1, threads_per_worker=1, processes=False, dashboard_address=None, protocol="tcp"
    ) as cluster:
        res = subprocess.run(
            [sys.executable, "-m", "hetero_ns3", "sweep", str(study), "--scheduler", cluster.scheduler_address,
             "--out", str(tmp_path / "dask"), "--no-progress"],
            capture_output=True, text=True, timeout=300, cwd=tmp_path,
            env={**os.environ, "MPLBACKEND": "Agg"},
        )  # fmt: skip
    assert res.returncode == 0, res.stderr
    assert "on scheduler tcp://" in res.stderr
    local = pd.read_parquet(out / "study.parquet").drop(columns=VOLATILE)
    dask = pd.read_parquet(tmp_path / "dask" / "study.parquet").drop(columns=VOLATILE)
    pd.testing.assert_frame_equal(local, dask)


def _children(pid: int) -> list[int]:
    out = []
    for task in Path(f"/proc/{pid}/task").iterdir():
        out += [int(x) for x in (task / "children").read_text().split()]
    return out


@pytest.mark.slow
@pytest.mark.skipif(not Path("/proc/self/task").is_dir(), reason="needs Linux /proc to find the worker")
def test_a_killed_worker_fails_its_points_and_the_sweep_goes_on(tmp_path):
    study = write_study(tmp_path, seq_lens=(128, 256))
    out = tmp_path / "out"
    cmd = _sweep_cmd(study, out)
    proc = subprocess.Popen(cmd, cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.time() + 120
    while time.time() < deadline and not list(out.glob("runs/*/point.json")):
        time.sleep(0.05)
    workers = [c for c in _children(proc.pid) if "spawn_main" in Path(f"/proc/{c}/cmdline").read_text()]
    assert workers, "no worker process found"
    os.kill(workers[0], signal.SIGKILL)  # like the OOM killer
    _, err = proc.communicate(timeout=180)
    assert proc.returncode == 1, err
    df = pd.read_parquet(out / "study.parquet")
    lost = df[df["status"] != "ok"]
    assert len(lost) >= 1 and lost["error"].str.contains("worker lost").all()
    assert (df["status"] == "ok").sum() >= 1  # the finished point, and any run by the new pool
    res = _cli("sweep", str(study), "--out", str(out), "--resume", "--no-progress", cwd=tmp_path)
    assert res.returncode == 0, res.stderr
    assert (pd.read_parquet(out / "study.parquet")["status"] == "ok").all()
