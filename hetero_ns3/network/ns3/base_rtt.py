"""HPCC's network-wide base RTT T (Li et al., SIGCOMM 2019, section 5 "parameters").

The paper sets T to the base propagation RTT of the network, one value for every flow; its ns-3 artifact
(alibaba-edu/High-Precision-Congestion-Control, ``simulation/scratch/third.cc``) computes ``maxRtt``, the
largest over host pairs of (2 x propagation + one packet's serialization per hop) along the routed path, and
with ``GLOBAL_T 1`` (its configs) gives every HPCC flow that T and the matching BDP as initial window.

:func:`network_base_rtt` computes the same maximum with the per-hop cost of our per-flow base RTT
(``RdmaNetwork::ComputeBaseRtt``): 2 x delay + one DATA frame (the source's segment + headers + INT) + one
ACK frame, serialized at the hop's rate, along the path the switches route each GPU pair on (the ECMP
next-hop tables and the switches' hash, :func:`hetero_ns3.network.analytic.routes.route_flows`, the same
walk the flow-level backend and ``Backend.link_load`` use). Each hop is serialized at its sending port's
rate as the packet backend sets it: a GPU with a NIC of its own sends on its PCIe link at min(PCIe, NIC
rate) (:func:`hetero_ns3.network.ns3.pacing.port_rates`), so T matches C++'s per-flow base RTT there too.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from hetero_ns3.network.config import NetworkConfig
from hetero_ns3.topology.graph import NetGraph

#: Source GPUs routed per block (a block routes ``_BLOCK x GPUs`` pairs at once).
_BLOCK = 256


def network_base_rtt(graph: NetGraph, config: NetworkConfig) -> float:
    """Largest base RTT over connected GPU pairs, seconds (0 when no two GPUs are connected).

    The DATA frame of a path is the segment of its first link (the source port's, as in C++), so an NVLink
    segment never inflates a network path.
    """
    from hetero_ns3.network.analytic.config import AnalyticConfig
    from hetero_ns3.network.analytic.routes import graph_next_hop_table, link_arrays, route_flows
    from hetero_ns3.network.ns3.pacing import port_rates

    nic = config.nic
    overhead = nic.header_bytes + (nic.int_header_bytes if config.cc.kind == "hpcc" else 0)
    acfg = AnalyticConfig.like_nic(nic, ecmp_hash="packet")
    links = link_arrays(graph, acfg)
    rate = np.append(port_rates(graph), np.inf)  # per resource (= port), the padding resource last
    table = graph_next_hop_table(graph)
    gpus = np.asarray(graph.gpu_indices(), dtype=np.int64)
    best = 0.0
    for lo in range(0, gpus.size, _BLOCK):
        src = np.repeat(gpus[lo : lo + _BLOCK], gpus.size)
        dst = np.tile(gpus, min(_BLOCK, gpus.size - lo))
        slot = table.slot[dst]
        routed = (src != dst) & (slot >= 0)
        routed[routed] = table.count[slot[routed] * table.n_nodes + src[routed]] > 0  # pairs with a route
        src, dst = src[routed], dst[routed]
        if src.size == 0:
            continue
        key = np.arange(src.size)
        p = route_flows(graph, links, src, dst, key, np.zeros(src.size), acfg, config.routing.ecmp_seed, table)
        res = p.res
        on_path = np.arange(res.shape[1])[None, :] < p.hops[:, None]
        frame = links.payload_bytes[res[:, 0]] + overhead
        hop = 2 * links.delay_s[res] + (frame[:, None] + nic.ack_bytes) * 8.0 / rate[res]
        best = max(best, float(np.where(on_path, hop, 0.0).sum(axis=1).max()))
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
