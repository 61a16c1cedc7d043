"""Where the packet backend paces a GPU's RDMA endpoint at its NIC's rate instead of its PCIe rate.

The packet backend puts a GPU's RDMA endpoint (queue pairs, congestion control) on the GPU host, whose
only port toward the network is its PCIe link. A real NIC's queue-pair scheduler serves all its queue
pairs at the NIC's line rate and fetches their data over PCIe by DMA; the GPU does not push frames at the
PCIe rate into a queue in front of the NIC port. So where a GPU has a NIC of its own, the GPU side of
its PCIe link serializes at min(PCIe rate, NIC rate) (:func:`nic_paced_ports`): the endpoint's aggregate
send rate is the NIC's, each queue pair's line rate (DCQCN's target rate Rt, HPCC's and TIMELY's
ceiling, the pacing) is the NIC's, and no queue builds in front of the NIC port for this GPU's traffic.

"A NIC of its own" is the segment that ``nic_attach = "direct"`` folds (``topology.fabric
.private_pcie_switches``), read off the graph: a PCIe switch with exactly two links, one to the GPU and
one to a NIC that serves only this GPU. Such a switch carries nothing but this GPU's network traffic, so
capping the GPU's side changes no other traffic. The reverse direction (NIC -> GPU) keeps the PCIe rate.
Where several GPUs share a NIC, or GPUs talk over the PCIe switch (a root complex), nothing is capped: the
GPUs keep their PCIe rate and the NIC port's queue shares the NIC among them, as before (a NIC-wide
scheduler across several GPUs' queue pairs is not modelled). The flow-level backend needs no such step:
in its max-min sharing the NIC link already bounds the GPU's traffic.
"""

from __future__ import annotations

import numpy as np

from hetero_ns3.topology.graph import HOST, NetGraph


def nic_paced_ports(graph: NetGraph) -> tuple[np.ndarray, np.ndarray]:
    """``(ports, rates)``: the GPU-side ports to cap and their rate, min(PCIe rate, NIC rate), bit/s.

    Port ids follow the backend's convention (link ``l``: port ``2l`` at end ``a``, ``2l+1`` at end
    ``b``). Only ports whose cap is below their link's rate are listed. The NIC rate is the sum of the
    NIC's links other than its PCIe link (one network link in every builder).
    """
    adj = graph.adjacency()
    nodes = graph.nodes
    ports: list[int] = []
    rates: list[float] = []
    for h, node in enumerate(nodes):
        if node.kind != HOST:
            continue
        for sw, li in adj[h]:
            link = graph.links[li]
            if link.kind != "pcie" or nodes[sw].kind == HOST or len(adj[sw]) != 2:
                continue
            nic, nic_link = next((v, lj) for v, lj in adj[sw] if lj != li)
            if nodes[nic].serves != (node.name,):
                continue
            nic_rate = sum(graph.links[lk].rate_bps for _, lk in adj[nic] if lk != nic_link)
            if 0 < nic_rate < link.rate_bps:
                ports.append(2 * li if link.a == node.name else 2 * li + 1)
                rates.append(nic_rate)
    return np.asarray(ports, dtype=np.uint32), np.asarray(rates, dtype=np.float64)


def port_rates(graph: NetGraph) -> np.ndarray:
    """Send rate of every port (``2 x links``), bit/s: the link's rate, or its cap from :func:`nic_paced_ports`."""
    rate = np.repeat(np.asarray([lk.rate_bps for lk in graph.links], dtype=np.float64), 2)
    ports, caps = nic_paced_ports(graph)
    rate[ports.astype(np.int64)] = caps
    return rate
