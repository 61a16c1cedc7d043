"""Benchmark of one GPT-3 175B training iteration on both backends (issue 6).

Cases are ``topology:backend:granularity`` (e.g. ``h0:ns3:coarse``, ``h0x1024:analytic:coarse``):

* ``topology``: a preset (``h0`` = 16 DGX-H100-like nodes, rail-optimized; ``h2``/``h4`` mixed levels) or
  ``h0xN``: the h0 node and network types with N GPUs (N/8 nodes, rail pods of 16 nodes, 8 spines),
  written to a temporary TOML that the scenario's ``cluster.topology`` points at.
* ``backend``: ``analytic`` (flow-level, ``hetero_ns3.network.analytic.simulate_plan``), ``ns3`` (packet level,
  ``hetero_ns3.network.ns3.replay.run_plan``) or ``none`` (lowering and baseline only).
* ``granularity``: ``fine`` (collective defaults: 8 channels, up to 4 slices) or ``coarse``
  (``collectives.max_channels = 2``, ``max_slices = 1``).

Workload: GPT-3 175B, TP 8, PP 8, 1F1B, sequence parallel, selective recompute, ZeRO-1, micro-batch 1;
data parallelism fills the cluster (dp = GPUs / 64) and the global batch is ``--mb-per-replica`` x dp
(1F1B needs at least pp = 8 microbatches per replica; default 8, i.e. 16 at 128 GPUs as in the issue).

Each case runs in its own subprocess (fresh interpreter, fresh ns-3 simulator), so ``ru_maxrss`` is that
case's peak. Measured per case: lowering (planner + collectives + plan arrays) wall time, tasks, flows;
baseline = ``hetero_ns3.plan.dag.critical_path_s`` of the same plan with each flow taking its size over its
source GPU's fastest link (no contention, no network model, a Python loop over tasks), timed in the same
process; the backend's wall time, simulated iteration time, events, events/s and peak RSS. The packet
level stops after ``--ns3-timeout`` wall seconds of simulation and reports how far it got (simulated time
and tasks done, from ``run_plan``'s progress callback).

Reproduce (see docs/benchmarks.md, "Training iteration (issue 6)")::

    .venv/bin/python bench/bench_iteration.py --cases h0:analytic:coarse h0:analytic:fine \
        h2:analytic:coarse h0x1024:analytic:coarse --json /tmp/iter_analytic.json
    .venv/bin/python bench/bench_iteration.py --cases h0:ns3:coarse --ns3-timeout 1800 --json /tmp/iter_ns3.json
    .venv/bin/python bench/bench_iteration.py --child h0x1024:ns3:coarse --skip-baseline --ns3-timeout 4500  # 1024 GPUs
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
GRANULARITY = {"fine": {}, "coarse": {"max_channels": 2, "max_slices": 1}}
BACKENDS = ("analytic", "ns3", "none")


def _rss_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0  # Linux: KiB


def _current_rss_mib() -> float:
    """Resident set size now (Linux ``/proc/self/status`` VmRSS), MiB; 0 where unavailable."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024.0
    except OSError:
        pass
    return 0.0


def _topology_ref(topo: str, tmp: Path) -> str:
    """Preset name, or the path of a generated TOML for ``h0xN`` (N GPUs of h0's node and network types)."""
    if "x" not in topo:
        return topo
    base, n = topo.split("x")
    gpus = int(n)
    if base != "h0" or gpus % 8:
        raise SystemExit(f"topology {topo!r}: use h0xN with N a multiple of 8")
    text = (ROOT / "topologies" / "h0.toml").read_text()
    text = text.replace("count = 16", f"count = {gpus // 8}", 1)
    text = text.replace('name = "h0"', f'name = "{topo}"', 1)
    # Rail pods of 16 nodes (like h0): 8 rail switches per pod, each with 8 x 800G uplinks to the 8 spines.
    text = text.replace('kind = "rail"', 'kind = "rail"\nnodes_per_pod = 16', 1)
    path = tmp / f"{topo}.toml"
    path.write_text(text)
    return str(path)


