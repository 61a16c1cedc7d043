"""Benchmark of the native RoCE module against stock ns-3, measured in the same process.

1. Packet-hops per wall-second for one long flow over a 4-hop chain (host - sw - sw - sw - host,
   100 Gbps, 1 us per link): our RoceNetDevice/RdmaNic path versus stock ns-3
   (PointToPointNetDevice + IPv4 + UDP: UdpClient -> UdpServer, global routing), same path, same
   bytes, ~1000-byte packets (UDP payload 1000 B; our DATA payload 1000 B), paired in each repetition.
   Our receiver ACKs per ``--ack-interval`` (default: the config's, one ACK per 16 DATA frames under CC
   none; ``--ack-interval 1`` reproduces the per-frame ACKs of figures before the coalescing default).
   Our runs use the PriorityQueueScheduler (as simulate_flows does); stock runs once with ns-3's default
   scheduler and once with the same one, and the ratio is taken against the faster of the two.
2. A 64-host random permutation on leafspine:8,4,8 (each host sends one flow to another host):
   wall time, events per second and peak RSS, per congestion control.
3. (``--dp``) The pattern that dominates a training iteration at the packet level: the ZeRO-1
   data-parallel phase on the ``h0`` preset shrunk to ``--dp-nodes`` DGX-like nodes. Node k's GPU i
   streams ``--dp-mbytes`` to GPU i of node k+1 (ring over nodes, every rail busy in both
   directions: GPU - PCIe switch - NIC - rail switch - NIC - PCIe switch - GPU, 4096-byte frames),
   plus an NVLink case (every GPU of node 0 to every other GPU of node 0, 64 KiB segments).
   Reports wall time, events, events/s, frames sent on all ports, PFC pauses, CNPs, ECN marks.

Run:  .venv/bin/python bench/bench_roce.py [--mbytes 100] [--perm-mbytes 2]
      .venv/bin/python bench/bench_roce.py --dp [--dp-nodes 2] [--dp-mbytes 100] [--cc dcqcn]
"""

from __future__ import annotations

import argparse
import platform
import resource
import tempfile
import time
from pathlib import Path

import numpy as np
import pandas as pd

from hetero_ns3.network.config import CcConfig, NetworkConfig, NicConfig
from hetero_ns3.network.ns3 import ns3env
from hetero_ns3.network.ns3.roce import FAST_SCHEDULER, simulate_flows, use_fast_scheduler
from hetero_ns3.topology import resolve_topology
from hetero_ns3.topology.graph import GraphLink, GraphNode, NetGraph, make_graph

REPO = Path(__file__).resolve().parent.parent
HOPS = 4
RATE = "100Gbps"
PAYLOAD = 1000


def _rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0


