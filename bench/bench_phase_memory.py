"""Memory and CPU per phase of one scenario on the analytic backend: compile, lower, replay, summarize.

Prints, after each phase, the process's resident set (RSS now, peak so far, from /proc and getrusage)
and its CPU time so far, plus the plan's size (tasks, flows, dependencies, bytes of its arrays) and
tasks per category. No run directory is written (as ``hetero-ns3 validate``). One scenario per process,
so that each peak is its own. Usage (docs/validation.md, "Where the memory went"):

    .venv/bin/python bench/bench_phase_memory.py hetero_ns3/data/validation/megatron/gpt-7.5b.toml
    .venv/bin/python bench/bench_phase_memory.py hetero_ns3/data/validation/h100/gpt3-175b.toml \\
        --set parallelism.global_batch=128
    .venv/bin/python bench/bench_phase_memory.py ... --stop lower   # compile and lower only
"""

from __future__ import annotations

import argparse
import resource
import time

import numpy as np

PHASES = ("compile", "lower", "replay", "summarize")


def _rss_gib() -> float:
    with open("/proc/self/status") as fh:
        for line in fh:
            if line.startswith("VmRSS"):
                return int(line.split()[1]) / 2**20
    return float("nan")


def _peak_gib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20


def _cpu_s() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def _report(phase: str, t0: float, extra: str = "") -> None:
    print(
        f"{phase:<10} rss {_rss_gib():6.2f} GiB  peak {_peak_gib():6.2f} GiB  cpu {_cpu_s():7.1f} s  "
        f"wall {time.perf_counter() - t0:7.1f} s  {extra}",
        flush=True,
    )


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("scenario")
    ap.add_argument("--set", action="append", default=[], metavar="SECTION.KEY=VALUE")
    ap.add_argument("--stop", choices=PHASES, default="summarize", help="last phase to run")
    args = ap.parse_args(argv)

    from hetero_ns3 import pipeline
    from hetero_ns3.network.backend import get_backend
    from hetero_ns3.plan.dag import FLOW
    from hetero_ns3.results import summarize
    from hetero_ns3.scenario.loader import load_scenario
    from hetero_ns3.topology import build_graph
    from hetero_ns3.workload.planner import plan_scenario

    t0 = time.perf_counter()
    sc = load_scenario(args.scenario, args.set)
    cluster = pipeline.load_run_cluster(sc)
    graph = build_graph(cluster)
    wplan = plan_scenario(sc)
    _report("compile", t0, f"ops {wplan.workload.n_ops}")
    if args.stop == "compile":
        return
    low = pipeline.lower_plan(wplan, sc, pipeline.collective_env(sc, graph), cluster)
    plan = low.plan
    arrays = sum(v.nbytes for v in vars(plan).values() if isinstance(v, np.ndarray))
    _report(
        "lower",
        t0,
        f"tasks {len(plan)} flows {plan.n_flows} deps {plan.dep_idx.size} arrays {arrays / 2**30:.2f} GiB "
        f"({arrays / max(1, len(plan)):.0f} B/task)",
    )
    for c, name in enumerate(plan.categories):
        sel = plan.category == c
        print(f"  {name:<10} tasks {int(sel.sum()):>12}  flows {int((sel & (plan.kind == FLOW)).sum()):>12}")
    if args.stop == "lower":
        return
    run = sc.run
    res = get_backend("analytic").run(
        plan, graph, sc.network, seed=run.seed, faults=sc.faults, stall_limit_s=run.stall_limit
    )
    times = res.times
    _report("replay", t0, f"makespan {times.makespan_s:.6f} s completed {res.completed}")
    del res
    if args.stop == "replay":
        return
    summary = summarize(plan, times, pipeline.gpu_meta(cluster, wplan, sc.faults), None)
    t = summary.iteration_time_s
    mfu = 100.0 * wplan.model_flops / (t * wplan.peak_flops) if t else 0.0
    _report("summarize", t0, f"step {t:.6f} s  MFU {mfu:.2f}%  compute-only {wplan.compute_time:.6f} s")


if __name__ == "__main__":
    main()
