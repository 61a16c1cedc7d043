"""``hetero-ns3 collective``: an nccl-tests-style benchmark of one collective on a topology.

Plans the collective for each size with the NCCL-like planner, runs the plan through a backend and
prints nccl-tests' columns (size, count, type, redop, root, time, algbw, busbw) plus the planner's
choice. busbw uses nccl-tests' factors (see :func:`hetero_ns3.collectives.busbw_factor`).

Backends: ``analytic`` (flow-level max-min replay, :mod:`hetero_ns3.network.analytic`), ``ns3`` (packet
level, :mod:`hetero_ns3.network.ns3.replay`), ``model`` (the cost model's closed form, no replay) and
``closed-form`` (the planner's own alpha-beta replay of the plan, :func:`estimate_plan`).
"""

from __future__ import annotations

import argparse
import json
import logging

from hetero_ns3.cli.commands._common import link_args
from hetero_ns3.collectives import (
    CollectiveCall,
    CollectiveEnv,
    busbw_factor,
    estimate_plan,
    load_tuning,
    normalize_op,
    plan_collective,
)
from hetero_ns3.collectives.moe_routing import routing_problem
from hetero_ns3.errors import ScenarioError, SimulationError, field_error
from hetero_ns3.network.backend import backend_names
from hetero_ns3.plan.builder import PlanBuilder
from hetero_ns3.plan.dag import ExecutionPlan
from hetero_ns3.topology.fabric import PCIE_ROOT_NOTE
from hetero_ns3.topology.graph import ROUTING_KINDS, NetGraph
from hetero_ns3.units import parse_size

NAME = "collective"
HELP = "nccl-tests-style benchmark of a collective (size, time, algbw, busbw) on a topology"
#: The network backends of the registry, plus the planner's prediction and the closed-form estimate.
BACKENDS = (*backend_names(), "model", "closed-form")
DTYPES = {"int8": 1, "uint8": 1, "half": 2, "bfloat16": 2, "float": 4, "int32": 4, "double": 8, "int64": 8}
JSON_KEYS = ("op", "size_bytes", "time_s", "algbw_GBps", "busbw_GBps", "algo", "protocol", "channels")
_log = logging.getLogger(__name__)


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("op", help="all_reduce, reduce_scatter, all_gather, broadcast, reduce, all_to_all, send_recv")
    p.add_argument("--topology", "-t", required=True, help="star:N, leafspine:L,S,H, a preset name or a TOML file")
    who = p.add_mutually_exclusive_group()
    who.add_argument("--gpus", "-n", type=int, help="use the topology's first N GPUs (default: all)")
    who.add_argument("--ranks", help="comma-separated GPU names in rank order, e.g. n0.g0,n1.g0")
    p.add_argument("--sizes", "-s", default="1KiB:1GiB", help="one size or a doubling range A:B (default 1KiB:1GiB)")
    p.add_argument(
        "--algo", help="force an algorithm (ring, tree, hierarchical, direct, pxn, expert_dispatch, p2p, or a schedule)"
    )
    p.add_argument("--protocol", choices=("LL", "LL128", "Simple"), help="force a protocol")
    p.add_argument("--channels", type=int, help="force the channel count")
    p.add_argument("--root", type=int, default=0, help="root rank of broadcast / reduce (default 0)")
    p.add_argument("--peer", help="receiving GPU of send_recv (default: rank 1)")
    p.add_argument(
        "--experts",
        help="E,K[,G,GK]: an MoE router's experts and top_k, and for group-limited routing its groups and the groups "
        "a token picks, for all_to_all with --algo expert_dispatch (e.g. 128,8 or DeepSeek-V3's 256,8,8,4); the size "
        "counts one copy per routed expert",
    )
    p.add_argument("--backend", "-b", choices=BACKENDS, default="analytic", help="network backend (default analytic)")
    p.add_argument("--cc", help="congestion control of the ns3 backend: none, dcqcn, hpcc, dctcp, timely")
    p.add_argument("--dtype", choices=sorted(DTYPES), default="float", help="element type for the count column")
    p.add_argument("--link-rate", help="link rate of star:/leafspine: topologies (default 100Gbps)")
    p.add_argument("--link-delay", help="link delay of star:/leafspine: topologies (default 1us)")
    p.add_argument(
        "--routing",
        choices=ROUTING_KINDS,
        help="network switches' routing: ecmp (per-flow hash) or dmodk (static D-mod-K, InfiniBand fat-tree "
        "style); default: the topology's",
    )
    p.add_argument("--tuning", help="tuning TOML (default collectives/tuning.toml)")
    p.add_argument("--seed", type=int, default=1, help="ECMP / simulation seed (>= 1)")
    p.add_argument("--json", action="store_true", help="print a JSON list instead of the table")


