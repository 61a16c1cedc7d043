"""HPCC's network-wide base RTT T (Li et al., SIGCOMM 2019, section 5 "parameters").

The paper sets T to the base propagation RTT of the network, one value for every flow; its ns-3 artifact
(alibaba-edu/High-Precision-Congestion-Control, ``simulation/scratch/third.cc``) computes ``maxRtt``, the
largest over host pairs of (2 x propagation + one packet's serialization per hop) along the routed path, and
with ``GLOBAL_T 1`` (its configs) gives every HPCC flow that T and the matching BDP as initial window.

:func:`network_base_rtt` computes the same maximum with the per-hop cost of our per-flow base RTT
(``RdmaNetwork::ComputeBaseRtt``): 2 x delay + one DATA frame (the source's segment + headers + INT) + one
ACK frame, serialized at the hop's rate, along the least-routing-cost path (the ECMP routes; among equal-cost
paths the slowest). Hosts are endpoints only, never transit. On a topology where every path is symmetric
(one switch tier, equal links) it equals every flow's own base RTT.
"""

from __future__ import annotations

import dataclasses
import heapq

from hetero_ns3.network.config import NetworkConfig
from hetero_ns3.topology.graph import HOST, NetGraph


def _adjacency(graph: NetGraph, config: NetworkConfig) -> list[list[tuple[int, float, float, float, int]]]:
    """Per node: (neighbour, routing cost, one-way delay s, rate bit/s, segment bytes) of every link."""
    idx = {nd.name: i for i, nd in enumerate(graph.nodes)}
    adj: list[list[tuple[int, float, float, float, int]]] = [[] for _ in graph.nodes]
    for lk in graph.links:
        a, b = idx[lk.a], idx[lk.b]
        seg = lk.mtu_bytes or config.nic.segment_for(lk.kind)
        adj[a].append((b, lk.cost, lk.delay_s, lk.rate_bps, seg))
        adj[b].append((a, lk.cost, lk.delay_s, lk.rate_bps, seg))
    return adj


def network_base_rtt(graph: NetGraph, config: NetworkConfig) -> float:
    """Largest base RTT over host pairs, seconds (0 when no two hosts are connected).

    The DATA frame of a path is the segment of its first link (the source port's, as in C++), so an NVLink
    segment never inflates a network path. Sources with the same attachment (neighbours and link parameters)
    are equivalent: one Dijkstra runs per attachment class, not per host.
    """
    nic = config.nic
    overhead = nic.header_bytes + (nic.int_header_bytes if config.cc.kind == "hpcc" else 0)
    adj = _adjacency(graph, config)
    is_host = [nd.kind == HOST for nd in graph.nodes]
    classes: dict[tuple, int] = {}
    for i in range(len(graph.nodes)):
        if is_host[i] and adj[i]:
            classes.setdefault(tuple(sorted(adj[i])), i)
    best = 0.0
    for src in classes.values():
        # Dijkstra on (routing cost, -rtt): least cost first, then the slowest of the equal-cost paths; the
        # entry carries the path's DATA frame bytes (0 at the source: set by the first link taken).
        done: set[int] = set()
        heap: list[tuple[float, float, int, int]] = [(0.0, -0.0, src, 0)]
        while heap:
            cost, neg_rtt, u, frame = heapq.heappop(heap)
            if u in done:
                continue
            done.add(u)
            if is_host[u] and u != src:
                best = max(best, -neg_rtt)
                continue  # hosts are endpoints, not transit
            for v, c, delay, rate, seg in adj[u]:
                if v not in done:
                    f = frame or seg + overhead
                    hop = 2 * delay + (f + nic.ack_bytes) * 8.0 / rate
                    heapq.heappush(heap, (cost + c, neg_rtt - hop, v, f))
    return best


def resolve_hpcc_base_rtt(config: NetworkConfig, graph: NetGraph) -> NetworkConfig:
    """``config`` with ``cc.hpcc.base_rtt = "global"`` replaced by :func:`network_base_rtt` seconds.

    Unchanged when the kind is not HPCC or T is per flow or explicit.
    """
    if config.cc.kind != "hpcc" or config.cc.hpcc_params()["base_rtt"] != "global":
        return config
    t = network_base_rtt(graph, config)
    # no connected host pair: no HPCC flow will start; per-flow T then
    hpcc = dataclasses.replace(config.cc.hpcc, base_rtt=t if t > 0 else "per_flow")
    return dataclasses.replace(config, cc=dataclasses.replace(config.cc, hpcc=hpcc))
