"""Our side of the reference comparison of docs/roce.md ("The 8-to-1 incast", "Reference implementation").

Runs the issue-14 incast (8 flows, h1..h8 -> h0 on ``star:9``, 100 Gb/s, 1 us links; 10 MB each and a
32 MiB buffer unless told otherwise) per DATA payload size and per seed (the seed drives the switches'
random ECN marking), and prints one line per run in the format of ``bench/reference_incast.sh`` (the
reference's driver), so that the two spreads can be compared. ``--cc dcqcn`` (default): preset
``hpcc-artifact``; ``--cc hpcc``: ``--preset`` (default ``paper``) with ``--max-stage`` / ``--rate-ai`` /
``--min-rate`` overrides (``run.py --cc hp`` at 100 Gb/s is eta 0.95, ``--max-stage 0 --rate-ai 40e6
--min-rate 1e9``); ``--cc none``: PFC alone. ``--buffer`` / ``--headroom`` set the switch buffer and the PFC
headroom per port (the reference's third.cc: 3 x rate x delay = 37500 B). Ideal = our wire bytes (payload
+ 62 header bytes per frame, + 42 INT bytes with HPCC) / line rate, as ``hetero_ns3.network.incast``. Not
run by the tests.

Usage: ``.venv/bin/python bench/reference_incast.py [--payloads 4096 1000] [--seeds 1 2 3] [--cc hpcc ...]``
"""

from __future__ import annotations

import argparse
import resource
import sys
from dataclasses import replace

import numpy as np

from hetero_ns3.network.config import (
    BufferConfig,
    CcConfig,
    HpccConfig,
    NetworkConfig,
    NicConfig,
    PfcConfig,
)
from hetero_ns3.network.incast import incast_flows, jain_index
from hetero_ns3.network.ns3.roce import egress_port, simulate_flows
from hetero_ns3.topology import resolve_topology

RATE = 100e9
N = 8
SIZE = 10_000_000


def start_offset_ns(seed: int, flow: int, jitter_ns: int) -> int:
    """Start offset of sender ``flow`` (1..N) drawn from ``seed`` in [0, jitter_ns) ns: the driver's formula, so that
    both simulators start the same flows at the same instants (a spread of runs for a CC without random draws)."""
    if jitter_ns <= 0:
        return 0
    return ((((seed * 1_000_003 + flow) * 2_654_435_761) % 2**64) >> 16) % jitter_ns


def config_for(args: argparse.Namespace, payload: int) -> NetworkConfig:
    """The network configuration of one row: CC, frame size, buffer and headroom from the command line."""
    nic = NicConfig()
    nic = replace(nic, segment_bytes={**nic.segment_bytes, "network": payload}, default_segment_bytes=payload)
    nic = replace(nic, pacing_on_rate_change=args.pacing)
    if args.cc == "hpcc":
        hpcc = HpccConfig(max_stage=args.max_stage, rate_ai_bps=args.rate_ai, min_rate_bps=args.min_rate)
        cc = CcConfig(kind="hpcc", preset=args.preset or "paper", hpcc=hpcc)
    elif args.cc == "dcqcn":
        cc = CcConfig(kind="dcqcn", preset=args.preset or "hpcc-artifact")
    else:
        cc = CcConfig(kind="none")
    return NetworkConfig(
        cc=cc,
        nic=nic,
        buffer=BufferConfig(switch_buffer_bytes=args.buffer),
        pfc=PfcConfig(headroom_bytes=args.headroom),
    )


def run(args: argparse.Namespace, payload: int, seed: int) -> str:
    """One incast run; returns a ``summary`` line (same keys as the reference driver's)."""
    graph = resolve_topology(f"star:{N + 1}", RATE, 1e-6)
    port = egress_port(graph, "sw0", "h0")
    config = config_for(args, payload)
    flows = incast_flows(N, args.size)
    offsets = [start_offset_ns(seed, int(src[1:]), args.jitter_ns) for src in flows["src"]]
    flows["start_s"] = flows["start_s"] + np.asarray(offsets, dtype=float) * 1e-9
    res = simulate_flows(graph, flows, config, seed=seed, sample_ports=[port])
    f = res.flows
    frames = N * -(-args.size // payload)
    header = config.nic.header_bytes + (config.nic.int_header_bytes if args.cc == "hpcc" else 0)
    wire = N * args.size + frames * header
    ideal = wire * 8 / RATE
    makespan = float(f["finish_s"].max())
    q = res.queues["bytes"].to_numpy()
    ports = res.ports
    return (
        f"summary payload={payload} seed={seed} flows_done={res.completed} makespan_ms={makespan * 1e3:.4f} "
        f"ideal_ms={ideal * 1e3:.4f} ratio={makespan / ideal:.4f} jain={jain_index(f):.4f} "
        f"cnps={int(f['cnps'].sum())} queue_p99_MB={np.percentile(q, 99) / 1e6:.3f} "
        f"queue_max_MB={q.max() / 1e6:.3f} fct_min_ms={f['fct_s'].min() * 1e3:.4f} "
        f"pfc_pauses={int(ports['pfc_pause_sent'].sum())} paused_us={float(ports['paused_s'].sum()) * 1e6:.1f} "
        f"drops={int(ports['drops_total'].sum())} retx={int(f['retransmits'].sum())} cc={args.cc}"
    )


def _cpu_s() -> float:
    """User + system CPU seconds of this process and its finished children."""
    own, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + kids.ru_utime + kids.ru_stime


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--payloads", type=int, nargs="+", default=[4096, 1000], help="DATA payload bytes per frame")
    ap.add_argument("--seeds", type=int, nargs="+", default=list(range(1, 11)), help="simulation seeds")
    ap.add_argument("--cc", choices=["dcqcn", "hpcc", "none"], default="dcqcn", help="congestion control")
    ap.add_argument("--preset", default=None, help="CC preset (default: hpcc-artifact / paper)")
    ap.add_argument("--max-stage", type=int, default=None, help="HPCC maxStage override")
    ap.add_argument("--rate-ai", type=float, default=None, help="HPCC W_AI as a rate override, bit/s")
    ap.add_argument("--min-rate", type=float, default=None, help="HPCC minimum rate override, bit/s")
    ap.add_argument("--size", type=int, default=SIZE, help="bytes per flow")
    ap.add_argument("--buffer", type=int, default=32 * 1024 * 1024, help="switch buffer, bytes")
    ap.add_argument("--headroom", type=int, default=0, help="PFC headroom per port, bytes (0: ours, automatic)")
    ap.add_argument("--jitter-ns", type=int, default=0, help="flows start at a seed-drawn offset in [0, J) ns")
    ap.add_argument(
        "--pacing",
        choices=("rescale", "frame_gap", "keep"),
        default="rescale",
        help="nic.pacing_on_rate_change (frame_gap: the HPCC artifact's rule; keep: its DCQCN's)",
    )
    args = ap.parse_args(argv)
    for payload in args.payloads:
        ratios = []
        for seed in args.seeds:
            before = _cpu_s()
            line = run(args, payload, seed)
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
