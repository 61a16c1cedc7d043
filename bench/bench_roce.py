"""Benchmark of the native RoCE module against stock ns-3, measured in the same process.

1. Packet-hops per wall-second for one long flow over a 4-hop chain (host - sw - sw - sw - host,
   100 Gbps, 1 us per link): our RoceNetDevice/RdmaNic path versus stock ns-3
   (PointToPointNetDevice + IPv4 + UDP: UdpClient -> UdpServer, global routing), same path, same
   bytes, ~1000-byte packets (UDP payload 1000 B; our DATA payload 1000 B), paired in each repetition.
   Our runs use the PriorityQueueScheduler (as simulate_flows does); stock runs once with ns-3's default
   scheduler and once with the same one, and the ratio is taken against the faster of the two.
2. A 64-host random permutation on leafspine:8,4,8 (each host sends one flow to another host):
   wall time, events per second and peak RSS, per congestion control.

Run:  .venv/bin/python bench/bench_roce.py [--mbytes 100] [--perm-mbytes 2]
"""

from __future__ import annotations

import argparse
import platform
import resource
import time

import numpy as np
import pandas as pd

from hetero_ns3.netgraph import GraphLink, GraphNode, make_graph
from hetero_ns3.network import ns3env
from hetero_ns3.network.config import CcConfig, NetworkConfig, NicConfig
from hetero_ns3.network.roce import FAST_SCHEDULER, simulate_flows, use_fast_scheduler
from hetero_ns3.topology import resolve_topology

HOPS = 4
RATE = "100Gbps"
PAYLOAD = 1000


def _rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0


def bench_ours(total_bytes: int) -> dict[str, float]:
    nodes = [GraphNode("h0", "host"), GraphNode("h1", "host")] + [GraphNode(f"s{i}", "switch") for i in range(HOPS - 1)]
    chain = ["h0"] + [f"s{i}" for i in range(HOPS - 1)] + ["h1"]
    links = [GraphLink(a, b, 100e9, 1e-6) for a, b in zip(chain, chain[1:], strict=False)]
    graph = make_graph(nodes, links)
    cfg = NetworkConfig(cc=CcConfig(kind="none"), nic=NicConfig(default_segment_bytes=PAYLOAD, segment_bytes={}))
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


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--mbytes", type=float, default=100.0, help="bytes of the long flow, MB (default 100)")
    ap.add_argument("--reps", type=int, default=3, help="paired repetitions of the 4-hop comparison (default 3)")
    ap.add_argument("--perm-mbytes", type=float, default=2.0, help="bytes per permutation flow, MB (default 2)")
    args = ap.parse_args()
    ns3env.import_ns()
    ns3env.load_module()
    rss0 = _rss_mb()
    total = int(args.mbytes * 1e6)
    bench_ours(100_000)  # warm-up: cppyy wraps each C++ method on its first call
    print(f"machine: {platform.processor() or platform.machine()}, python {platform.python_version()}")
    print(f"RSS after ns-3 import + module load: {rss0:.0f} MB")
    ratios = []
    for rep in range(args.reps):
        ours = bench_ours(total)
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
