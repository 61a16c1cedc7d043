"""Isolated-collective reuse on the packet backend, toy TP 8 x DP 2 on two 8-GPU H100 nodes: detailed vs fused
in one process (step time, tasks, events, CPU; the fused CPU includes its isolated ns-3 runs). Usage::

    .venv/bin/python bench/bench_reuse_packet.py
"""

from __future__ import annotations

import resource
from pathlib import Path

from hetero_ns3 import pipeline as P
from hetero_ns3.network.backend import get_backend
from hetero_ns3.scenario.loader import scenario_from_dict
from hetero_ns3.topology import build_graph
from hetero_ns3.workload.planner import plan_scenario

TOY = {"name": "toy", "layers": 4, "hidden": 1024, "heads": 16, "ffn_hidden": 4096, "vocab": 512, "seq_len": 512}
par = {"tp": 8, "pp": 1, "dp": 2, "global_batch": 4, "micro_batch": 1, "zero_stage": 0}
sc = scenario_from_dict(
    {
        "model": TOY,
        "parallelism": par,
        "cluster": {"topology": str(Path(__file__).resolve().parents[1] / "tests" / "data" / "two-node-h100.toml")},
        "run": {"backend": "ns3", "reuse_isolated_collectives": "on"},
    }
)
cluster = P.load_run_cluster(sc, "ns3")
graph = build_graph(cluster)
env = P.collective_env(sc, graph)
eng = get_backend("ns3")
wplan = plan_scenario(sc)


def cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


c0 = cpu()
low0 = P.lower_plan(wplan, sc, env, cluster)
r0 = P.simulate(eng, low0.plan, graph, sc)
c1 = cpu()
fz = P.isolated_fuser(eng, graph, sc, env)
low = P.lower_plan(wplan, sc, env, cluster, fuser=fz)
r1 = P.simulate(eng, low.plan, graph, sc)
c2 = cpu()
print("fused", dict(low.fused))
print(
    f"detailed: step {r0.times.makespan_s:.9f} tasks {len(low0.plan)} events {r0.stats.get('events')} cpu {c1 - c0:.2f}s"
)
print(
    f"fused:    step {r1.times.makespan_s:.9f} tasks {len(low.plan)} events {r1.stats.get('events')} (+ isolated runs) cpu {c2 - c1:.2f}s"
)
print(f"diff {100 * (r1.times.makespan_s / r0.times.makespan_s - 1):+.4f}%")
