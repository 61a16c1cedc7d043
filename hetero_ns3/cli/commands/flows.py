"""``hetero-ns3 flows``: simulate a flow table on a topology with the native RoCE backend."""

from __future__ import annotations

import argparse
from pathlib import Path

from hetero_ns3.cli.commands._common import link_args
from hetero_ns3.units import parse_time

NAME = "flows"
HELP = "simulate flows (src,dst,size_bytes,start_s[,priority]) on a topology with PFC/ECN and HPCC/DCQCN"


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("flows", help="CSV with columns src,dst,size_bytes,start_s (+ optional priority 0..7)")
    p.add_argument(
        "--topology",
        "-t",
        required=True,
        help="star:N, leafspine:L,S,H, a topology preset name or a topology file",
    )
    p.add_argument(
        "--cc", choices=("hpcc", "dcqcn", "dctcp", "timely", "none"), default="dcqcn", help="congestion control"
    )
    p.add_argument(
        "--cc-preset",
        default=None,
        help="parameter preset of --cc (dcqcn: paper, hpcc-artifact, connectx [default]; hpcc: paper [default], "
        "recommended; timely: paper [default], hpcc-artifact); see docs/roce.md",
    )
    p.add_argument("--out", "-o", required=True, help="output directory (flows.csv, ports.csv)")
    p.add_argument("--link-rate", help="rate of every link of star/leafspine (default 100Gbps)")
    p.add_argument("--link-delay", help="delay of every link of star/leafspine (default 1us)")
    p.add_argument("--seed", type=int, default=1, help="random seed (ECN marking; default 1)")
    p.add_argument("--no-pfc", action="store_true", help="disable PFC (lossy switches, go-back-N recovery)")
    p.add_argument("--profile", action="store_true", help="print events by kind and per DATA frame")
    p.add_argument("--stop-time", default=None, help="stop the simulation at this time (e.g. 10ms)")


def run(args: argparse.Namespace) -> int:
    from dataclasses import replace

    from hetero_ns3.network.config import CcConfig, NetworkConfig, PfcConfig
    from hetero_ns3.network.flows_io import flow_arrays, read_flows_csv
    from hetero_ns3.outputs import check_out_dir
    from hetero_ns3.topology import resolve_topology

    out = check_out_dir(args.out)
    rate, delay = link_args(args.topology, args.link_rate, args.link_delay)
    stop = parse_time(args.stop_time, "--stop-time", allow_zero=False) if args.stop_time else None
    graph = resolve_topology(args.topology, rate, delay, nic_attach_auto="direct")  # as the packet level resolves it
    path = Path(args.flows)
    table = read_flows_csv(path)
    arrays = flow_arrays(graph, table, source=path.name)  # validates before ns-3 is imported
    config = replace(
        NetworkConfig(), cc=CcConfig(kind=args.cc, preset=args.cc_preset), pfc=PfcConfig(enabled=not args.no_pfc)
    )

    from hetero_ns3.network.ns3.roce import simulate_flows

    res = simulate_flows(graph, arrays, config, seed=args.seed, stop_time_s=stop)
    out.mkdir(parents=True, exist_ok=True)
    flows_out = table.copy()
    flows_out["finish_s"] = res.flows["finish_s"].to_numpy()
    flows_out["fct_s"] = res.flows["fct_s"].to_numpy()
    flows_out["slowdown"] = res.flows["slowdown"].to_numpy()
    flows_out.to_csv(out / "flows.csv", index=False)
    res.ports.to_csv(out / "ports.csv", index=False)
    label = f"{args.cc}/{args.cc_preset}" if args.cc_preset else args.cc
    print(f"flows ({label}, {args.topology}): {res.summary()}; wrote {out / 'flows.csv'} and {out / 'ports.csv'}")
    if args.profile and res.profile is not None:
        from hetero_ns3.network.ns3.profile import format_profile

        print(format_profile(res.profile))
    return 0 if res.completed == len(res.flows) else 1