def scenario_dict(
    topology_ref: str,
    gpus: int,
    granularity: str,
    mb_per_replica: int,
    nic_attach: str = "",
    reuse: str = "",
    backend: str = "",
    segment_bytes: int = 0,
) -> dict[str, Any]:
    dp = max(1, gpus // 64)
    cluster: dict[str, Any] = {"topology": topology_ref}
    if nic_attach:
        cluster["nic_attach"] = nic_attach
    run: dict[str, Any] = {}
    if reuse:  # isolated calls are timed on the case's own backend
        run = {
            "reuse_isolated_collectives": reuse,
            "backend": backend if backend in ("analytic", "ns3") else "analytic",
        }
    return {
        "model": {"name": "gpt3-175b"},
        "parallelism": {
            "tp": 8,
            "pp": 8,
            "global_batch": mb_per_replica * dp,
            "micro_batch": 1,
            "schedule": "1f1b",
            "sequence_parallel": True,
            "recompute": "selective",
            "zero_stage": 1,
        },
        "cluster": cluster,
        "collectives": dict(GRANULARITY[granularity]),
        **({"run": run} if run else {}),
        **({"network": {"nic": {"segment_bytes": _segments(segment_bytes)}}} if segment_bytes else {}),
    }


def _segments(segment_bytes: int) -> dict[str, int]:
    """``[network.nic] segment_bytes`` with the network (Ethernet) frames' payload set to ``segment_bytes``."""
    from hetero_ns3.network.config import DEFAULT_SEGMENTS

    return {**DEFAULT_SEGMENTS, "network": segment_bytes}


def _network_config(args: argparse.Namespace) -> Any:
    """The ``NetworkConfig`` of every case: defaults, or with ``--segment-bytes``."""
    from hetero_ns3.network.config import NetworkConfig, NicConfig

    if not args.segment_bytes:
        return NetworkConfig()
    return NetworkConfig(nic=NicConfig(segment_bytes=_segments(args.segment_bytes)))


def _flow_times(graph: Any, plan: Any) -> np.ndarray:
    """Per task: a flow's size over its source GPU's fastest link (s); 0 for compute."""
    best: dict[str, float] = {}
    for lk in graph.links:
        for end in (lk.a, lk.b):
            best[end] = max(best.get(end, 0.0), lk.rate_bps)
    rate = np.array([best.get(g, 0.0) for g in plan.gpus])
    src_rate = rate[np.clip(plan.gpu, 0, None)]
    return np.where(src_rate > 0, plan.size_bytes * 8.0 / np.maximum(src_rate, 1.0), 0.0)


def run_case(case: str, args: argparse.Namespace) -> dict[str, Any]:
    """Measure one case in this process (called in the child)."""
    from hetero_ns3.pipeline import load_run_cluster, lower_scenario
    from hetero_ns3.plan.dag import critical_path_s
    from hetero_ns3.scenario.loader import scenario_from_dict
    from hetero_ns3.topology import build_graph, load_cluster

    topo, backend, gran = case.split(":")
    out: dict[str, Any] = {"case": case, "topology": topo, "backend": backend, "granularity": gran}
    if args.nic_attach:
        out["nic_attach"] = args.nic_attach
    if args.reuse:
        out["reuse"] = args.reuse
    if args.segment_bytes:
        out["segment_bytes"] = args.segment_bytes
    with tempfile.TemporaryDirectory() as tmpd:
        ref = _topology_ref(topo, Path(tmpd))
        t0 = time.perf_counter()
        gpus = len(load_cluster(ref).gpus())
        scenario = scenario_from_dict(
            scenario_dict(
                ref, gpus, gran, args.mb_per_replica, args.nic_attach, args.reuse, backend, args.segment_bytes
            )
        )
        cluster = load_run_cluster(scenario, backend if backend in ("analytic", "ns3") else None)
        graph = build_graph(cluster)
        out["graph_s"] = time.perf_counter() - t0
        t1 = time.perf_counter()
        if args.profile:
            import cProfile
            import pstats

            prof = cProfile.Profile()
            _, lowered = prof.runcall(lower_scenario, scenario, graph, cluster)
            pstats.Stats(prof, stream=sys.stderr).sort_stats("tottime").print_stats(args.profile)
            pstats.Stats(prof, stream=sys.stderr).sort_stats("cumulative").print_stats(args.profile)
        else:
            _, lowered = lower_scenario(scenario, graph, cluster)
        plan = lowered.plan
        out.update(
            gpus=gpus,
            global_batch=scenario_dict(ref, gpus, gran, args.mb_per_replica)["parallelism"]["global_batch"],
            lower_s=time.perf_counter() - t1,
            fused=dict(lowered.fused),
            tasks=len(plan),
            flows=plan.n_flows,
            flow_bytes=int(plan.size_bytes.sum()),
            rss_after_lower_mib=_rss_mib(),
        )
    _log(f"{case}: lowered {out['tasks']} tasks / {out['flows']} flows in {out['lower_s']:.1f} s")
    if not args.skip_baseline:
        ft = _flow_times(graph, plan)
        t2 = time.perf_counter()
        base = critical_path_s(plan, ft)
        out["baseline_s"] = time.perf_counter() - t2
        out["baseline_makespan_s"] = float(np.nanmax(base.finish_s))
        del base, ft
        _log(f"{case}: baseline {out['baseline_s']:.1f} s")
    if backend == "analytic":
        from hetero_ns3.network.analytic import AnalyticConfig, simulate_plan

        t3 = time.perf_counter()
        res = simulate_plan(graph, plan, config=AnalyticConfig.like_nic(_network_config(args).nic), seed=args.seed)
        out["backend_s"] = time.perf_counter() - t3
        out["iteration_s"] = float(res.times.makespan_s)
        st = res.stats
        out.update(events=int(st.events), routing_s=float(st.routing_s), replay_s=float(st.replay_s))
        out.update(events_per_s=st.events / st.replay_s if st.replay_s > 0 else None, engine=st.engine)
        out["note"] = f"routing {st.routing_s:.1f} s + event loop {st.replay_s:.1f} s ({st.engine})"
        out["completed"] = True
    elif backend == "ns3":
        out.update(_run_ns3(case, graph, plan, args))
    out["peak_rss_mib"] = _rss_mib()
    if out.get("backend_s") and out.get("baseline_s"):
        out["ratio"] = out["backend_s"] / out["baseline_s"]
    return out


def _run_ns3(case: str, graph: Any, plan: Any, args: argparse.Namespace) -> dict[str, Any]:
    from hetero_ns3.network.ns3.replay import run_plan

    t0 = time.perf_counter()
    state: dict[str, Any] = {"sim_start": None, "next_log": 0.0, "timed_out": False}

    def progress(sim_s: float, done: int, total: int) -> None:
        now = time.perf_counter()
        if state["sim_start"] is None:
            state["sim_start"] = now  # first slice: ns-3 import and network setup are behind us
        if now >= state["next_log"]:
            state["next_log"] = now + args.log_every
            _log(
                f"{case}: wall {now - t0:7.0f} s  cpu {time.process_time():7.0f} s  sim {sim_s * 1e3:9.3f} ms  "
                f"tasks {done}/{total}  rss {_current_rss_mib():6.0f} MiB"
            )
        if now - state["sim_start"] > args.ns3_timeout:
            state["timed_out"] = True
            raise KeyboardInterrupt  # run_plan stops between slices and returns the partial result

    ru0 = resource.getrusage(resource.RUSAGE_SELF)
    res = run_plan(graph, plan, _network_config(args), seed=args.seed, progress=progress)
    ru1 = resource.getrusage(resource.RUSAGE_SELF)
    wall = time.perf_counter() - t0
    out: dict[str, Any] = {
        "run_plan_s": wall,
        "run_plan_cpu_s": (ru1.ru_utime - ru0.ru_utime) + (ru1.ru_stime - ru0.ru_stime),
        "ns3_wall_s": res.wall_s,
        "events": int(res.events),
        "events_per_s": res.events / res.wall_s if res.wall_s else None,
        "sim_time_s": res.sim_time_s,
        "completed": bool(res.completed),
    }
    done = int(np.count_nonzero(np.isfinite(res.times.finish_s)))
    if res.completed:
        out.update(backend_s=wall, iteration_s=float(np.nanmax(res.times.finish_s)))
    elif state["timed_out"]:
        out["note"] = (
            f"did not finish in {args.ns3_timeout:.0f} s: reached {res.sim_time_s * 1e3:.1f} ms simulated, "
            f"{done}/{len(plan)} tasks done"
        )
    else:
        out["note"] = f"stalled at {res.sim_time_s * 1e3:.1f} ms simulated, {done}/{len(plan)} tasks done"
    out["tasks_done"] = done
    return out


def _log(msg: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


def _fmt(v: Any, spec: str = "") -> str:
    if v is None:
        return "-"
    if isinstance(v, float) and spec:
        return format(v, spec)
    if isinstance(v, int) and not isinstance(v, bool):
        return f"{v:,}".replace(",", " ")
    return str(v)


def table(rows: list[dict[str, Any]]) -> str:
    head = (
        "| case | GPUs | batch | tasks | flows | lowering s | baseline s | backend s | ratio | iteration s "
        "| events | events/s | peak RSS MiB | note |"
    )
    lines = [head, "|" + "---|" * 14]
    for r in rows:
        lines.append(
            "| "
            + " | ".join(
                [
                    r["case"],
                    _fmt(r.get("gpus")),
                    _fmt(r.get("global_batch")),
                    _fmt(r.get("tasks")),
                    _fmt(r.get("flows")),
                    _fmt(r.get("lower_s"), ".1f"),
                    _fmt(r.get("baseline_s"), ".1f"),
                    _fmt(r.get("backend_s"), ".1f"),
                    _fmt(r.get("ratio"), ".2f"),
                    _fmt(r.get("iteration_s"), ".4f"),
                    _fmt(r.get("events")),
                    _fmt(r.get("events_per_s"), ".3g"),
                    _fmt(r.get("peak_rss_mib"), ".0f"),
                    r.get("note", r.get("error", "")),
                ]
            )
            + " |"
        )
    return "\n".join(lines)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--cases", nargs="+", default=["h0:analytic:coarse", "h0:analytic:fine", "h2:analytic:coarse"])
    ap.add_argument("--mb-per-replica", type=int, default=8, help="microbatches per data-parallel replica (>= 8)")
    ap.add_argument("--ns3-timeout", type=float, default=1800.0, help="wall seconds of packet simulation allowed")
    ap.add_argument("--log-every", type=float, default=60.0, help="progress log period of the ns3 run (s)")
    ap.add_argument("--json", help="write the rows to this JSON file (rewritten after every case)")
    ap.add_argument("--profile", type=int, default=0, help="cProfile the lowering; print this many top functions")
    ap.add_argument("--skip-baseline", action="store_true", help="skip the plain DAG walk (minutes at 1024 GPUs)")
    ap.add_argument(
        "--nic-attach",
        default="",
        help="[cluster] nic_attach for every case: pcie, direct or auto (default: the topology's, auto: direct on ns3)",
    )
    ap.add_argument(
        "--reuse",
        default="",
        help="[run] reuse_isolated_collectives for every case: on or off (default: the scenario's)",
    )
    ap.add_argument(
        "--segment-bytes",
        type=int,
        default=0,
        help="[network.nic] payload bytes per frame on network (Ethernet) links (default: 4096, the RoCE path MTU)",
    )
    ap.add_argument("--seed", type=int, default=1, help="run seed (ECMP hashing, ECN marking)")
    ap.add_argument("--child", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        print(json.dumps(run_case(args.child, args)))
        return 0
    for c in args.cases:
        parts = c.split(":")
        if len(parts) != 3 or parts[1] not in BACKENDS or parts[2] not in GRANULARITY:
            ap.error(f"case {c!r}: use topology:backend:granularity, backend in {BACKENDS}, granularity fine|coarse")
    rows = []
    for c in args.cases:
        cmd = [sys.executable, __file__, "--child", c, "--mb-per-replica", str(args.mb_per_replica)]
        cmd += ["--ns3-timeout", str(args.ns3_timeout), "--log-every", str(args.log_every)]
        cmd += ["--nic-attach", args.nic_attach] if args.nic_attach else []
        cmd += ["--reuse", args.reuse] if args.reuse else []
        cmd += ["--seed", str(args.seed)] + (["--segment-bytes", str(args.segment_bytes)] if args.segment_bytes else [])
        cmd += ["--profile", str(args.profile)] + (["--skip-baseline"] if args.skip_baseline else [])
        t0 = time.perf_counter()
        proc = subprocess.run(cmd, stdout=subprocess.PIPE, text=True, cwd=ROOT)
        if proc.returncode == 0:
            row = json.loads(proc.stdout.strip().splitlines()[-1])
        else:
            row = {"case": c, "error": f"child exited {proc.returncode} after {time.perf_counter() - t0:.0f} s"}
        row["child_wall_s"] = time.perf_counter() - t0
        rows.append(row)
        _log(json.dumps(row))
        if args.json:
            Path(args.json).write_text(json.dumps(rows, indent=1))
    print(table(rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
