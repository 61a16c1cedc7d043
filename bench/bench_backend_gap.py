"""Where the packet level's iteration time differs from the flow level's, task by task (issue 6).

Lowers one GPT-3 175B case of ``bench_iteration.py`` (same scenario, coarse granularity), replays the same
plan on both backends in this process (seed 1, default configs: ``AnalyticConfig.like_nic`` and
``NetworkConfig()``), keeps every task's start and finish, and prints:

* the packet run's critical path, walked back from its last task through the dependency that finished
  last, with the summed durations of its tasks per category and kind on both backends (so the rows say
  which tasks the difference sits in), and the idle time between consecutive path tasks;
* per flow category: FCT median / p99 / max on both backends and the ratio of their sums;
* for DP flows, that ratio per (source GPU type, destination GPU type).

Reproduce (docs/benchmarks.md, "Training iteration (issue 6)")::

    .venv/bin/python bench/bench_backend_gap.py --topology h2 --save /tmp/gap_h2.npz   # ~13 min here
    .venv/bin/python bench/bench_backend_gap.py --topology h2 --load /tmp/gap_h2.npz   # report again, ~20 s

``--save`` writes the four time arrays (npz); ``--load`` skips both simulations and reports from them.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_iteration import scenario_dict  # noqa: E402

from hetero_ns3.pipeline import load_run_cluster, lower_scenario  # noqa: E402
from hetero_ns3.plan.dag import FLOW, ExecutionPlan  # noqa: E402
from hetero_ns3.scenario.loader import scenario_from_dict  # noqa: E402
from hetero_ns3.topology import build_graph, load_cluster  # noqa: E402


def critical_path(plan: ExecutionPlan, finish_s: np.ndarray) -> np.ndarray:
    """Task ids from the first to the last task of the path that ends at the latest finish."""
    ptr, idx = plan.dep_ptr, plan.dep_idx
    path = [int(np.argmax(finish_s))]
    while True:
        i = path[-1]
        deps = idx[ptr[i] : ptr[i + 1]]
        if deps.size == 0:
            return np.array(path[::-1])
        path.append(int(deps[np.argmax(finish_s[deps])]))


def _ms(x: np.ndarray) -> str:
    return " / ".join(f"{1e3 * v:.3f}" for v in np.percentile(x, [50, 99, 100]))


def report(plan: ExecutionPlan, gpu_type: dict[str, str], times: dict[str, np.ndarray]) -> None:
    """Print the comparison (packet run = ``p_*``, flow level = ``a_*``)."""
    ps, pf, as_, af = times["p_start"], times["p_finish"], times["a_start"], times["a_finish"]
    path = critical_path(plan, pf)
    cats = np.asarray(plan.categories)[plan.category]
    print(f"iteration: packet {pf.max():.6f} s, flow level {af.max():.6f} s ({pf.max() / af.max() - 1:+.1%})")
    print(
        f"packet critical path: {path.size} tasks, idle between them {1e3 * (ps[path[1:]] - pf[path[:-1]]).sum():.3f} ms"
    )
    print("category  kind      tasks  packet ms  flow ms")
    for cat in np.unique(cats[path]):
        for kind, name in ((0, "compute"), (FLOW, "flow")):
            t = path[(cats[path] == cat) & (plan.kind[path] == kind)]
            if t.size:
                print(
                    f"{cat:8s}  {name:8s} {t.size:6d} {1e3 * (pf[t] - ps[t]).sum():10.1f} {1e3 * (af[t] - as_[t]).sum():8.1f}"
                )
    flows = plan.kind == FLOW
    print("flows by category: FCT median / p99 / max ms, packet | flow level, sum ratio")
    for cat in np.unique(cats[flows]):
        m = flows & (cats == cat)
        p, a = pf[m] - ps[m], af[m] - as_[m]
        print(f"{cat:8s} {m.sum():8d}  {_ms(p)} | {_ms(a)}  {p.sum() / a.sum():.3f}")
    types = np.array([gpu_type[g] for g in plan.gpus])
    dp = flows & (cats == "dp")
    for src in np.unique(types):
        for dst in np.unique(types):
            m = dp & (types[plan.gpu] == src) & (types[plan.dst] == dst)
            if m.any():
                ratio = (pf[m] - ps[m]).sum() / (af[m] - as_[m]).sum()
                print(f"dp {src} -> {dst}: {m.sum()} flows, FCT sum ratio {ratio:.3f}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--topology", default="h2", help="preset with 128 GPUs or more (h0, h2, ...)")
    ap.add_argument("--mb-per-replica", type=int, default=8)
    ap.add_argument("--save", type=Path, help="write the per-task times here (npz)")
    ap.add_argument("--load", type=Path, help="report from times saved by --save instead of simulating")
    args = ap.parse_args()
    gpus = load_cluster(args.topology).gpus()
    scenario = scenario_from_dict(scenario_dict(args.topology, len(gpus), "coarse", args.mb_per_replica))
    cluster = load_run_cluster(scenario)
    graph = build_graph(cluster)
    _, lowered = lower_scenario(scenario, graph, cluster)
    plan = lowered.plan
    print(f"{args.topology}: {len(plan)} tasks, {plan.n_flows} flows", flush=True)
    if args.load:
        with np.load(args.load) as z:
            times = {k: z[k] for k in ("a_start", "a_finish", "p_start", "p_finish")}
    else:
        from hetero_ns3.network.analytic import AnalyticConfig, simulate_plan
        from hetero_ns3.network.config import NetworkConfig
        from hetero_ns3.network.ns3.replay import run_plan

        t0 = time.perf_counter()
        an = simulate_plan(graph, plan, config=AnalyticConfig.like_nic(NetworkConfig().nic), seed=1)
        print(f"analytic backend {time.perf_counter() - t0:.1f} s", flush=True)
        t0 = time.perf_counter()
        pk = run_plan(graph, plan, NetworkConfig(), seed=1)
        print(f"packet backend {time.perf_counter() - t0:.1f} s, {pk.events} events", flush=True)
        times = {
            "a_start": an.times.start_s,
            "a_finish": an.times.finish_s,
            "p_start": pk.times.start_s,
            "p_finish": pk.times.finish_s,
        }
        if args.save:
            np.savez(args.save, **times)
    report(plan, {g.name: g.gpu_type for g in gpus}, times)


if __name__ == "__main__":
    main()
