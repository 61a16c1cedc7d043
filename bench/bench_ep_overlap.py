"""Cost of expert-parallel overlap (``parallelism.overlap_moe_expert_parallel_comm``): tasks, CPU time of planning and
lowering (``pipeline.lower_scenario``) and of the analytic replay (``replay_times``) with the flag off (the baseline)
and on, in the same process, in alternating rounds (the timing helper of ``bench_host_issue.py``).

Usage (docs/benchmarks.md, "Expert-parallel overlap"):

    .venv/bin/python bench/bench_ep_overlap.py \\
        hetero_ns3/data/validation/heldout/qwen3-30b-a3b-h100x16-ep16-bf16.toml --rounds 3
"""

from __future__ import annotations

import argparse

from bench_host_issue import report, run_variants


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("scenario")
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args()
    flag = "parallelism.overlap_moe_expert_parallel_comm"
    variants = {"off": [f"{flag}=false"], "on": [f"{flag}=true"]}
    report(run_variants(args.scenario, variants, args.rounds), "overlap", "off")


if __name__ == "__main__":
    main()