def parse_experts(text: str) -> tuple[int, ...]:
    """``"128,8"`` -> (128, 8): an MoE router's experts and top_k; ``"256,8,8,4"`` adds its groups and the groups a
    token picks."""
    parts = text.split(",")
    if len(parts) not in (2, 4) or not all(p.strip().isdigit() for p in parts):
        raise field_error(
            "--experts", text, "is not E,K (experts, top_k) or E,K,G,GK (with groups)", "e.g. --experts 128,8"
        )
    routing = tuple(int(p) for p in parts)
    problem = routing_problem(routing)
    if problem:
        raise field_error("--experts", text, problem, "e.g. --experts 128,8 or 256,8,8,4")
    return routing


def parse_sizes(text: str) -> list[int]:
    """``"64MiB"`` -> one size; ``"1KiB:8GiB"`` -> doubling sizes from A up to B inclusive."""
    lo_s, sep, hi_s = text.partition(":")
    lo = parse_size(lo_s, "--sizes")
    if not sep:
        return [lo]
    hi = parse_size(hi_s, "--sizes")
    if hi < lo:
        raise field_error("--sizes", text, "has its upper bound below its lower bound", "write A:B with A <= B")
    out = []
    s = lo
    while s <= hi:
        out.append(s)
        s *= 2
    return out


def select_group(graph_gpus: tuple[str, ...], args: argparse.Namespace) -> tuple[str, ...]:
    if args.ranks is not None:
        group = tuple(x.strip() for x in args.ranks.split(",") if x.strip())
        if not group:
            raise field_error("--ranks", args.ranks, "names no GPU", f"list GPUs, e.g. {','.join(graph_gpus[:2])}")
        if len(set(group)) != len(group):
            dup = next(g for g in group if group.count(g) > 1)
            raise field_error("--ranks", dup, "is listed twice", "give each GPU once")
        unknown = [g for g in group if g not in graph_gpus]
        if unknown:
            raise field_error("--ranks", unknown[0], "is not a GPU of the topology", f"e.g. {list(graph_gpus[:3])}")
        return group
    if args.gpus is not None:
        if not 1 <= args.gpus <= len(graph_gpus):
            raise field_error("--gpus", args.gpus, f"must be in 1..{len(graph_gpus)} (GPUs of the topology)")
        return graph_gpus[: args.gpus]
    return graph_gpus


def run_backend(backend: str, graph: NetGraph, plan: ExecutionPlan, env: CollectiveEnv, args) -> float:
    """Makespan (s) of ``plan`` on ``backend`` (a network backend of the registry, or ``closed-form``)."""
    if backend == "closed-form":
        return estimate_plan(plan, env).makespan_s
    from hetero_ns3.network.backend import get_backend
    from hetero_ns3.network.config import CcConfig, NetworkConfig

    config = NetworkConfig(cc=CcConfig(kind=args.cc)) if args.cc else NetworkConfig()
    out = get_backend(backend, "--backend").run(plan, graph, config, seed=args.seed)
    if not out.completed:
        raise SimulationError(f"the {backend} replay stopped before every task finished (at {out.sim_time_s:.6f} s)")
    return out.times.makespan_s


