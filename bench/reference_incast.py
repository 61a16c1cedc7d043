"""Our side of the reference comparison of docs/roce.md ("The 8-to-1 incast", "Reference implementation").

Runs the issue-14 incast (8 x 10 MB, h1..h8 -> h0 on ``star:9``, 100 Gb/s, 1 us links, 32 MiB buffer) with
DCQCN preset ``hpcc-artifact`` per DATA payload size and per seed (the seed drives the switches' random ECN
marking), and prints one line per run in the format of ``bench/reference_incast.sh`` (the reference's
driver), so that the two spreads can be compared. Ideal = our wire bytes (payload + 62 header bytes per
frame) / line rate, as ``hetero_ns3.network.incast``. Not run by the tests.

Usage: ``.venv/bin/python bench/reference_incast.py [--payloads 4096 1000] [--seeds 1 2 3]``
"""

from __future__ import annotations

import argparse
import resource
import sys
from dataclasses import replace

import numpy as np

from hetero_ns3.network.config import CcConfig, NetworkConfig, NicConfig
from hetero_ns3.network.incast import HEADER_BYTES, incast_flows, jain_index
from hetero_ns3.network.ns3.roce import egress_port, simulate_flows
from hetero_ns3.topology import resolve_topology

RATE = 100e9
N = 8
SIZE = 10_000_000


def run(payload: int, seed: int) -> str:
    """One incast run; returns a ``summary`` line (same keys as the reference driver's)."""
    graph = resolve_topology(f"star:{N + 1}", RATE, 1e-6)
    port = egress_port(graph, "sw0", "h0")
    nic = NicConfig()
    nic = replace(nic, segment_bytes={**nic.segment_bytes, "network": payload}, default_segment_bytes=payload)
    config = NetworkConfig(cc=CcConfig(kind="dcqcn", preset="hpcc-artifact"), nic=nic)
    res = simulate_flows(graph, incast_flows(N, SIZE), config, seed=seed, sample_ports=[port])
    f = res.flows
    frames = N * -(-SIZE // payload)
    wire = N * SIZE + frames * HEADER_BYTES
    ideal = wire * 8 / RATE
    makespan = float(f["finish_s"].max())
    q = res.queues["bytes"].to_numpy()
    return (
        f"summary payload={payload} seed={seed} makespan_ms={makespan * 1e3:.4f} ideal_ms={ideal * 1e3:.4f} "
        f"ratio={makespan / ideal:.4f} jain={jain_index(f):.4f} cnps={int(f['cnps'].sum())} "
        f"queue_p99_MB={np.percentile(q, 99) / 1e6:.3f} queue_max_MB={q.max() / 1e6:.3f} "
        f"fct_min_ms={f['fct_s'].min() * 1e3:.4f} pfc_pauses={int(res.ports['pfc_pause_sent'].sum())}"
    )


def _cpu_s() -> float:
    """User + system CPU seconds of this process and its finished children."""
    own, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + kids.ru_utime + kids.ru_stime


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--payloads", type=int, nargs="+", default=[4096, 1000], help="DATA payload bytes per frame")
    ap.add_argument("--seeds", type=int, nargs="+", default=list(range(1, 11)), help="simulation seeds")
    args = ap.parse_args(argv)
    for payload in args.payloads:
        ratios = []
        for seed in args.seeds:
            before = _cpu_s()
            line = run(payload, seed)
            cpu = _cpu_s() - before
            ratios.append(float(line.split("ratio=")[1].split()[0]))
            print(f"{line} cpu_s={cpu:.1f}", flush=True)
        r = np.asarray(ratios)
        print(
            f"# payload={payload}: ratio mean {r.mean():.3f} median {np.median(r):.3f} "
            f"min {r.min():.3f} max {r.max():.3f} over {len(r)} seeds",
            flush=True,
        )
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