def bench_ours(total_bytes: int, ack_interval: int | None = None) -> dict[str, float]:
    nodes = [GraphNode("h0", "host"), GraphNode("h1", "host")] + [GraphNode(f"s{i}", "switch") for i in range(HOPS - 1)]
    chain = ["h0"] + [f"s{i}" for i in range(HOPS - 1)] + ["h1"]
    links = [GraphLink(a, b, 100e9, 1e-6) for a, b in zip(chain, chain[1:], strict=False)]
    graph = make_graph(nodes, links)
    nic = NicConfig(default_segment_bytes=PAYLOAD, segment_bytes={}, ack_interval=ack_interval)
    cfg = NetworkConfig(cc=CcConfig(kind="none"), nic=nic)
    flows = pd.DataFrame({"src": ["h0"], "dst": ["h1"], "size_bytes": [total_bytes], "start_s": [0.0]})
    t0 = time.perf_counter()
    res = simulate_flows(graph, flows, cfg)
    wall = time.perf_counter() - t0
    data_pkts = -(-total_bytes // PAYLOAD)
    return {
        "wall_s": wall,
        "packet_hops": data_pkts * HOPS,
        "frames_all": int(res.ports["tx_packets"].sum()),
        "events": res.events,
        "fct_s": float(res.flows["fct_s"][0]),
    }


def bench_stock(total_bytes: int, fast_scheduler: bool = False) -> dict[str, float]:
    ns = ns3env.import_ns()
    if fast_scheduler:
        use_fast_scheduler(ns)
    n_pkts = -(-total_bytes // PAYLOAD)
    nodes = ns.NodeContainer()
    nodes.Create(HOPS + 1)
    p2p = ns.PointToPointHelper()
    p2p.SetDeviceAttribute("DataRate", ns.StringValue(RATE))
    p2p.SetChannelAttribute("Delay", ns.StringValue("1us"))
    stack = ns.InternetStackHelper()
    stack.Install(nodes)
    addr = ns.Ipv4AddressHelper()
    last_if = None
    for i in range(HOPS):
        devs = p2p.Install(nodes.Get(i), nodes.Get(i + 1))
        addr.SetBase(ns.Ipv4Address(f"10.0.{i}.0"), ns.Ipv4Mask("255.255.255.0"))
        last_if = addr.Assign(devs)
    ns.Ipv4GlobalRoutingHelper.PopulateRoutingTables()
    server = ns.UdpServerHelper(9)
    sapps = server.Install(nodes.Get(HOPS))
    sapps.Start(ns.Seconds(0.0))
    client = ns.UdpClientHelper(ns.InetSocketAddress(last_if.GetAddress(1), 9).ConvertTo())
    client.SetAttribute("MaxPackets", ns.UintegerValue(n_pkts))
    # 1000 B payload + 8 UDP + 20 IPv4 + 2 PPP = 1030 B = 82.4 ns at 100 Gbps; pace just above it
    client.SetAttribute("Interval", ns.TimeValue(ns.NanoSeconds(83)))
    client.SetAttribute("PacketSize", ns.UintegerValue(PAYLOAD))
    capps = client.Install(nodes.Get(0))
    capps.Start(ns.Seconds(0.0))
    t0 = time.perf_counter()
    ns.Simulator.Run()
    wall = time.perf_counter() - t0
    srv = sapps.Get(0).GetObject[ns.UdpServer]()
    received = int(srv.GetReceived())
    ns.Simulator.Destroy()
    return {"wall_s": wall, "packet_hops": received * HOPS, "received": received, "sent": n_pkts}


def bench_permutation(cc: str, mbytes: float, seed: int = 1) -> dict[str, float]:
    graph = resolve_topology("leafspine:8,4,8", 100e9, 1e-6)
    hosts = graph.host_names()
    rng = np.random.default_rng(seed)
    while True:
        perm = rng.permutation(len(hosts))
        if not np.any(perm == np.arange(len(hosts))):
            break
    flows = pd.DataFrame(
        {
            "src": hosts,
            "dst": [hosts[j] for j in perm],
            "size_bytes": [int(mbytes * 1e6)] * len(hosts),
            "start_s": [0.0] * len(hosts),
        }
    )
    res = simulate_flows(graph, flows, NetworkConfig(cc=CcConfig(kind=cc)))
    return {
        "cc": cc,
        "wall_s": res.wall_s,
        "events": res.events,
        "events_per_s": res.events / res.wall_s,
        "sim_ms": res.flows["finish_s"].max() * 1e3,
        "done": res.completed,
        "peak_rss_mb": _rss_mb(),
    }


def _h0_slice(n_nodes: int) -> NetGraph:
    """The ``h0`` preset with ``n_nodes`` nodes instead of 16 (same node type, rails and spines)."""
    text = (REPO / "topologies" / "h0.toml").read_text()
    text = text.replace("count = 16", f"count = {n_nodes}")
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "h0_slice.toml"
        path.write_text(text)
        return resolve_topology(str(path))


def _dp_flows(n_nodes: int, nbytes: int) -> pd.DataFrame:
    """Ring over nodes on every rail: n{k}.g{i} -> n{k+1}.g{i}, all at t = 0."""
    src = [f"n{k}.g{i}" for k in range(n_nodes) for i in range(8)]
    dst = [f"n{(k + 1) % n_nodes}.g{i}" for k in range(n_nodes) for i in range(8)]
    return pd.DataFrame({"src": src, "dst": dst, "size_bytes": [nbytes] * len(src), "start_s": [0.0] * len(src)})


def _nvlink_flows(nbytes: int) -> pd.DataFrame:
    """All-to-all among the 8 GPUs of node 0 (NVSwitch), all at t = 0."""
    pairs = [(i, j) for i in range(8) for j in range(8) if i != j]
    return pd.DataFrame(
        {
            "src": [f"n0.g{i}" for i, _ in pairs],
            "dst": [f"n0.g{j}" for _, j in pairs],
            "size_bytes": [nbytes] * len(pairs),
            "start_s": [0.0] * len(pairs),
        }
    )


def bench_pattern(graph: NetGraph, flows: pd.DataFrame, config: NetworkConfig) -> dict[str, float]:
    """Run ``flows`` and summarize cost (wall, events, frames) and network activity."""
    cpu0 = time.process_time()
    res = simulate_flows(graph, flows, config)
    cpu = time.process_time() - cpu0
    ports = res.ports
    return {
        "wall_s": res.wall_s,
        "cpu_s": cpu,
        "events": res.events,
        "events_per_s": res.events / res.wall_s,
        "frames": int(ports["tx_packets"].sum()),
        "data_gb": float(ports["tx_data_bytes"].sum()) / 1e9,
        "sim_ms": float(res.flows["finish_s"].max()) * 1e3,
        "sim_ms_per_wall_s": float(res.flows["finish_s"].max()) * 1e3 / res.wall_s,
        "mean_fct_ms": float(res.flows["fct_s"].mean()) * 1e3,
        "done": int(res.flows["finish_s"].notna().sum()),
        "flows": len(res.flows),
        "pfc_pauses": int(ports["pfc_pause_sent"].sum()),
        "ecn_marks": int(ports["ecn_marks"].sum()),
        "cnps": int(res.flows["cnps"].sum()),
        "acks": int(res.flows["acks"].sum()),
        "retransmits": int(res.flows["retransmits"].sum()),
        "drops": int(ports["drops_total"].sum()),
    }


def _print_pattern(name: str, r: dict[str, float]) -> None:
    print(
        f"{name}: {r['done']}/{r['flows']} done, sim {r['sim_ms']:.3f} ms (mean FCT {r['mean_fct_ms']:.3f} ms), "
        f"wall {r['wall_s']:.2f} s (CPU {r['cpu_s']:.2f} s), {r['events']:,} events, {r['events_per_s']:,.0f} events/s, "
        f"{r['sim_ms_per_wall_s']:.3f} sim-ms/wall-s, frames {r['frames']:,} ({r['data_gb']:.2f} GB data-hops), "
        f"ACKs {r['acks']:,}, PFC pauses {r['pfc_pauses']:,}, ECN marks {r['ecn_marks']:,}, CNPs {r['cnps']:,}, "
        f"retransmits {r['retransmits']:,}, drops {r['drops']:,}"
    )


def run_dp(n_nodes: int, mbytes: float, cc: str, ack_interval: int | None) -> None:
    """Section 3: the data-parallel (rail) pattern and an NVLink pattern on an h0 slice."""
    graph = _h0_slice(n_nodes)
    nic = NicConfig() if ack_interval is None else NicConfig(ack_interval=ack_interval)
    cfg = NetworkConfig(cc=CcConfig(kind=cc), nic=nic)
    nbytes = int(mbytes * 1e6)
    bench_pattern(graph, _dp_flows(n_nodes, 1_000_000), cfg)  # warm-up (cppyy wrappers)
    _print_pattern(
        f"dp {n_nodes} nodes x 8 rails, {mbytes:g} MB/flow, cc {cc}",
        bench_pattern(graph, _dp_flows(n_nodes, nbytes), cfg),
    )
    _print_pattern(
        f"nvlink 56 flows in node 0, {mbytes:g} MB/flow, cc {cc}", bench_pattern(graph, _nvlink_flows(nbytes), cfg)
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--mbytes", type=float, default=100.0, help="bytes of the long flow, MB (default 100)")
    ap.add_argument("--reps", type=int, default=3, help="paired repetitions of the 4-hop comparison (default 3)")
    ap.add_argument("--perm-mbytes", type=float, default=2.0, help="bytes per permutation flow, MB (default 2)")
    ap.add_argument("--dp", action="store_true", help="run only section 3 (data-parallel pattern on an h0 slice)")
    ap.add_argument("--dp-nodes", type=int, default=2, help="nodes of the h0 slice (default 2)")
    ap.add_argument("--dp-mbytes", type=float, default=100.0, help="bytes per data-parallel flow, MB (default 100)")
    ap.add_argument("--cc", default="dcqcn", help="congestion control of section 3 (default dcqcn)")
    ap.add_argument(
        "--ack-interval",
        type=int,
        default=None,
        help="nic.ack_interval of our runs (default: the config's, 16 for CC none)",
    )
    args = ap.parse_args()
    ns3env.import_ns()
    ns3env.load_module()
    if args.dp:
        run_dp(args.dp_nodes, args.dp_mbytes, args.cc, args.ack_interval)
        return
    rss0 = _rss_mb()
    total = int(args.mbytes * 1e6)
    bench_ours(100_000)  # warm-up: cppyy wraps each C++ method on its first call
    print(f"machine: {platform.processor() or platform.machine()}, python {platform.python_version()}")
    print(f"RSS after ns-3 import + module load: {rss0:.0f} MB")
    ratios = []
    for rep in range(args.reps):
        ours = bench_ours(total, args.ack_interval)
        stock = bench_stock(total)
        stock_fast = bench_stock(total, fast_scheduler=True)
        ours_rate = ours["packet_hops"] / ours["wall_s"]
        stock_rate = stock["packet_hops"] / stock["wall_s"]
        fast_rate = stock_fast["packet_hops"] / stock_fast["wall_s"]
        best = max(stock_rate, fast_rate)
        ratios.append(ours_rate / best)
        print(
            f"[{rep}] ours : {ours['packet_hops']:,} packet-hops in {ours['wall_s']:.3f} s = {ours_rate:,.0f} /s "
            f"(all frames incl. ACKs: {ours['frames_all']:,}; events {ours['events']:,}; "
            f"FCT {ours['fct_s'] * 1e3:.3f} ms)"
        )
        print(
            f"[{rep}] stock: {stock['packet_hops']:,} packet-hops in {stock['wall_s']:.3f} s = {stock_rate:,.0f} /s "
            f"(default scheduler; UDP received {stock['received']:,} of {stock['sent']:,}); "
            f"with {FAST_SCHEDULER}: {fast_rate:,.0f} /s"
        )
        print(f"[{rep}] ratio ours / best stock: {ratios[-1]:.1f}x")
    print(f"median ratio ours / best stock over {args.reps} paired runs: {float(np.median(ratios)):.1f}x")
    for cc in ("none", "dcqcn", "hpcc"):
        r = bench_permutation(cc, args.perm_mbytes)
        print(
            f"perm64 {cc:5s}: {r['done']}/64 done, sim {r['sim_ms']:.3f} ms, wall {r['wall_s']:.2f} s, "
            f"{r['events']:,} events, {r['events_per_s']:,.0f} events/s, peak RSS {r['peak_rss_mb']:.0f} MB"
        )


if __name__ == "__main__":
    main()
