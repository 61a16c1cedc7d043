"""Sweep throughput: a 100-point analytic study on 1 and on 2 local workers, against bare ``hetero-ns3 run``.

Each point is a tiny scenario (GPT-3 125M with 2..6 layers on one 4-GPU node, analytic backend), so
the measurement is dominated by what a sweep adds around a run (worker start, scenario loading, run
directory writing, table) rather than by simulation. Reported:

* wall time of ``hetero-ns3 sweep --workers 1`` and ``--workers 2`` (same study, fresh output each) and
  their ratio;
* per point: sweep wall / points (1 worker), against the wall time of a bare ``hetero-ns3 run`` of a
  point (a fresh process each, median of ``--bare`` runs), and the orchestration overhead
  (sweep wall - sum of the points' in-worker wall times) / points.

    .venv/bin/python bench/bench_sweep.py [--points 100] [--bare 5] [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pandas as pd

ROOT = Path(__file__).resolve().parent.parent
TOPO = ROOT / "tests" / "data" / "one-node-4gpu.toml"


def write_study(d: Path, points: int) -> Path:
    layers = [2, 3, 4, 5, 6]
    tps = [2, 4]
    n_seq = max(1, points // (len(layers) * len(tps)))
    seqs = [128 + 32 * i for i in range(n_seq)]
    (d / "base.toml").write_text(
        f'[model]\nname = "gpt3-125m"\nlayers = 2\nseq_len = 128\n'
        f"[parallelism]\ntp = 2\nglobal_batch = 2\nmicro_batch = 1\n"
        f'[cluster]\ntopology = "{TOPO}"\n[run]\nbackend = "analytic"\n',
        encoding="utf-8",
    )
    (d / "study.toml").write_text(
        f'[study]\nname = "bench"\nbase = "base.toml"\n[axes]\n"model.layers" = {layers}\n'
        f'"parallelism.tp" = {tps}\n"model.seq_len" = {seqs}\n',
        encoding="utf-8",
    )
    return d


def timed(cmd: list[str], cwd: Path, ok: tuple[int, ...] = (0,)) -> float:
    """Wall seconds of ``cmd``; stops the benchmark if it exits with a status not in ``ok``."""
    t0 = time.perf_counter()
    res = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True)
    if res.returncode not in ok:
        raise SystemExit(f"{' '.join(cmd)} failed:\n{res.stderr[-2000:]}")
    return time.perf_counter() - t0


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--points", type=int, default=100)
    ap.add_argument("--bare", type=int, default=5, help="bare hetero-ns3 run invocations to time")
    ap.add_argument("--json", default=None)
    args = ap.parse_args()
    py = [sys.executable, "-m", "hetero_ns3"]
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        study = write_study(tmp, args.points)
        out: dict[str, float | int] = {}
        for workers in (1, 2):
            dest = tmp / f"out{workers}"
            out[f"sweep_{workers}w_s"] = timed(
                [*py, "sweep", str(study), "--workers", str(workers), "--out", str(dest), "--no-progress"], tmp
            )
            df = pd.read_parquet(dest / "study.parquet")
            assert (df["status"] == "ok").all() and len(df) == args.points, df["status"].value_counts()
            out[f"points_wall_sum_{workers}w_s"] = float(df["wall_s"].sum())
        out["points"] = int(len(df))
        bare = []
        for i in range(args.bare):
            bare.append(
                timed(
                    [
                        *py,
                        "run",
                        str(study / "base.toml"),
                        "--out",
                        str(tmp / f"bare{i}"),
                        "--no-progress",
                        "--set",
                        f"model.layers={2 + i % 5}",
                    ],
                    tmp,
                )  # fmt: skip
            )
        n = out["points"]
        out["ratio_1w_over_2w"] = out["sweep_1w_s"] / out["sweep_2w_s"]
        out["sweep_per_point_1w_s"] = out["sweep_1w_s"] / n
        out["bare_run_median_s"] = statistics.median(bare)
        out["per_point_over_bare"] = out["sweep_per_point_1w_s"] / out["bare_run_median_s"]
        out["orchestration_overhead_per_point_1w_s"] = (out["sweep_1w_s"] - out["points_wall_sum_1w_s"]) / n
    for k, v in out.items():
        print(f"{k:40s} {v:.3f}" if isinstance(v, float) else f"{k:40s} {v}")
    if args.json:
        Path(args.json).write_text(json.dumps(out, indent=1), encoding="utf-8")


if __name__ == "__main__":
    main()
