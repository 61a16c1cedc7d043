"""Intra-node fabrics: GPUs, NVSwitch, PCIe switches, root complex and NICs of one node.

Graph elements of node ``i`` (see docs/topologies.md):

* GPU ``n{i}.g{j}`` (host, role ``gpu``).
* ``nvswitch`` fabric: one NVSwitch ``n{i}.nvsw`` (role ``nvswitch``), one NVLink per GPU at the
  GPU's NVLink bandwidth (the NVSwitch chips of a baseboard act as one non-blocking crossbar).
* ``nvlink_bridge`` fabric: PCIe cards (as ``pcie``) whose GPUs ``2j`` and ``2j+1`` are joined by an
  NVLink bridge ``n{i}.nvb{j}`` (role ``nvlink-bridge``), one NVLink per GPU at the bridge rate: a
  two-port NVSwitch, so the pair talks over NVLink and other GPUs over PCIe.
* PCIe switches ``n{i}.pcie{s}`` (role ``pcie-switch``): one PCIe link from each GPU and NIC
  behind it. In ``pcie`` nodes with several PCIe switches, each switch has an uplink to the root
  complex ``n{i}.cpu`` (role ``pcie-root``), the only way between GPUs of different switches.
* NIC ``n{i}.nic{k}`` (role ``nic``): a two-port relay, PCIe on one side, the network on the other.
* NVLS endpoint ``n{i}.nvls`` (role ``nvls``, :func:`nvls_endpoint`), nodes whose fabric has
  ``nvls``: a host on an internal link of the NVSwitch that stands for the switch's reduction and
  multicast engine (NVLink SHARP), so that flows can end and start at the switch. Its link carries
  ``gpus_per_node`` x the NVLink rate with no delay, so it never limits: the GPU ports do.

Every element of node ``i`` has zone ``n{i}``; each NIC ``serves`` its affinity GPUs, so routing
keeps intra-node traffic inside the node and sends inter-node traffic through the GPU's own NIC
(see :mod:`hetero_ns3.topology.graph`). Routing costs: NVLink links cost 0.5, everything else 1, so
GPU-to-GPU traffic inside a node takes NVLink when it exists, even where two GPUs also share a
PCIe switch.
"""

from __future__ import annotations

from hetero_ns3.topology.graph import HOST, NVLS_ROLE, SWITCH, GraphLink, GraphNode
from hetero_ns3.topology.spec import NVLINK_BRIDGE, NVSWITCH, NodeGroup

NVLINK_COST = 0.5
"""Routing cost of an NVLink link (others cost 1): prefer NVLink inside a node."""


def node_fabric(node: int, group: NodeGroup) -> tuple[list[GraphNode], list[GraphNode], list[GraphLink]]:
    """GPU hosts, fabric switches (incl. NICs) and links of node ``node`` of ``group``."""
    f = group.fabric
    pre = f"n{node}"
    gpus = [
        GraphNode(f"{pre}.g{j}", HOST, role="gpu", group=group.name, gpu_type=group.gpu_type, zone=pre)
        for j in range(group.gpus_per_node)
    ]
    switches: list[GraphNode] = []
    links: list[GraphLink] = []
    if f.kind == NVSWITCH:
        nvsw = f"{pre}.nvsw"
        switches.append(GraphNode(nvsw, SWITCH, role="nvswitch", group=group.name, zone=pre))
        for g in gpus:
            links.append(
                GraphLink(
                    g.name,
                    nvsw,
                    f.nvlink_rate_bps,
                    f.nvlink_delay_s,
                    kind="nvlink",
                    tier="gpu-nvswitch",
                    cost=NVLINK_COST,
                    mtu_bytes=f.nvlink_segment_bytes,
                )
            )
    if f.kind == NVLINK_BRIDGE:
        for j in range(group.gpus_per_node // 2):
            bridge = f"{pre}.nvb{j}"
            switches.append(GraphNode(bridge, SWITCH, role="nvlink-bridge", group=group.name, zone=pre))
            for g in gpus[2 * j : 2 * j + 2]:
                links.append(
                    GraphLink(
                        g.name,
                        bridge,
                        f.nvlink_rate_bps,
                        f.nvlink_delay_s,
                        kind="nvlink",
                        tier="gpu-bridge",
                        cost=NVLINK_COST,
                        mtu_bytes=f.nvlink_segment_bytes,
                    )
                )
    root = f"{pre}.cpu"
    use_root = f.kind != NVSWITCH and len(f.pcie_switches) > 1
    if use_root:
        switches.append(GraphNode(root, SWITCH, role="pcie-root", group=group.name, zone=pre))
    for s, sw in enumerate(f.pcie_switches):
        name = f"{pre}.pcie{s}"
        switches.append(GraphNode(name, SWITCH, role="pcie-switch", group=group.name, zone=pre))
        for j in sw.gpus:
            links.append(GraphLink(f"{pre}.g{j}", name, f.pcie_rate_bps, f.pcie_delay_s, kind="pcie", tier="gpu-pcie"))
        for k in sw.nics:
            links.append(
                GraphLink(f"{pre}.nic{k}", name, f.pcie_rate_bps, f.pcie_delay_s, kind="pcie", tier="nic-pcie")
            )
        if use_root:
            links.append(GraphLink(name, root, f.pcie_rate_bps, f.pcie_delay_s, kind="pcie", tier="pcie-root"))
    for k, gpus_served in enumerate(group.nics.affinity):
        serves = tuple(f"{pre}.g{j}" for j in gpus_served)
        switches.append(GraphNode(f"{pre}.nic{k}", SWITCH, role="nic", group=group.name, zone=pre, serves=serves))
    return gpus, switches, links


def nvls_endpoint(node: int, group: NodeGroup) -> tuple[GraphNode, GraphLink] | None:
    """The NVLS endpoint of node ``node`` and its link to the NVSwitch; None without NVLS.

    NVLink SHARP reduces (multimem load-reduce) and replicates (multimem store) inside the switch.
    The endpoint is where the planner's flows to and from the switch end and start; its internal
    link is as fast as all GPU ports together, so a multicast modelled as one flow per GPU crosses
    each GPU's ingress port once, as the switch's replication does.
    """
    f = group.fabric
    if f.kind != NVSWITCH or not f.nvls:
        return None
    pre = f"n{node}"
    ep = GraphNode(f"{pre}.nvls", HOST, role=NVLS_ROLE, group=group.name, zone=pre)
    link = GraphLink(
        f"{pre}.nvsw",
        ep.name,
        f.nvlink_rate_bps * group.gpus_per_node,
        0.0,
        kind="nvlink",
        tier="nvswitch-nvls",
        cost=NVLINK_COST,
        mtu_bytes=f.nvlink_segment_bytes,
    )
    return ep, link
