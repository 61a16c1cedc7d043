"""Small synthetic clusters for the planner's tests and validation (the real presets live in topologies/).

:func:`rail_cluster` builds ``nodes`` nodes of ``gpus_per_node`` GPUs named ``n<node>.g<i>``: every
GPU has an NVLink link to its node's NVSwitch (or, with ``nvlink_bps=0``, a PCIe link to a shared
PCIe switch) and a PCIe link to its own NIC; NIC ``i`` of every node is cabled to rail switch
``rail<i>``, and every rail switch to every spine (non-blocking by default). ``rates`` can differ
per node to build heterogeneous clusters.
"""

from __future__ import annotations

from collections.abc import Sequence

from hetero_ns3.topology.graph import HOST, SWITCH, GraphLink, GraphNode, NetGraph, make_graph


def rail_cluster(
    nodes: int,
    gpus_per_node: int,
    nvlink_bps: float | Sequence[float] = 3.6e12,
    nic_bps: float | Sequence[float] = 400e9,
    pcie_bps: float = 512e9,
    spines: int = 2,
    gpu_type: str | Sequence[str] = "H100-SXM",
    delay_s: float = 1e-6,
    nvlink_delay_s: float = 2.5e-7,
) -> NetGraph:
    """A rail-optimized cluster graph; per-node sequences give heterogeneous nodes (bit/s, s)."""

    def per_node(v, i):
        return v[i] if isinstance(v, list | tuple) else v

    ns: list[GraphNode] = []
    ls: list[GraphLink] = []
    for x in range(nodes):
        nvl = per_node(nvlink_bps, x)
        nic = per_node(nic_bps, x)
        gt = per_node(gpu_type, x)
        hub = f"n{x}.nvsw" if nvl > 0 else f"n{x}.pcisw"
        ns.append(GraphNode(hub, SWITCH, role="nvswitch" if nvl > 0 else "pcie"))
        for i in range(gpus_per_node):
            g = f"n{x}.g{i}"
            ns.append(GraphNode(g, HOST, role="gpu", gpu_type=gt, group=f"g{x}"))
            ns.append(GraphNode(f"n{x}.nic{i}", SWITCH, role="nic"))
            if nvl > 0:
                ls.append(GraphLink(g, hub, nvl, nvlink_delay_s, kind="nvlink"))
            else:
                ls.append(GraphLink(g, hub, pcie_bps, delay_s / 2, kind="pcie"))
            ls.append(GraphLink(g, f"n{x}.nic{i}", pcie_bps, delay_s / 4, kind="pcie"))
            ls.append(GraphLink(f"n{x}.nic{i}", f"rail{i}", nic, delay_s, kind="network", tier="host-leaf"))
    for i in range(gpus_per_node):
        ns.append(GraphNode(f"rail{i}", SWITCH, role="leaf"))
        for s in range(spines):
            up = max(per_node(nic_bps, x) for x in range(nodes)) * nodes / spines
            ls.append(GraphLink(f"rail{i}", f"spine{s}", up, delay_s, kind="network", tier="leaf-spine"))
    ns += [GraphNode(f"spine{s}", SWITCH, role="spine") for s in range(spines)]
    return make_graph(ns, ls)
