"""``hetero-ns3 topo show T``: summarize a topology (preset, TOML file, ``star:N``, ``leafspine:L,S,H``)."""

from __future__ import annotations

import argparse
import json
from dataclasses import asdict
from pathlib import Path

from hetero_ns3.errors import ScenarioError

NAME = "topo"
HELP = "show a topology: GPUs by type, switches, links by rate, bisection bandwidth, ECMP path counts"


def add_arguments(p: argparse.ArgumentParser) -> None:
    sub = p.add_subparsers(dest="topo_action", metavar="ACTION")
    sub.required = True
    show = sub.add_parser("show", help="print a summary of topology T")
    show.add_argument("topology", metavar="T", help="preset name (h0..h4, ...), TOML path, star:N or leafspine:L,S,H")
    show.add_argument("--plot", metavar="FILE.png", help="also draw the topology into FILE.png")
    show.add_argument("--pair", nargs=2, action="append", metavar=("SRC", "DST"), help="host pair for ECMP counts")
    show.add_argument("--json", action="store_true", help="print the summary as JSON")
    sub.add_parser("list", help="list the presets in topologies/")


def run(args: argparse.Namespace) -> int:
    from hetero_ns3.paths import preset_dir

    if args.topo_action == "list":
        for p in sorted(preset_dir("topologies").glob("*.toml")):
            print(p.stem)
        return 0
    from hetero_ns3.outputs import check_out_file
    from hetero_ns3.topology import build_graph, load_cluster, resolve_topology
    from hetero_ns3.topology.simple import parse_inline
    from hetero_ns3.topology.summary import format_summary, summarize

    if args.plot is not None:
        check_out_file(args.plot, "--plot", (".png",))
    spec = args.topology
    graph = parse_inline(spec, 100e9, 1e-6)
    cluster = None
    if graph is None:
        if ":" in spec and not Path(spec).exists():
            graph = resolve_topology(spec)  # raises the inline-form error
        cluster = load_cluster(spec)
        graph = build_graph(cluster)
    pairs = [tuple(p) for p in args.pair] if args.pair else None
    if pairs:
        for a, b in pairs:
            for h in (a, b):
                if h not in graph.host_names():
                    raise ScenarioError(
                        f"--pair host {h!r} is not a host of {spec}; hosts look like {graph.host_names()[:3]}"
                    )
    s = summarize(graph, cluster, pairs, name=spec)
    if args.json:
        d = asdict(s)
        d["links_by_kind_rate"] = [{"kind": k, "rate_bps": r, "count": n} for (k, r), n in s.links_by_kind_rate.items()]
        print(json.dumps(d, indent=2))
    else:
        print(format_summary(s))
    if args.plot:
        from hetero_ns3.topology.plot import plot_topology

        out = plot_topology(graph, args.plot, title=s.name)
        print(f"plot: {out}")
    return 0
