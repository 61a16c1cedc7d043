"""Intra-node fabrics: GPUs, NVSwitch, PCIe switches, root complex and NICs of one node.

Graph elements of node ``i`` (see docs/topologies.md):

* GPU ``n{i}.g{j}`` (host, role ``gpu``).
* ``nvswitch`` fabric: one NVSwitch ``n{i}.nvsw`` (role ``nvswitch``), one NVLink per GPU at the
  GPU's NVLink bandwidth (the NVSwitch chips of a baseboard act as one non-blocking crossbar).
* ``nvlink_bridge`` fabric: PCIe cards (as ``pcie``) whose GPUs ``2j`` and ``2j+1`` are joined by an
  NVLink bridge ``n{i}.nvb{j}`` (role ``nvlink-bridge``), one NVLink per GPU at the bridge rate: a
  two-port NVSwitch, so the pair talks over NVLink and other GPUs over PCIe.
* ``mesh`` fabric: a direct scale-up link between every pair of GPUs at the per-link rate (AMD
  Infinity Fabric / xGMI on MI300X: 7 links per GPU in an 8-GPU node), kind ``nvlink`` (the scale-up
  link kind of routing and of the collective tuning), tier ``gpu-gpu``. GPUs never use PCIe to talk
  to each other, so, as for ``nvswitch``, no root complex is built.
* PCIe switches ``n{i}.pcie{s}`` (role ``pcie-switch``): one PCIe link from each GPU and NIC
  behind it. In ``pcie`` nodes with several PCIe switches, each switch has an uplink to the root
  complex ``n{i}.cpu`` (role ``pcie-root``), the only way between GPUs of different switches.
* NIC ``n{i}.nic{k}`` (role ``nic``): a two-port relay, PCIe on one side, the network on the other.
* ``nic_attach = "direct"`` (:func:`direct_nics`): a PCIe switch that holds exactly one GPU and one
  NIC, in a node without a root complex, is not built, nor is its NIC: the GPU itself is the network
  port (it ``serves`` itself) and its access link (built by the network, ``topology/build.py``) runs
  at min(NIC rate, PCIe rate) with both PCIe link delays added. Other PCIe switches keep the detail.
  ``nic_attach = "auto"`` (the default) is resolved per backend by :func:`resolve_nic_attach`:
  ``direct`` where it applies on the packet level, ``pcie`` on the flow level; unresolved it builds as
  ``pcie``.
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

import dataclasses

from hetero_ns3.errors import field_error
from hetero_ns3.topology.graph import HOST, NVLS_ROLE, SWITCH, GraphLink, GraphNode
from hetero_ns3.topology.spec import (
    MESH,
    NIC_ATTACH_AUTO,
    NIC_ATTACH_DIRECT,
    NIC_ATTACH_KINDS,
    NIC_ATTACH_PCIE,
    NVLINK_BRIDGE,
    NVSWITCH,
    SCALE_UP_KINDS,
    ClusterSpec,
    FabricSpec,
    NodeGroup,
)

NVLINK_COST = 0.5
"""Routing cost of an NVLink link (others cost 1): prefer NVLink inside a node."""


PCIE_ROOT_NOTE = (
    "GPUs of different PCIe switches are simulated P2P through the root complex; NCCL's default copies through "
    "host memory there (SHM, slower, not modelled) unless NCCL_P2P_LEVEL=SYS (docs/collectives.md, 'PCIe links')"
)
"""What the CLI says wherever :func:`gpus_across_pcie_switches` holds (collective header, topo show, run log)."""


def gpus_across_pcie_switches(group: NodeGroup) -> bool:
    """Whether the group's GPUs talk over PCIe and sit behind more than one PCIe switch of a node: pairs that the
    simulator moves P2P through the root complex, where NCCL's default copies through host memory (SHM, not
    modelled; docs/collectives.md "PCIe links")."""
    f = group.fabric
    return f.kind not in SCALE_UP_KINDS and sum(1 for sw in f.pcie_switches if sw.gpus) > 1


def private_pcie_switches(group: NodeGroup) -> dict[int, tuple[int, int]]:
    """PCIe switches that only join one GPU to one NIC: ``{switch index: (GPU, NIC)}`` (local indices).

    A switch qualifies when it holds exactly one GPU and one NIC that serves that GPU, and no other
    traffic can cross it: the node has no root complex (an ``nvswitch`` or ``mesh`` node, or a ``pcie`` node with a
    single PCIe switch), so GPU-to-GPU traffic never uses it.
    """
    f = group.fabric
    if f.kind not in SCALE_UP_KINDS and len(f.pcie_switches) > 1:
        return {}
    out = {}
    for s, sw in enumerate(f.pcie_switches):
        if len(sw.gpus) == 1 and len(sw.nics) == 1 and group.nics.affinity[sw.nics[0]] == sw.gpus:
            out[s] = (sw.gpus[0], sw.nics[0])
    return out


def direct_nics(group: NodeGroup) -> dict[int, int]:
    """``{NIC: GPU}`` (local indices) of the NICs that ``nic_attach = "direct"`` folds into their GPU.

    Empty unless the group's fabric asks for ``direct``; then the NICs of
    :func:`private_pcie_switches`.
    """
    if group.fabric.nic_attach != NIC_ATTACH_DIRECT:
        return {}
    return {nic: gpu for gpu, nic in private_pcie_switches(group).values()}


def check_nic_attach(group: NodeGroup, path: str) -> None:
    """Raise ScenarioError at ``path`` if the group asks for ``direct`` and has no switch to fold."""
    if group.fabric.nic_attach == NIC_ATTACH_DIRECT and not private_pcie_switches(group):
        raise field_error(
            path,
            NIC_ATTACH_DIRECT,
            f"needs a PCIe switch with exactly one GPU and one NIC and no root complex (group {group.name!r} "
            "has none: its NICs are shared by several GPUs, or GPUs talk over PCIe)",
            "use 'pcie' for this group",
        )


def with_nic_attach(cluster: ClusterSpec, value: str, path: str) -> ClusterSpec:
    """``cluster`` with ``fabric.nic_attach = value`` in every group where it can apply.

    ``pcie`` and ``auto`` apply everywhere; ``direct`` only to the groups with a private PCIe switch
    (:func:`private_pcie_switches`), the others keep their setting. Raises ScenarioError at ``path`` for an
    unknown value, or for ``direct`` when no group of the cluster can take it.
    """
    if value not in NIC_ATTACH_KINDS:
        raise field_error(path, value, "is not a valid choice", f"use one of {list(NIC_ATTACH_KINDS)}")
    groups = []
    hit = False
    for g in cluster.groups:
        ok = value != NIC_ATTACH_DIRECT or bool(private_pcie_switches(g))
        hit = hit or ok
        groups.append(dataclasses.replace(g, fabric=dataclasses.replace(g.fabric, nic_attach=value)) if ok else g)
    if not hit:
        raise field_error(
            path,
            value,
            f"applies to no group of {cluster.name!r}: none has a PCIe switch with exactly one GPU and one NIC",
            "use 'pcie' (or leave it out)",
        )
    return dataclasses.replace(cluster, groups=tuple(groups))


def resolve_nic_attach(cluster: ClusterSpec, lean: bool) -> ClusterSpec:
    """``cluster`` with every ``auto`` group made ``direct`` or ``pcie``; explicit settings unchanged.

    ``lean`` (the packet level, ``Backend.nic_attach_auto == "direct"``): ``direct`` where the group has a
    private PCIe switch (:func:`private_pcie_switches`), ``pcie`` elsewhere, never an error. Otherwise
    (the flow level, whose max-min sharing is the same either way up to the PCIe links' latency) ``pcie``,
    which keeps its graph, and so its results, as they were before ``auto`` existed.
    """
    groups = []
    for g in cluster.groups:
        if g.fabric.nic_attach == NIC_ATTACH_AUTO:
            value = NIC_ATTACH_DIRECT if lean and private_pcie_switches(g) else NIC_ATTACH_PCIE
            g = dataclasses.replace(g, fabric=dataclasses.replace(g.fabric, nic_attach=value))
        groups.append(g)
    return dataclasses.replace(cluster, groups=tuple(groups))


def _scale_up_link(a: str, b: str, f: FabricSpec, tier: str) -> GraphLink:
    """One NVLink-kind link of the node's scale-up fabric (GPU to NVSwitch, to bridge, or to GPU)."""
    return GraphLink(
        a,
        b,
        f.nvlink_rate_bps,
        f.nvlink_delay_s,
        kind="nvlink",
        tier=tier,
        cost=NVLINK_COST,
        mtu_bytes=f.nvlink_segment_bytes,
    )


def node_fabric(node: int, group: NodeGroup) -> tuple[list[GraphNode], list[GraphNode], list[GraphLink]]:
    """GPU hosts, fabric switches (incl. NICs) and links of node ``node`` of ``group``."""
    f = group.fabric
    pre = f"n{node}"
    folded = direct_nics(group)
    own_port = set(folded.values())
    gpus = [
        GraphNode(
            f"{pre}.g{j}",
            HOST,
            role="gpu",
            group=group.name,
            gpu_type=group.gpu_type,
            zone=pre,
            serves=(f"{pre}.g{j}",) if j in own_port else (),
        )
        for j in range(group.gpus_per_node)
    ]
    switches: list[GraphNode] = []
    links: list[GraphLink] = []
    if f.kind == NVSWITCH:
        nvsw = f"{pre}.nvsw"
        switches.append(GraphNode(nvsw, SWITCH, role="nvswitch", group=group.name, zone=pre))
        links.extend(_scale_up_link(g.name, nvsw, f, "gpu-nvswitch") for g in gpus)
    if f.kind == NVLINK_BRIDGE:
        for j in range(group.gpus_per_node // 2):
            bridge = f"{pre}.nvb{j}"
            switches.append(GraphNode(bridge, SWITCH, role="nvlink-bridge", group=group.name, zone=pre))
            links.extend(_scale_up_link(g.name, bridge, f, "gpu-bridge") for g in gpus[2 * j : 2 * j + 2])
    if f.kind == MESH:
        links.extend(_scale_up_link(a.name, b.name, f, "gpu-gpu") for i, a in enumerate(gpus) for b in gpus[i + 1 :])
    root = f"{pre}.cpu"
    use_root = f.kind not in SCALE_UP_KINDS and len(f.pcie_switches) > 1
    if use_root:
        switches.append(GraphNode(root, SWITCH, role="pcie-root", group=group.name, zone=pre))
    for s, sw in enumerate(f.pcie_switches):
        if sw.nics and sw.nics[0] in folded:
            continue  # direct attach: neither the PCIe switch nor the NIC is a simulated hop
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
        if k in folded:
            continue
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
