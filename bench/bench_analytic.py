"""Benchmark of the flow-level (analytic) backend as the cluster grows (issue 6).

Synthetic DAGs on non-blocking leaf-spine fabrics (``hetero_ns3.topology.leaf_spine``, 100 Gb/s, 1 us):

* ``ring``: every GPU computes a 1 ms "backward", then rings of 16 GPUs (members spread over leaves, like
  data-parallel groups) run a ring all-reduce of 64 MiB on 2 channels: 2(16-1) steps, each a flow to the
  next rank plus, in the reduce-scatter half, a 10 us reduction kernel before forwarding.
* ``perm``: 8 rounds; in each, every GPU sends 4 MiB to a random other GPU (a random derangement), then runs
  a 50 us kernel; a round starts on a GPU when its previous send, receive and kernel are done.

* ``gpt`` (optional, ``--workload gpt``): one training iteration of ``--model`` (default gpt3-6.7b; TP 8,
  PP 4, global batch 16, 1F1B) on DGX-H100-like nodes (8 GPUs on NVSwitch, 8 x 400G NICs) of a
  non-blocking fat-tree (the ``h100-fattree`` preset with ``hosts / 8`` nodes; k = 8 up to 128 GPUs),
  compiled by ``hetero_ns3.workload`` and lowered by ``hetero_ns3.plan.lower_workload`` (NCCL-like
  collectives from ``hetero_ns3.collectives``).

Each size runs in its own process so the peak RSS is that size's. Baseline, same process and same DAG:
``hetero_ns3.plan.dag.critical_path_s`` (a dependency replay with no network), so the ratio is the cost of the
network model per task on top of a plain DAG walk.

Reproduce: ``.venv/bin/python bench/bench_analytic.py --hosts 128 1024 8192``

Saved plans (``--saved PREFIX``): time :func:`simulate_plan` on a plan saved as ``PREFIX.meta.pkl`` (a pickle
of ``{"graph", "gpus", "labels", "categories"}``) and ``PREFIX.plan.npz`` (the ExecutionPlan arrays), e.g. the
GPT-3 175B iterations of ``bench_iteration.py`` dumped after lowering, with the packet backend's framing
and seed 1 as ``bench_iteration.py`` runs it (``--ecmp-key flow`` for per-flow ECMP); prints one JSON line with the wall and CPU seconds of the
call, its routing / event loop / rest split and the peak RSS.
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import time

import numpy as np

from hetero_ns3.network.analytic import simulate_plan
from hetero_ns3.plan.builder import PlanBuilder
from hetero_ns3.plan.dag import ExecutionPlan, critical_path_s
from hetero_ns3.topology import leaf_spine
from hetero_ns3.topology.graph import NetGraph
from hetero_ns3.topology.routing import routing_tables

FABRIC = {128: (8, 16, 16), 1024: (32, 32, 32), 8192: (128, 64, 64)}  # leaves, spines, hosts per leaf


def fabric(n_hosts: int) -> NetGraph:
    if n_hosts in FABRIC:
        leaves, spines, per_leaf = FABRIC[n_hosts]
    else:
        per_leaf = min(64, n_hosts)
        leaves, spines = n_hosts // per_leaf, per_leaf
    return leaf_spine(leaves, spines, per_leaf, 100e9, 1e-6)


def ring_plan(n: int, ring: int = 16, channels: int = 2, total_bytes: int = 64 * 2**20) -> ExecutionPlan:
    b = PlanBuilder([f"h{i}" for i in range(n)])
    backward = [b.add_compute(g, 1e-3, label="backward") for g in range(n)]
    chunk = total_bytes // (ring * channels)
    stride = n // ring
    for base in range(stride):
        members = [base + k * stride for k in range(ring)]
        for ch in range(channels):
            # last[r]: the task whose completion lets rank r forward at the next step
            last = [backward[g] for g in members]
            for step in range(2 * (ring - 1)):
                sends = []
                for r, g in enumerate(members):
                    nxt = members[(r + 1) % ring]
                    sends.append(b.add_flow(g, nxt, chunk, deps=[last[r]], label=f"ring ch{ch} step{step}"))
                new_last = []
                for r, g in enumerate(members):
                    arrived = sends[(r - 1) % ring]
                    if step < ring - 1:
                        new_last.append(b.add_compute(g, 10e-6, deps=[arrived], stream=1 + ch, label="reduce"))
                    else:
                        new_last.append(arrived)
                last = new_last
    return b.build()


def perm_plan(n: int, rounds: int = 8, size: int = 4 * 2**20, seed: int = 7) -> ExecutionPlan:
    rng = np.random.default_rng(seed)
    b = PlanBuilder([f"h{i}" for i in range(n)])
    ready = [b.add_compute(g, 50e-6, label="kernel") for g in range(n)]
    for rd in range(rounds):
        perm = rng.permutation(n)
        while np.any(perm == np.arange(n)):
            perm = rng.permutation(n)
        sends = [b.add_flow(g, int(perm[g]), size, deps=[ready[g]], label=f"perm{rd}") for g in range(n)]
        recv_from = np.argsort(perm)  # recv_from[d] = source sending to d
        ready = [b.add_compute(g, 50e-6, deps=[sends[g], sends[int(recv_from[g])]], label="kernel") for g in range(n)]
    return b.build()


def gpt_case(n: int, model_name: str) -> tuple[NetGraph, ExecutionPlan]:
    """One iteration of ``model_name`` on ``n`` H100s (n / 8 nodes) of the h100-fattree preset."""
    import tomllib
    from pathlib import Path

    from hetero_ns3.collectives import CollectiveEnv
    from hetero_ns3.plan import lower_workload
    from hetero_ns3.topology.build import build_graph
    from hetero_ns3.topology.loader import parse_cluster
    from hetero_ns3.workload.models import get_model
    from hetero_ns3.workload.parallel import ParallelismSpec
    from hetero_ns3.workload.planner import build_plan

    preset = Path(__file__).resolve().parents[1] / "topologies" / "h100-fattree.toml"
    data = tomllib.loads(preset.read_text())
    data["groups"][0]["count"] = n // 8
    data["network"]["k"] = 8 if n <= 128 else 16 if n <= 1024 else 32
    cluster = parse_cluster(data, "bench")
    graph = build_graph(cluster)
    tp, pp = 8, 4
    par = ParallelismSpec(
        tp=tp, pp=pp, dp=n // (tp * pp), global_batch=16, micro_batch=1, schedule="1f1b",
        sequence_parallel=True, recompute="selective", zero_stage=1,
    )  # fmt: skip
    work = build_plan(get_model(model_name), par, cluster.gpus()).workload
    return graph, lower_workload(work, CollectiveEnv.from_graph(graph)).plan


def run_one(n: int, workload: str, seed: int, model: str = "gpt3-6.7b") -> dict:
    t = time.perf_counter()
    if workload == "gpt":
        graph, plan = gpt_case(n, model)
        t_graph, t_build = 0.0, time.perf_counter() - t
    else:
        graph = fabric(n)
        t_graph = time.perf_counter() - t
        t = time.perf_counter()
        plan = ring_plan(n) if workload == "ring" else perm_plan(n)
        t_build = time.perf_counter() - t
    t = time.perf_counter()
    base = critical_path_s(plan, 0.0)
    t_base = time.perf_counter() - t
    t = time.perf_counter()
    res = simulate_plan(graph, plan, seed=seed)
    t_sim = time.perf_counter() - t
    out = {
        "hosts": n,
        "workload": workload,
        "tasks": len(plan),
        "flows": res.stats.flows,
        "graph_s": t_graph,
        "plan_build_s": t_build,
        "baseline_s": t_base,
        "analytic_s": t_sim,
        "routing_s": res.stats.routing_s,
        "replay_s": res.stats.replay_s,
        "events": res.stats.events,
        "rate_updates": res.stats.rate_updates,
        "fill_rounds": res.stats.fill_rounds,
        "max_active": res.stats.max_active_flows,
        "reused_rates": res.stats.reused_rates,
        "recomputed_rates": res.stats.recomputed_rates,
        "events_per_s": res.stats.events_per_s,
        "makespan_s": res.times.makespan_s,
        "no_network_makespan_s": base.makespan_s,
        "peak_rss_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
    }
    if (
        n <= 1024 and workload != "gpt"
    ):  # the cost of the full routing_tables the packet backend may use, for comparison
        t = time.perf_counter()
        routing_tables(graph)
        out["routing_tables_s"] = time.perf_counter() - t
    return out


def load_saved(prefix: str) -> tuple[NetGraph, ExecutionPlan]:
    """A plan saved as ``prefix.meta.pkl`` + ``prefix.plan.npz`` (see the module docstring)."""
    import pickle

    with open(prefix + ".meta.pkl", "rb") as fh:
        meta = pickle.load(fh)
    from hetero_ns3.results.rundir import channels_from_labels

    arrays = dict(np.load(prefix + ".plan.npz"))
    if "channel" not in arrays:  # saved before ExecutionPlan.channel existed
        arrays["channel"] = channels_from_labels(np.asarray(meta["labels"]), arrays["label"])
    plan = ExecutionPlan(gpus=meta["gpus"], labels=meta["labels"], categories=meta["categories"], **arrays)
    return meta["graph"], plan


def run_saved(prefix: str, ecmp_key: str = "connection") -> dict:
    """Time one simulate_plan call on a saved plan (bench_iteration's configuration, ``ecmp_key`` as given)."""
    from hetero_ns3.network.analytic import AnalyticConfig
    from hetero_ns3.network.config import NetworkConfig

    graph, plan = load_saved(prefix)
    cfg = AnalyticConfig.like_nic(NetworkConfig().nic, ecmp_key=ecmp_key)
    t, c = time.perf_counter(), time.process_time()
    res = simulate_plan(graph, plan, config=cfg, seed=1)
    wall, cpu = time.perf_counter() - t, time.process_time() - c
    st = res.stats
    return {
        "plan": prefix,
        "ecmp_key": ecmp_key,
        "tasks": st.tasks,
        "flows": st.flows,
        "wall_s": round(wall, 2),
        "cpu_s": round(cpu, 2),
        "routing_s": round(st.routing_s, 2),
        "replay_s": round(st.replay_s, 2),
        "rest_s": round(wall - st.routing_s - st.replay_s, 2),
        "events": st.events,
        "engine": st.engine,
        "iteration_s": float(res.times.makespan_s),
        "peak_rss_mib": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024),
    }


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--hosts", type=int, nargs="+", default=[128, 1024, 8192])
    p.add_argument("--workload", nargs="+", default=["ring", "perm"], choices=["ring", "perm", "gpt"])
    p.add_argument("--model", default="gpt3-6.7b", help="model of the gpt workload (a catalog name)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--one", action="store_true", help="run one size in this process and print JSON")
    p.add_argument("--saved", metavar="PREFIX", help="time simulate_plan on a saved plan instead (JSON line)")
    p.add_argument(
        "--ecmp-key", default="connection", choices=["connection", "flow"], help="AnalyticConfig.ecmp_key (--saved)"
    )
    a = p.parse_args()
    if a.saved:
        print(json.dumps(run_saved(a.saved, a.ecmp_key)))
        return 0
    if a.one:
        print(json.dumps(run_one(a.hosts[0], a.workload[0], a.seed, a.model)))
        return 0
    rows = []
    for wl in a.workload:
        for n in a.hosts:
            cmd = [sys.executable, __file__, "--one", "--hosts", str(n), "--workload", wl, "--seed", str(a.seed)]
            cmd += ["--model", a.model]
            r = json.loads(subprocess.run(cmd, check=True, capture_output=True, text=True).stdout)
            rows.append(r)
            print(json.dumps(r), file=sys.stderr)
    print(
        "| workload | GPUs | tasks | flows | analytic s | routing s | replay s | events | events/s | "
        "fill rounds | peak RSS MiB | baseline s | ratio |"
    )
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for r in rows:
        print(
            f"| {r['workload']} | {r['hosts']} | {r['tasks']} | {r['flows']} | {r['analytic_s']:.2f} | "
            f"{r['routing_s']:.2f} | {r['replay_s']:.2f} | {r['events']} | {r['events_per_s']:.0f} | "
            f"{r['fill_rounds']} | {r['peak_rss_mib']:.0f} | {r['baseline_s']:.2f} | "
            f"{r['analytic_s'] / r['baseline_s']:.1f} |"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