def run(args: argparse.Namespace) -> int:
    from hetero_ns3.topology import resolve_topology

    op = normalize_op(args.op, "OP")
    if op == "all_to_all_v":
        raise ScenarioError("OP (all_to_all_v) needs a per-pair size matrix; use the Python API (CollectiveCall)")
    if args.cc and args.backend != "ns3":
        raise field_error("--cc", args.cc, f"applies to the ns3 backend only (backend is {args.backend})")
    sizes = parse_sizes(args.sizes)
    # the graph the backend simulates (`auto` NIC attachment as that backend resolves it); `model` and
    # `closed-form` simulate no network and keep the detailed graph
    attach = "pcie"
    if args.backend in backend_names():
        from hetero_ns3.network.backend import get_backend

        attach = get_backend(args.backend).nic_attach_auto
    graph = resolve_topology(
        args.topology,
        *link_args(args.topology, args.link_rate, args.link_delay),
        nic_attach_auto=attach,
        routing=args.routing,
    )
    env = CollectiveEnv.from_graph(graph, load_tuning(args.tuning) if args.tuning else None)
    group = select_group(env.gpus, args)
    n = len(group)
    peer = args.peer
    if op == "send_recv":
        if peer is None and n < 2:
            raise field_error("--peer", None, "is needed for send_recv on one GPU", "give --peer or use --gpus 2")
        peer = peer or group[1]
        env.check_gpu(peer, "--peer")
        if peer == group[0]:
            raise field_error("--peer", peer, "is the sending GPU itself", "give another GPU")
    elif n < 2:
        raise ScenarioError(
            f"{op} on one rank ({group[0]}) has nothing to communicate; use --gpus 2 or more, a topology with "
            "more GPUs (e.g. star:2), or send_recv with --peer"
        )
    members = group if (peer is None or peer in group) else (*group, peer)
    experts = parse_experts(args.experts) if args.experts else None
    if experts is not None and op != "all_to_all":
        raise field_error("--experts", args.experts, f"applies to all_to_all only (op is {op})", "drop --experts")
    tsize = DTYPES[args.dtype]
    rows = []
    for size in sizes:
        call = CollectiveCall(op, group, size, algo=args.algo, protocol=args.protocol, channels=args.channels,
                              root=args.root, peer=peer, routing=experts)  # fmt: skip
        builder = PlanBuilder(members)
        res = plan_collective(builder, call, env)
        plan = builder.build()
        t = res.predicted_s if args.backend == "model" else run_backend(args.backend, graph, plan, env, args)
        ranks = 2 if op == "send_recv" else n
        algbw = size / t / 1e9 if t > 0 else 0.0
        hop = res.bottleneck
        rows.append(
            {
                "op": op,
                "size_bytes": size,
                "time_s": t,
                "algbw_GBps": algbw,
                "busbw_GBps": algbw * busbw_factor(op, ranks),
                "algo": res.algo,
                "protocol": res.protocol,
                "channels": res.channels,
                "count": size // tsize,
                "type": args.dtype,
                "predicted_s": res.predicted_s,
                "flows": plan.n_flows,
                "bottleneck": None
                if hop is None
                else {"src": hop.src, "dst": hop.dst, "kind": hop.kind, "bandwidth_GBps": hop.bandwidth_Bps / 1e9},
            }
        )
    if args.json:
        print(json.dumps(rows, indent=1))
        return 0
    print_table(rows, op, group, args, PCIE_ROOT_NOTE if env.pcie_root_pairs(group) else "")
    return 0


def print_table(rows: list[dict], op: str, group: tuple[str, ...], args: argparse.Namespace, note: str = "") -> None:
    redop = "sum" if op in ("all_reduce", "reduce_scatter", "reduce") else "none"
    root = args.root if op in ("broadcast", "reduce") else -1
    print(f"# hetero-ns3 collective {op}: {len(group)} ranks on {args.topology} (backend {args.backend})")
    print(f"#  ranks: {', '.join(group[:8])}{' ...' if len(group) > 8 else ''}")
    if note:
        print(f"#  note: {note}")
    print("#")
    head = f"#{'size':>11} {'count':>13} {'type':>9} {'redop':>6} {'root':>5} {'time':>10} {'algbw':>8} {'busbw':>8}"
    print(head + f"  {'algo/proto':<16} {'ch':>3} {'model':>10}  bottleneck")
    print(
        f"#{'(B)':>11} {'(elements)':>13} {'':>9} {'':>6} {'':>5} {'(us)':>10} {'(GB/s)':>8} {'(GB/s)':>8}  {'':<16} {'':>3} {'(us)':>10}"
    )
    for r in rows:
        hop = r["bottleneck"]
        hop_s = "-" if hop is None else f"{hop['src']}->{hop['dst']} {hop['kind']} {hop['bandwidth_GBps']:.1f} GB/s"
        print(
            f"{r['size_bytes']:>12} {r['count']:>13} {r['type']:>9} {redop:>6} {root:>5} {r['time_s'] * 1e6:>10.2f} "
            f"{r['algbw_GBps']:>8.2f} {r['busbw_GBps']:>8.2f}  {r['algo'] + '/' + r['protocol']:<16} "
            f"{r['channels']:>3} {r['predicted_s'] * 1e6:>10.2f}  {hop_s}"
        )
    avg = sum(r["busbw_GBps"] for r in rows) / len(rows) if rows else 0.0
    print(f"# Avg bus bandwidth    : {avg:.3f}")
