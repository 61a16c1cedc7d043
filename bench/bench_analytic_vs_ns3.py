"""Flow-level (analytic) vs packet-level (ns3) backend on the same small plans (issue 6, validation).

Scenarios (100 Gb/s, 1 us links; default network config of each backend, framing aligned):

* ``single``: one 8 MB flow across a leaf-spine (4 hops).
* ``chain``: 100 us compute -> 4 MB flow -> 100 us compute -> 4 MB flow back (a dependency chain).
* ``ring8``: 64 MiB ring all-reduce on 8 hosts of one switch, one channel (every link carries one flow
  per direction at a time: no congestion).
* ``incast4``: 4 hosts send 8 MB each to one host at once (a congested egress: fair share vs PFC/CC).
* ``perm16``: a random permutation of 2 MB flows on ``leafspine:4,2,4`` (2:1 oversubscribed, ECMP).

Prints, per scenario and CC (none, dcqcn, hpcc), the iteration time (makespan) of both backends and the
relative difference. The analytic side uses the packet backend's framing (``AnalyticConfig.like_nic``)
and its ECMP hash (``ecmp_hash="packet"``), so both put every flow on the same path. Reproduce: ``.venv/bin/python bench/bench_analytic_vs_ns3.py`` (needs the ns-3
wheel and a C++ compiler; ~1-2 minutes including the ns-3 import).
"""

from __future__ import annotations

import sys
import time

import numpy as np

from hetero_ns3.network.analytic import AnalyticConfig, simulate_plan
from hetero_ns3.plan.builder import PlanBuilder
from hetero_ns3.plan.dag import ExecutionPlan
from hetero_ns3.topology import leaf_spine, star
from hetero_ns3.topology.graph import NetGraph


def single() -> tuple[NetGraph, ExecutionPlan]:
    b = PlanBuilder([f"h{i}" for i in range(8)])
    b.add_flow("h0", "h5", 8_000_000)
    return leaf_spine(2, 2, 4), b.build()


def chain() -> tuple[NetGraph, ExecutionPlan]:
    b = PlanBuilder([f"h{i}" for i in range(8)])
    c = b.add_compute("h0", 100e-6)
    f = b.add_flow("h0", "h6", 4_000_000, deps=[c])
    c2 = b.add_compute("h6", 100e-6, deps=[f])
    b.add_flow("h6", "h0", 4_000_000, deps=[c2])
    return leaf_spine(2, 2, 4), b.build()


def ring8() -> tuple[NetGraph, ExecutionPlan]:
    n, total = 8, 64 * 2**20
    b = PlanBuilder([f"h{i}" for i in range(n)])
    last = [b.add_compute(g, 0.0) for g in range(n)]
    for _ in range(2 * (n - 1)):
        sends = [b.add_flow(g, (g + 1) % n, total // n, deps=[last[g]]) for g in range(n)]
        last = [sends[(g - 1) % n] for g in range(n)]
    return star(n), b.build()


def incast4() -> tuple[NetGraph, ExecutionPlan]:
    b = PlanBuilder([f"h{i}" for i in range(5)])
    for s in range(1, 5):
        b.add_flow(s, 0, 8_000_000)
    return star(5), b.build()


def perm16() -> tuple[NetGraph, ExecutionPlan]:
    rng = np.random.default_rng(3)
    perm = rng.permutation(16)
    while np.any(perm == np.arange(16)):
        perm = rng.permutation(16)
    b = PlanBuilder([f"h{i}" for i in range(16)])
    for g in range(16):
        b.add_flow(g, int(perm[g]), 2_000_000)
    return leaf_spine(4, 2, 4), b.build()


SCENARIOS = {"single": single, "chain": chain, "ring8": ring8, "incast4": incast4, "perm16": perm16}


def main() -> int:
    from hetero_ns3.network.config import CcConfig, NetworkConfig
    from hetero_ns3.network.ns3.replay import run_plan

    print(
        "| scenario | cc | analytic makespan (us) | ns3 makespan (us) | analytic / ns3 - 1 | ns3 wall s | analytic wall s |"
    )
    print("|---|---|---:|---:|---:|---:|---:|")
    for name, make in SCENARIOS.items():
        graph, plan = make()
        for cc in ("none", "dcqcn", "hpcc"):
            net = NetworkConfig(cc=CcConfig(kind=cc))
            t = time.perf_counter()
            cfg = AnalyticConfig.like_nic(net.nic, ecmp_hash="packet")  # same framing, same ECMP paths
            a = simulate_plan(graph, plan, cfg, seed=net.routing.ecmp_seed)
            ta = time.perf_counter() - t
            t = time.perf_counter()
            p = run_plan(graph, plan, net, seed=1)
            tp = time.perf_counter() - t
            ma, mp = a.times.makespan_s, p.times.makespan_s
            done = "" if p.completed else " (incomplete)"
            print(
                f"| {name} | {cc} | {ma * 1e6:.2f} | {mp * 1e6:.2f}{done} | {ma / mp - 1:+.2%} | {tp:.2f} | {ta:.3f} |",
                flush=True,
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
