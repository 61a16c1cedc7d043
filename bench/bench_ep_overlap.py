"""Cost of expert-parallel overlap (``parallelism.overlap_moe_expert_parallel_comm``): tasks, CPU time of planning and
lowering (``pipeline.lower_scenario``) and of the analytic replay (``replay_times``) with the flag off (the baseline)
and on, in the same process, in alternating rounds (the timing helper of ``bench_host_issue.py``).

Usage (docs/benchmarks.md, "Expert-parallel overlap"):

    .venv/bin/python bench/bench_ep_overlap.py \\
        hetero_ns3/data/validation/heldout/qwen3-30b-a3b-h100x16-ep16-bf16.toml --rounds 3
"""

from __future__ import annotations

import argparse
import statistics

from bench_host_issue import one_run


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("scenario")
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args()
    flag = "parallelism.overlap_moe_expert_parallel_comm"
    variants = {"off": [f"{flag}=false"], "on": [f"{flag}=true"]}
    runs: dict[str, list[tuple[float, float, int, float]]] = {which: [] for which in variants}
    for _ in range(args.rounds):
        for which, sets in variants.items():
            runs[which].append(one_run(args.scenario, sets))
    print("| overlap | tasks | lowering CPU s (median, range) | replay CPU s (median, range) | iteration s |")
    print("| --- | --- | --- | --- | --- |")
    for which, rs in runs.items():
        low = [r[0] for r in rs]
        rep = [r[1] for r in rs]
        print(
            f"| {which} | {rs[0][2]:,} | {statistics.median(low):.2f} ({min(low):.2f}-{max(low):.2f}) "
            f"| {statistics.median(rep):.2f} ({min(rep):.2f}-{max(rep):.2f}) | {rs[0][3]:.3f} |"
        )
    med = {w: (statistics.median(r[0] for r in rs), statistics.median(r[1] for r in rs)) for w, rs in runs.items()}
    print(
        f"on / off: tasks {runs['on'][0][2] / runs['off'][0][2]:.3f}x, lowering CPU {med['on'][0] / med['off'][0]:.2f}x, "
        f"replay CPU {med['on'][1] / med['off'][1]:.2f}x"
    )


if __name__ == "__main__":
    main()
