"""Isolated-collective reuse on and off for one scenario: step time, breakdown, tasks, CPU, peak RSS.

Each mode runs in its own process (so that each peak RSS is its own), through the path of
``hetero-ns3 validate`` (compile, lower, analytic replay, summarize; no run directory), with
``run.reuse_isolated_collectives`` set; the parent prints both lines and the ratios (docs/validation.md,
"Reuse vs detailed on a row that runs both ways"; docs/benchmarks.md)::

    .venv/bin/python bench/bench_reuse.py hetero_ns3/data/validation/megatron/gpt-18b.toml \\
        --set parallelism.global_batch=64
    .venv/bin/python bench/bench_reuse.py hetero_ns3/data/validation/megatron/gpt-18b.toml --modes on

Mode ``shared`` fuses also the groups whose links other groups use (docs/collectives.md, "The ``shared`` mode"); against
``on`` on the Qwen3-235B-A22B rows (the GB300 one at 4 micro-batches per replica, where ``on`` fits)::

    .venv/bin/python bench/bench_reuse.py hetero_ns3/data/validation/heldout/qwen3-235b-a22b-b300x256-mxfp8.toml \
        --modes on,shared
    .venv/bin/python bench/bench_reuse.py hetero_ns3/data/validation/heldout/qwen3-235b-a22b-gb300x256-mxfp8.toml \
        --set parallelism.global_batch=512 --modes on,shared

Mode ``on-global`` is ``on`` with the calls' ordering check searching every dependency only, the rule before
session 30 (:func:`hetero_ns3.plan.isolation.calls_ordered` also searches along each rank's own dependencies);
on an interleaved pipeline it leaves the TP groups detailed (the 1024-H100 405B row's layout on one replica)::

    .venv/bin/python bench/bench_reuse.py hetero_ns3/data/validation/heldout/llama31-405b-h100x1024-fp8cs.toml \\
        --set cluster.topology=dgx-h100-16.toml --set parallelism.global_batch=16 \\
        --set compute.check_memory=false --modes on-global,on
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import time


def one(path: str, mode: str, sets: list[str]) -> dict:
    """Run ``path`` with reuse ``mode`` in this process; the figures as a dict."""
    from hetero_ns3.network.backend import get_backend
    from hetero_ns3.pipeline import gpu_meta, load_run_cluster, lower_scenario
    from hetero_ns3.results import summarize
    from hetero_ns3.scenario.loader import load_scenario
    from hetero_ns3.topology import build_graph

    if mode == "on-global":
        import hetero_ns3.plan.isolation as iso

        search = iso._reaches
        iso._reaches = lambda ptr, pos, y, want, rank=None: rank is None and search(ptr, pos, y, want)
    t0 = time.perf_counter()
    sc = load_scenario(path, [f"run.reuse_isolated_collectives={mode.split('-')[0]}", "run.backend=analytic", *sets])
    cluster = load_run_cluster(sc)
    graph = build_graph(cluster)
    engine = get_backend("analytic")
    wplan, low = lower_scenario(sc, graph, cluster, engine=engine)
    res = engine.run(low.plan, graph, sc.network, seed=sc.run.seed, faults=sc.faults)
    summary = summarize(low.plan, res.times, gpu_meta(cluster, wplan, sc.faults), None)
    ru = resource.getrusage(resource.RUSAGE_SELF)
    return {
        "mode": mode,
        "step_s": summary.iteration_time_s,
        "breakdown": summary.overall.as_dict(),
        "tasks": len(low.plan),
        "calls": low.n_collectives,
        "fused": dict(low.fused),
        "wall_s": time.perf_counter() - t0,
        "cpu_s": ru.ru_utime + ru.ru_stime,
        "peak_rss_gib": ru.ru_maxrss / 2**20,
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("scenario")
    ap.add_argument("--set", action="append", default=[], dest="sets", help="scenario override a.b=value")
    ap.add_argument("--modes", default="off,on", help="comma-separated modes, each in its own process")
    ap.add_argument("--child", default="", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.child:
        print(json.dumps(one(args.scenario, args.child, args.sets)))
        return 0
    out = {}
    for mode in args.modes.split(","):
        cmd = [sys.executable, __file__, args.scenario, "--child", mode, *(f"--set={s}" for s in args.sets)]
        line = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout.strip().splitlines()[-1]
        out[mode] = r = json.loads(line)
        terms = " / ".join(f"{v:.4f}" for v in r["breakdown"].values())
        print(f"{mode:>9}: step {r['step_s']:.6f} s  breakdown {terms} s  tasks {r['tasks']:,}  calls {r['calls']:,}  "
              f"CPU {r['cpu_s']:.1f} s  wall {r['wall_s']:.1f} s  peak RSS {r['peak_rss_gib']:.2f} GiB  "
              f"fused {r['fused']}", flush=True)  # fmt: skip
    if "off" in out and "on" in out:
        a, b = out["off"], out["on"]
        print(f"on/off: step {100 * (b['step_s'] / a['step_s'] - 1):+.4f}%  tasks {b['tasks'] / a['tasks']:.3f}x  "
              f"CPU {b['cpu_s'] / a['cpu_s']:.3f}x  peak RSS {b['peak_rss_gib'] / a['peak_rss_gib']:.3f}x")  # fmt: skip
    if "shared" in out and "on" in out:
        a, b = out["on"], out["shared"]
        print(f"shared/on: step {100 * (b['step_s'] / a['step_s'] - 1):+.4f}%  tasks {b['tasks'] / a['tasks']:.3f}x  "
              f"CPU {b['cpu_s'] / a['cpu_s']:.3f}x  peak RSS {b['peak_rss_gib'] / a['peak_rss_gib']:.3f}x")  # fmt: skip
    if "on-global" in out and "on" in out:
        a, b = out["on-global"], out["on"]
        print(f"on/on-global: step {100 * (b['step_s'] / a['step_s'] - 1):+.6f}%  tasks {b['tasks'] / a['tasks']:.3f}x  "
              f"CPU {b['cpu_s'] / a['cpu_s']:.3f}x  peak RSS {b['peak_rss_gib'] / a['peak_rss_gib']:.3f}x")  # fmt: skip
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
