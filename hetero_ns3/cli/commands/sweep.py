"""``hetero-ns3 sweep``: run every point of a study file (local process pool or a Dask cluster)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

NAME = "sweep"
HELP = "run a study (a base scenario swept over axes) on a local process pool or a Dask cluster"


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("study", help="study.toml, or a directory holding one (e.g. scenarios/studies/h-levels)")
    p.add_argument("--workers", "-j", type=int, default=1, help="local worker processes (default 1)")
    where = p.add_mutually_exclusive_group()
    where.add_argument("--scheduler", metavar="ADDRESS", help="a dask.distributed scheduler, e.g. tcp://head:8786")
    where.add_argument("--local", action="store_true", help="run on a local process pool (the default)")
    p.add_argument("--out", default=None, help="output directory (default: runs/studies/<study name>)")
    p.add_argument("--resume", action="store_true", help="skip points whose run directory is complete")
    p.add_argument("--dry-run", action="store_true", help="list the points (id, coordinates) and run nothing")
    p.add_argument("--no-progress", action="store_true", help="no progress bar (one line per point still)")


def _line(point, res, done: int, total: int) -> str:
    what = f"{res.status:<6} {point.point_id}  {point.label() or '(base)'}"
    tail = f"({res.wall_s:.1f} s)" if res.status == "ok" else f"-- {res.error}"
    return f"[{done:>{len(str(total))}}/{total}] {what} {tail}"


def run(args: argparse.Namespace) -> int:
    from hetero_ns3.outputs import check_out_dir
    from hetero_ns3.studies import load_study_file, make_executor, plan_sweep, run_sweep

    study = load_study_file(args.study)
    out = Path(args.out) if args.out else Path("runs") / "studies" / study.name
    check_out_dir(out, "--out" if args.out else "the study's output directory (--out)")
    if args.dry_run:
        points, tasks, skipped = plan_sweep(study, out, args.resume)
        for p in points:
            mark = "done" if p.point_id in skipped else "todo"
            print(f"{p.point_id}  {mark}  {p.label() or '(base)'}")
        print(f"{len(points)} points, {len(tasks)} to run -> {out}", file=sys.stderr)
        return 0
    executor = make_executor(args.workers, args.scheduler)
    where = f"scheduler {args.scheduler}" if args.scheduler else f"{args.workers} local worker(s)"
    print(f"hetero-ns3 sweep: {study.name} ({study.source}) on {where} -> {out}", file=sys.stderr)

    def on_result(point, res, done, total):
        from tqdm import tqdm

        tqdm.write(_line(point, res, done, total), file=sys.stderr)

    from hetero_ns3.studies.sweep import SweepTerminated

    try:
        outcome = run_sweep(
            study, out, executor, resume=args.resume, on_result=on_result, progress=not args.no_progress
        )
    except SweepTerminated:
        print("hetero-ns3 sweep: terminated; finished points are kept, rerun with --resume", file=sys.stderr)
        return 143
    n_fail = len(outcome.failed)
    print(
        f"{len(outcome.points)} points: {len(outcome.results) - n_fail} ran ok, {n_fail} failed, "
        f"{len(outcome.skipped)} already complete; {outcome.wall_s:.1f} s; table {outcome.table}"
    )
    if n_fail:
        print(f"hetero-ns3 sweep: {n_fail} point(s) failed: {', '.join(outcome.failed)}", file=sys.stderr)
        return 1
    return 0
