"""``hetero-ns3 validate --workers``: the same held-out training cases in one process and in 2 worker processes,
side by side in one run, with the values checked equal.

Reported: wall time of each (fresh output directory each), their ratio, and the largest resident set of any
process of each run (``getrusage(RUSAGE_CHILDREN)`` after it, so the second figure is the larger of the two runs).

    .venv/bin/python bench/bench_validate_workers.py [--workers 2] [--case NAME ...]
"""

from __future__ import annotations

import argparse
import json
import resource
import sys
import tempfile
from pathlib import Path

from bench_sweep import timed

ROOT = Path(__file__).resolve().parent.parent
#: Eight held-out training rows of 8 to 90 s each in one process (about 3.5 min together on a 2-core machine).
CASES = (
    "heldout.nemo.gpt3-5b.h100x64",
    "heldout.nemo.gpt3-20b.h100x64",
    "heldout.nemo.mixtral-8x7b.b200x64.ep8",
    "heldout.mbridge.gpt-oss-120b.b200x64",
    "heldout.nemo.llama3-70b.b200x64.cp2",
    "heldout.nemo.llama2-7b.128k.h100x128.cp4",
    "heldout.mbridge.llama3-70b.h100x64.fp8cs",
    "heldout.nemo.llama2-70b.h100x64",
)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--case", action="append", default=[])
    args = ap.parse_args()
    cases = args.case or list(CASES)
    sel = [x for c in cases for x in ("--case", c)]
    with tempfile.TemporaryDirectory() as tmp:
        rows = []
        for workers in (1, args.workers):
            out = Path(tmp) / f"w{workers}"
            cmd = [sys.executable, "-m", "hetero_ns3", "validate", *sel, "--workers", str(workers), "--out", str(out)]
            wall = timed(cmd, ROOT, ok=(0, 1))  # 1: some case is out of tolerance, which is not the question here
            rss = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 2**20
            values = {r["case"]: r["simulated"] for r in json.loads((out / "validation.json").read_text())}
            rows.append((workers, wall, rss, values))
    (_, w1, r1, v1), (n, wn, rn, vn) = rows
    if v1 != vn:
        raise SystemExit(f"values differ between 1 and {n} workers: {v1} vs {vn}")
    print(f"{len(cases)} cases, values equal to the last digit")
    print("| workers | wall s | ratio to 1 worker | largest process so far, GiB |")
    print("| --- | --- | --- | --- |")
    print(f"| 1 | {w1:.1f} | 1.00 | {r1:.2f} |")
    print(f"| {n} | {wn:.1f} | {w1 / wn:.2f}x faster | {rn:.2f} |")


if __name__ == "__main__":
    main()
