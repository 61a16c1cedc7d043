"""Memory per flow of the packet-level network: peak RSS of runs with N and 2N flows (issue 15 item 5).

Hosts of ``leafspine:8,4,8`` (64 hosts, 100 Gbps, 1 us) send ``--flows`` flows of ``--kbytes`` each in
waves: flow i leaves host i mod 64 at ``(i // 64) * --gap-us`` for a host chosen by a fixed rotation,
so about 64 flows are in flight at any time however many the run has. Each size runs in its own
subprocess (``simulate_flows``, C ABI, default DCQCN); the slope (peak RSS of 2N - peak RSS of N) / N
is what one more finished flow costs, the simulator's fixed cost and the flows in flight cancelling
out. It includes Python's per-flow input and result tables, which are the same in every build.

Run:  .venv/bin/python bench/bench_flow_memory.py [--flows 100000] [--kbytes 64] [--cc dcqcn]
      (PYTHONPATH=/path/to/other/checkout for the same figure of another build)
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import time

import numpy as np
import pandas as pd

HOSTS = 64


def flows_table(n: int, kbytes: int, gap_s: float) -> pd.DataFrame:
    i = np.arange(n)
    src = i % HOSTS
    dst = (src + 1 + (i // HOSTS) % (HOSTS - 1)) % HOSTS
    return pd.DataFrame(
        {
            "src": [f"h{s}" for s in src],
            "dst": [f"h{d}" for d in dst],
            "size_bytes": np.full(n, kbytes * 1000, dtype=np.int64),
            "start_s": (i // HOSTS) * gap_s,
        }
    )


def child(n: int, args: argparse.Namespace) -> dict[str, float | int]:
    from hetero_ns3.network.config import CcConfig, NetworkConfig
    from hetero_ns3.network.ns3.roce import simulate_flows
    from hetero_ns3.topology import resolve_topology

    graph = resolve_topology("leafspine:8,4,8", 100e9, 1e-6)
    flows = flows_table(n, args.kbytes, args.gap_us * 1e-6)
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    c0, t0 = time.process_time(), time.perf_counter()
    res = simulate_flows(graph, flows, NetworkConfig(cc=CcConfig(kind=args.cc)), seed=1)
    return {
        "flows": n,
        "completed": int(res.completed),
        "events": int(res.events),
        "sim_ms": res.sim_time_s * 1e3,
        "wall_s": time.perf_counter() - t0,
        "cpu_s": time.process_time() - c0,
        "rss_before_mib": before / 1024.0,
        "peak_rss_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0,
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--flows", type=int, default=100_000, help="N: runs with N and 2N flows")
    ap.add_argument("--kbytes", type=int, default=64, help="flow size, kB")
    ap.add_argument("--gap-us", type=float, default=20.0, help="time between waves of 64 flows, us")
    ap.add_argument("--cc", default="dcqcn")
    ap.add_argument("--child", type=int, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        print(json.dumps(child(args.child, args)))
        return 0
    rows = []
    for n in (args.flows, 2 * args.flows):
        cmd = [sys.executable, __file__, "--child", str(n), "--kbytes", str(args.kbytes)]
        cmd += ["--gap-us", str(args.gap_us), "--cc", args.cc]
        out = subprocess.run(cmd, stdout=subprocess.PIPE, text=True, check=True).stdout
        rows.append(json.loads(out.strip().splitlines()[-1]))
        print(json.dumps(rows[-1]), flush=True)
    a, b = rows
    slope = (b["peak_rss_mib"] - a["peak_rss_mib"]) * 1024 * 1024 / (b["flows"] - a["flows"])
    print(f"peak RSS per additional finished flow: {slope:.0f} bytes ({a['flows']} -> {b['flows']} flows)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
