"""Cost of the host issue model (``[compute] host_op``, ``host_sync_gap``): CPU time of planning and lowering a
scenario (``pipeline.lower_scenario``) and of its analytic replay (``replay_times``), tasks in the plan, with the
model off (``host_sync_gap = 0``, the baseline), with the default (the host gaps after synchronisations alone) and
with an issue cost per op as well, in the same process, in alternating rounds.

Usage (docs/benchmarks.md, "The host issue model"):

    .venv/bin/python bench/bench_host_issue.py hetero_ns3/data/validation/heldout/qwen3-30b-a3b-h100x16-fp8cs.toml \\
        --host-op 100us --rounds 3
"""

from __future__ import annotations

import argparse
import statistics
import time

import numpy as np

from hetero_ns3.network.analytic.times_only import replay_times
from hetero_ns3.pipeline import load_run_cluster, lower_scenario
from hetero_ns3.scenario.loader import load_scenario
from hetero_ns3.topology import build_graph


def one_run(path: str, sets: list[str]) -> tuple[float, float, int, float]:
    """(lowering CPU s, replay CPU s, tasks, iteration s) of one run."""
    sc = load_scenario(path, sets)
    cluster = load_run_cluster(sc, "analytic")
    graph = build_graph(cluster)
    c0 = time.process_time()
    _, low = lower_scenario(sc, graph, cluster)
    c1 = time.process_time()
    times = replay_times(graph, low.plan).times
    c2 = time.process_time()
    return c1 - c0, c2 - c1, len(low.plan), float(np.max(times.finish_s))


def run_variants(
    path: str, variants: dict[str, list[str]], rounds: int
) -> dict[str, list[tuple[float, float, int, float]]]:
    """:func:`one_run` of each variant (its ``--set`` overrides) in alternating rounds."""
    runs: dict[str, list[tuple[float, float, int, float]]] = {which: [] for which in variants}
    for _ in range(rounds):
        for which, sets in variants.items():
            runs[which].append(one_run(path, sets))
    return runs


def report(runs: dict[str, list[tuple[float, float, int, float]]], head: str, base: str) -> None:
    """Print one row per variant (tasks, lowering and replay CPU as median and range, iteration) and each variant's
    ratios to ``base``."""
    print(f"| {head} | tasks | lowering CPU s (median, range) | replay CPU s (median, range) | iteration s |")
    print("| --- | --- | --- | --- | --- |")
    med = {}
    for which, rs in runs.items():
        low = [r[0] for r in rs]
        rep = [r[1] for r in rs]
        med[which] = (statistics.median(low), statistics.median(rep), rs[0][2])
        print(
            f"| {which} | {rs[0][2]:,} | {med[which][0]:.2f} ({min(low):.2f}-{max(low):.2f}) "
            f"| {med[which][1]:.2f} ({min(rep):.2f}-{max(rep):.2f}) | {rs[0][3]:.3f} |"
        )
    for which, (low, rep, tasks) in med.items():
        if which != base:
            b_low, b_rep, b_tasks = med[base]
            print(
                f"{which} / {base}: tasks {tasks / b_tasks:.3f}x, lowering CPU {low / b_low:.2f}x, replay CPU {rep / b_rep:.2f}x"
            )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("scenario")
    ap.add_argument("--host-op", default="100us", help="host_op of the 'on' runs (default 100us)")
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args()
    variants = {"off": ["compute.host_sync_gap=0s"], "default": [], "on": [f"compute.host_op={args.host_op}"]}
    report(run_variants(args.scenario, variants, args.rounds), "model", "off")


if __name__ == "__main__":
    main()
