"""CPU time of compiling a scenario's workload (``workload.planner.build_plan``: programs, per-rank ops, the
compute-only replay), with ``StepPrograms.cost``'s identity lookup (now) against the value-keyed lookup alone
(before session 14: every call hashed the step's kernels, a frozen dataclass each), in the same process, in
alternating rounds; the two workloads are checked equal (SHA-256 over every rank's ops).

Usage (docs/benchmarks.md, "Compiling the workload"):

    .venv/bin/python bench/bench_compile.py hetero_ns3/data/validation/heldout/gpt-oss-120b-h100x64.toml --rounds 2
"""

from __future__ import annotations

import argparse
import hashlib
import statistics
import time

from hetero_ns3.scenario.cluster import resolve_cluster_gpus
from hetero_ns3.scenario.loader import load_scenario
from hetero_ns3.workload.compiler import StepPrograms
from hetero_ns3.workload.planner import build_plan


def _value_keyed(self: StepPrograms, gpu_type: str, kernels: tuple) -> tuple[float, float, float]:
    """The lookup before the identity table: by value only."""
    key = (gpu_type, kernels)
    if key not in self._cost:
        self._cost[key] = self.spec.roofline.time(kernels, self.spec.gpu_of(gpu_type))
    return self._cost[key]


def _digest(built) -> str:
    h = hashlib.sha256()
    for prog in built.workload.programs:
        for op in prog.ops:
            h.update(repr(op).encode())
    return h.hexdigest()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("scenario")
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--set", action="append", default=[], metavar="KEY=VALUE")
    args = ap.parse_args()
    sc = load_scenario(args.scenario, args.set)
    gpus = resolve_cluster_gpus(sc.cluster, sc.base_dir, sc.compute.extra_gpus())
    now = StepPrograms.cost
    cpu: dict[str, list[float]] = {"before": [], "now": []}
    digests: dict[str, str] = {}
    for _ in range(args.rounds):
        for which, fn in (("before", _value_keyed), ("now", now)):
            StepPrograms.cost = fn  # type: ignore[method-assign]
            c0 = time.process_time()
            built = build_plan(sc.model, sc.parallelism, gpus, sc.compute, sc.base_dir)
            cpu[which].append(time.process_time() - c0)
            digests[which] = _digest(built)
            del built
    StepPrograms.cost = now  # type: ignore[method-assign]
    same = digests["before"] == digests["now"]
    b, n = statistics.median(cpu["before"]), statistics.median(cpu["now"])
    print(f"{args.scenario}: build_plan CPU, median of {args.rounds}: before {b:.1f} s, now {n:.1f} s, {b / n:.2f}x")
    print(f"  rounds before {[round(x, 1) for x in cpu['before']]}, now {[round(x, 1) for x in cpu['now']]}")
    print(f"  workloads identical: {same} ({digests['now'][:16]})")
    if not same:
        raise SystemExit(1)


if __name__ == "__main__":
    main()
