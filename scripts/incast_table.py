"""The 8-to-1 incast table of docs/roce.md ("The 8-to-1 incast"): one row per congestion control and preset.

8 x 10 MB from h1..h8 to h0 on ``star:9`` (100 Gb/s, 1 us links, 32 MiB buffer), all at t = 0; the
bottleneck queue (switch port towards h0) is sampled every 1 us. Prints markdown rows.
Usage: ``python scripts/incast_table.py [kind:preset ...]`` (default: every row).
"""

from __future__ import annotations

import sys

import numpy as np

from hetero_ns3.network.config import CcConfig, NetworkConfig
from hetero_ns3.network.incast import ideal_makespan_s, incast_flows, jain_index
from hetero_ns3.network.ns3.roce import egress_port, simulate_flows
from hetero_ns3.topology import resolve_topology

ROWS = ("dcqcn:paper", "dcqcn:hpcc-artifact", "dcqcn:connectx", "hpcc:paper", "hpcc:recommended", "none:-")
RATE = 100e9
N = 8
SIZE = 10_000_000


def row(kind: str, preset: str | None) -> str:
    """Run the incast under one congestion control and return its markdown table row."""
    graph = resolve_topology(f"star:{N + 1}", RATE, 1e-6)
    port = egress_port(graph, "sw0", "h0")
    flows = incast_flows(N, SIZE)
    res = simulate_flows(graph, flows, NetworkConfig(cc=CcConfig(kind=kind, preset=preset)), sample_ports=[port])
    f = res.flows
    ideal = ideal_makespan_s(N, SIZE, RATE, int_header=kind == "hpcc")
    jain = jain_index(f)
    q = res.queues["bytes"].to_numpy()
    makespan = float(f["finish_s"].max())
    cells = [
        kind,
        preset or "-",
        f"{makespan * 1e3:.2f}",
        f"{makespan / ideal:.3f}",
        f"{jain:.3f}",
        f"{f['fct_s'].min() * 1e3:.2f}-{f['fct_s'].max() * 1e3:.2f}",
        f"{np.percentile(q, 99) / 1e6:.2f}",
        f"{q.max() / 1e6:.2f}",
        str(int(res.ports["pfc_pause_sent"].sum())),
    ]
    return "| " + " | ".join(cells) + " |"


def main(argv: list[str]) -> int:
    for spec in argv or ROWS:
        kind, _, preset = spec.partition(":")
        print(row(kind, None if preset in ("", "-") else preset), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
