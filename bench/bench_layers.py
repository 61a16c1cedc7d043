"""Packet-level cost of the SimAI comparison traffic: N layers of (TP all-reduce, then DP all-reduce).

The case (docs/benchmarks.md, "Packet level at scale"): 128 A100 in 16 servers (``topologies/
a100-rail-simai.toml``: NVSwitch inside a server, 8 x 200G NICs rail-optimized, 64 spines at 400G,
32 MB buffers), DCQCN + PFC (the default network config). Each layer is, on every GPU in order:

* a ring all-reduce of ``--tp-bytes`` (16 MiB) among the 8 GPUs of its server (NVLink), then
* a ring all-reduce of ``--dp-bytes`` (64 MiB) among the 16 GPUs of its rail (GPU i of every server,
  through the NICs and rail switch i).

The plan is built through the normal planner API (``PlanBuilder`` + ``plan_collective`` with
``algo="ring"``; channels as the planner chooses unless ``--channels``) and replayed by the ns3
backend (``run_plan``). Printed: lowering time, tasks and flows; the replay's wall and CPU time, events,
events/s, peak RSS and simulated time (the makespan); with ``--profile``, events by kind and the cost per
data frame (:func:`hetero_ns3.network.ns3.profile.format_profile`).

    .venv/bin/python bench/bench_layers.py --layers 2
    .venv/bin/python bench/bench_layers.py --layers 8 --json /tmp/layers8.json
    .venv/bin/python bench/bench_layers.py --layers 1 --profile --nic-attach pcie,direct
    .venv/bin/python bench/bench_layers.py --layers 8 --profile --decrease timer,lazy
    .venv/bin/python bench/bench_layers.py --layers 1 --set network.cc.preset=paper
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import resource
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
TOPOLOGY = str(ROOT / "topologies" / "a100-rail-simai.toml")


def build_plan(
    graph: Any,
    layers: int,
    tp_bytes: int,
    dp_bytes: int,
    channels: int | None,
    dp_channels: int | None = None,
    inter_node_channels: int = 0,
) -> Any:
    """The ExecutionPlan of ``layers`` x (TP ring all-reduce per server, then DP ring all-reduce per rail).

    ``channels`` forces the channel count of every call, ``dp_channels`` that of the DP calls only;
    ``inter_node_channels`` > 0 sets ``Tuning.inter_node_ring_channels`` (NCCL's rule for the DP rings).
    """
    from hetero_ns3.collectives import CollectiveCall, CollectiveEnv, load_tuning, plan_collective
    from hetero_ns3.plan.builder import PlanBuilder

    tuning = dataclasses.replace(load_tuning(), inter_node_ring_channels=inter_node_channels)
    env = CollectiveEnv.from_graph(graph, tuning)
    gpus = env.gpus
    servers: dict[str, list[str]] = {}
    for node in graph.nodes:
        if node.name in gpus:
            servers.setdefault(node.zone, []).append(node.name)
    groups_tp = [tuple(v) for v in servers.values()]
    per = len(groups_tp[0])
    groups_dp = [tuple(g[i] for g in groups_tp) for i in range(per)]
    builder = PlanBuilder(gpus)
    last: dict[str, tuple[int, ...]] = {}
    for layer in range(layers):
        for phase, groups, size in (("tp", groups_tp, tp_bytes), ("dp", groups_dp, dp_bytes)):
            ch = (dp_channels or channels) if phase == "dp" else channels
            for k, group in enumerate(groups):
                call = CollectiveCall("all_reduce", group, size, algo="ring", channels=ch, name=f"{phase}{layer}.{k}")
                res = plan_collective(builder, call, env, {g: last.get(g, ()) for g in group}, category=phase)
                last.update(res.exits)
    return builder.build()


def run_case(args: argparse.Namespace) -> dict[str, Any]:
    from hetero_ns3.network.config import NetworkConfig
    from hetero_ns3.network.ns3.replay import run_plan
    from hetero_ns3.topology import resolve_topology
    from hetero_ns3.units import parse_size

    if args.scheduler:
        from hetero_ns3.network.ns3 import roce

        roce.FAST_SCHEDULER = args.scheduler  # read by make_network for each run
    t0 = time.perf_counter()
    if args.nic_attach == "pcie":
        graph = resolve_topology(args.topology)
    else:
        from hetero_ns3.topology import build_graph, load_cluster
        from hetero_ns3.topology.fabric import resolve_nic_attach, with_nic_attach

        cluster = load_cluster(args.topology)
        if args.nic_attach == "auto":  # what a scenario that sets nothing gets on the packet level
            graph = build_graph(resolve_nic_attach(cluster, lean=True))
        else:
            graph = build_graph(with_nic_attach(cluster, args.nic_attach, "--nic-attach"))
    plan = build_plan(
        graph, args.layers, parse_size(args.tp_bytes, "--tp-bytes"), parse_size(args.dp_bytes, "--dp-bytes"),
        args.channels, args.dp_channels, args.inter_node_channels,
    )  # fmt: skip
    lower_s = time.perf_counter() - t0
    ru0 = resource.getrusage(resource.RUSAGE_SELF)
    w0 = time.perf_counter()
    config = NetworkConfig()
    if args.set:
        from hetero_ns3.scenario import scenario_from_dict
        from hetero_ns3.scenario.overrides import apply_overrides

        config = scenario_from_dict(apply_overrides({}, args.set)).network
    if args.alpha_timer:
        config = dataclasses.replace(config, cc=dataclasses.replace(config.cc, lazy_alpha=False))
    if args.decrease == "timer":
        config = dataclasses.replace(config, cc=dataclasses.replace(config.cc, lazy_decrease=False))
    if args.segment:
        seg = parse_size(args.segment, "--segment")
        segments = {**config.nic.segment_bytes, "network": seg, "pcie": seg}
        config = dataclasses.replace(config, nic=dataclasses.replace(config.nic, segment_bytes=segments))
    res = run_plan(graph, plan, config, seed=args.seed, profile=args.profile)
    wall = time.perf_counter() - w0
    ru1 = resource.getrusage(resource.RUSAGE_SELF)
    cpu = (ru1.ru_utime - ru0.ru_utime) + (ru1.ru_stime - ru0.ru_stime)
    out: dict[str, Any] = {
        "layers": args.layers,
        "scheduler": args.scheduler or "default",
        "channels": args.channels or "planner",
        "dp_channels": args.dp_channels or args.channels or "planner",
        "inter_node_channels": args.inter_node_channels,
        "segment": args.segment or "default",
        "alpha": "timer" if args.alpha_timer else "lazy",
        "decrease": args.decrease,
        "nic_attach": args.nic_attach,
        "set": " ".join(args.set) or "-",
        "topology": Path(args.topology).stem,
        "tasks": len(plan),
        "flows": int(plan.n_flows),
        "lower_s": round(lower_s, 3),
        "wall_s": round(wall, 3),
        "cpu_s": round(cpu, 3),
        "events": int(res.events),
        "events_per_s": round(res.events / wall) if wall > 0 else 0,
        "events_per_cpu_s": round(res.events / cpu) if cpu > 0 else 0,
        "peak_rss_mib": round(ru1.ru_maxrss / 1024.0, 1),
        "completed": bool(res.completed),
        "sim_time_ms": round(float(res.times.makespan_s) * 1e3, 6),
    }
    if res.profile is not None:
        out["profile"] = res.profile
    return out


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--layers", type=int, default=2, help="layers of (TP all-reduce, DP all-reduce) (default 2)")
    p.add_argument("--topology", default=TOPOLOGY, help="topology preset or TOML (default a100-rail-simai)")
    p.add_argument("--tp-bytes", default="16MiB", help="TP all-reduce size per layer (default 16MiB)")
    p.add_argument("--dp-bytes", default="64MiB", help="DP all-reduce size per layer (default 64MiB)")
    p.add_argument("--channels", type=int, help="force the channel count of every call (default: planner's)")
    p.add_argument("--dp-channels", type=int, help="force the channel count of the DP calls only")
    p.add_argument(
        "--inter-node-channels", type=int, default=0, help="Tuning.inter_node_ring_channels (NCCL: 2; default 0: off)"
    )
    p.add_argument("--segment", help="DATA payload per frame on network and PCIe links (default 4096, RoCE MTU)")
    p.add_argument("--seed", type=int, default=1, help="ECMP / simulation seed")
    p.add_argument("--scheduler", help="ns-3 event scheduler TypeId (default: the backend's, roce.FAST_SCHEDULER)")
    p.add_argument("--profile", action="store_true", help="print events by kind and the cost per DATA frame")
    p.add_argument(
        "--alpha-timer", action="store_true", help="DCQCN alpha by a timer event per period (cc.lazy_alpha = false)"
    )
    p.add_argument(
        "--decrease",
        default="lazy",
        help="DCQCN periodic decrease checks: lazy (default, cc.lazy_decrease), timer (an event per period), "
        "or both as 'timer,lazy' (one run each in this process, then the ratios)",
    )
    p.add_argument(
        "--nic-attach",
        default="auto",
        help="fabric.nic_attach of the topology: auto (default: the packet level's default, direct where a GPU "
        "has a NIC of its own), pcie, direct, or several as 'pcie,direct' (one run each in this process, then "
        "the ratios)",
    )
    p.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="network.KEY=VALUE",
        help="network setting as in a scenario, e.g. network.cc.preset=paper (repeatable)",
    )
    p.add_argument("--json", help="also write the result to this JSON file")
    args = p.parse_args(argv)
    if args.layers < 1:
        p.error(f"--layers must be >= 1, got {args.layers}")
    modes = args.nic_attach.split(",")
    if not modes or any(m not in ("auto", "pcie", "direct") for m in modes):
        p.error(f"--nic-attach ({args.nic_attach!r}) must be auto, pcie, direct or a comma list of them")
    decreases = args.decrease.split(",")
    if not decreases or any(d not in ("lazy", "timer") for d in decreases):
        p.error(f"--decrease ({args.decrease!r}) must be lazy, timer or a comma list of them")
    results = []
    for mode, decrease in [(m, d) for m in modes for d in decreases]:
        out = run_case(argparse.Namespace(**{**vars(args), "nic_attach": mode, "decrease": decrease}))
        prof = out.pop("profile", None)
        for k, v in out.items():
            print(f"{k:>18}: {v}")
        if prof is not None:
            from hetero_ns3.network.ns3.profile import format_profile

            print(format_profile(prof, out["cpu_s"]))
            out["profile"] = prof
        results.append(out)
    if len(results) > 1:
        base = results[0]
        for r in results[1:]:
            print(
                f"{r['nic_attach']} {r['decrease']} / {base['nic_attach']} {base['decrease']}: "
                f"events {r['events'] / base['events']:.3f}, "
                f"CPU {r['cpu_s'] / base['cpu_s']:.3f}, simulated time {r['sim_time_ms'] / base['sim_time_ms']:.5f}"
            )
    if args.json:
        Path(args.json).write_text(json.dumps(results[0] if len(results) == 1 else results, indent=1))
    return 0 if all(r["completed"] for r in results) else 1


if __name__ == "__main__":
    sys.exit(main())
