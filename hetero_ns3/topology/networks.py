"""Scale-out network builders: pure functions from NIC endpoints to switches and links.

Each builder takes the endpoints (NICs of a cluster, or plain hosts) in order and a
:class:`NetworkSpec`, and returns the switch nodes and links it adds. Endpoints are attached in
order, so endpoints that should share a switch must be adjacent in the list.

Uplink counts follow the oversubscription ratio of each tier: a switch whose downlinks carry
``D`` bit/s gets ``ceil(D / (ratio * uplink_rate))`` uplinks, unless the tier fixes ``uplinks``
(cabling designed for the full switch, whatever is attached). Uplink u of a switch goes to
upper switch ``u mod S``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from hetero_ns3.errors import field_error
from hetero_ns3.topology.graph import SWITCH, GraphLink, GraphNode
from hetero_ns3.topology.spec import NetworkSpec, TierSpec


@dataclass(frozen=True)
class Endpoint:
    """A network port to attach: a NIC (cluster) or a host (plain topologies)."""

    name: str
    rate_bps: float
    """Line rate of the port, bit/s."""
    node: int = 0
    """Cluster node of the port (rail networks group ports by node)."""
    rail: int = -1
    """Rail switch index within its pod (rail networks)."""
    extra_delay_s: float = 0.0
    """Delay added to the access link's, s: the PCIe hops of a GPU attached directly (``nic_attach``)."""


Built = tuple[list[GraphNode], list[GraphLink]]


def _uplinks(down_bps: float, tier: TierSpec, up_rate: float) -> int:
    if tier.uplinks:
        return tier.uplinks
    return max(1, math.ceil(down_bps / (tier.oversubscription * up_rate) - 1e-9))


def _up_rate(tier: TierSpec, down_rates: list[float]) -> float:
    return tier.uplink_rate_bps or max(down_rates)


def _access(ep: Endpoint, switch: str, net: NetworkSpec, tier: str) -> GraphLink:
    return GraphLink(ep.name, switch, ep.rate_bps, net.access_delay_s + ep.extra_delay_s, kind="network", tier=tier)


def _connect_up(
    lower: list[str], lower_down: list[float], upper: list[str], tier: TierSpec, up_rate: float, label: str
) -> list[GraphLink]:
    """Give each lower switch its uplinks (by its downlink load), spread round-robin over ``upper``."""
    links = []
    for name, down in zip(lower, lower_down, strict=True):
        for u in range(_uplinks(down, tier, up_rate)):
            links.append(GraphLink(name, upper[u % len(upper)], up_rate, tier.uplink_delay_s, tier=label))
    return links


def leaf_spine(endpoints: list[Endpoint], net: NetworkSpec) -> Built:
    """Two-tier Clos: ``ports_per_leaf`` endpoints per leaf ``leaf{i}``, every leaf to the spines.

    Spine count is ``net.spines`` or, when 0, the largest number of uplinks of a leaf.
    """
    per = net.ports_per_leaf
    if per < 1:
        raise field_error("network.ports_per_leaf", per, "must be >= 1")
    leaf_t, spine_t = net.tier("leaf"), net.tier("spine")
    n_leaves = math.ceil(len(endpoints) / per)
    nodes, links = [], []
    down = [0.0] * n_leaves
    rates: list[float] = []
    for i, ep in enumerate(endpoints):
        leaf = i // per
        down[leaf] += ep.rate_bps
        rates.append(ep.rate_bps)
        links.append(_access(ep, f"leaf{leaf}", net, "nic-leaf"))
    up = _up_rate(leaf_t, rates)
    n_spines = net.spines or max(_uplinks(d, leaf_t, up) for d in down)
    leaves = [f"leaf{i}" for i in range(n_leaves)]
    spines = [f"spine{i}" for i in range(n_spines)]
    nodes += [GraphNode(x, SWITCH, role="leaf", buffer_bytes=leaf_t.buffer_bytes) for x in leaves]
    nodes += [GraphNode(x, SWITCH, role="spine", buffer_bytes=spine_t.buffer_bytes) for x in spines]
    links += _connect_up(leaves, down, spines, leaf_t, up, "leaf-spine")
    return nodes, links


def fat_tree(endpoints: list[Endpoint], net: NetworkSpec) -> Built:
    """Three-tier k-ary fat-tree (Al-Fares et al., SIGCOMM 2008) with per-tier oversubscription.

    ``k`` pods, each with k/2 edge and k/2 aggregation switches, every edge to every aggregation
    switch of its pod. An edge switch takes ``round(r_edge * k/2)`` endpoints (r_edge = edge
    oversubscription). Each aggregation switch has ``k/(2 r_agg)`` core uplinks; core switch j
    joins aggregation switch ``j // (k/(2 r_agg))`` of every pod, so there are ``(k/2)^2 / r_agg``
    cores. Only the pods the endpoints need are built (all when the tree is full).
    """
    k = net.k
    if k < 2 or k % 2:
        raise field_error("network.k", k, "must be an even integer >= 2")
    half = k // 2
    edge_t, agg_t, core_t = net.tier("edge"), net.tier("agg"), net.tier("core")
    per_edge = round(edge_t.oversubscription * half)
    agg_up = half / agg_t.oversubscription
    if abs(agg_up - round(agg_up)) > 1e-9 or agg_up < 1:
        raise field_error(
            "network.agg.oversubscription", agg_t.oversubscription, f"must divide k/2 ({half}) to a whole number"
        )
    agg_up = round(agg_up)
    capacity = k * half * per_edge
    if len(endpoints) > capacity:
        raise field_error(
            "network.k", k, f"gives {capacity} ports but the cluster has {len(endpoints)} NICs", "raise k"
        )
    rates = [ep.rate_bps for ep in endpoints]
    up_e = _up_rate(edge_t, rates)
    up_a = agg_t.uplink_rate_bps or up_e
    pods = max(1, math.ceil(len(endpoints) / (half * per_edge)))
    nodes: list[GraphNode] = []
    links: list[GraphLink] = []
    for i, ep in enumerate(endpoints):
        pod, e = divmod(i // per_edge, half)
        links.append(_access(ep, f"edge{pod}.{e}", net, "nic-edge"))
    n_cores = half * agg_up
    for pod in range(pods):
        for e in range(half):
            nodes.append(GraphNode(f"edge{pod}.{e}", SWITCH, role="edge", buffer_bytes=edge_t.buffer_bytes))
        for a in range(half):
            nodes.append(GraphNode(f"agg{pod}.{a}", SWITCH, role="agg", buffer_bytes=agg_t.buffer_bytes))
        for e in range(half):
            for a in range(half):
                links.append(GraphLink(f"edge{pod}.{e}", f"agg{pod}.{a}", up_e, edge_t.uplink_delay_s, tier="edge-agg"))
    nodes += [GraphNode(f"core{j}", SWITCH, role="core", buffer_bytes=core_t.buffer_bytes) for j in range(n_cores)]
    for pod in range(pods):
        for j in range(n_cores):
            links.append(GraphLink(f"agg{pod}.{j // agg_up}", f"core{j}", up_a, agg_t.uplink_delay_s, tier="agg-core"))
    return nodes, links


def rail_optimized(endpoints: list[Endpoint], net: NetworkSpec, rails: int) -> Built:
    """Rail-optimized network: NIC on rail i of every node in a pod goes to rail switch ``rail{pod}.{i}``.

    Pods hold ``net.nodes_per_pod`` consecutive nodes (0: one pod). Every rail switch has uplinks
    by the ``rail`` tier's oversubscription, spread over the spines ``spine{j}`` (``net.spines``,
    or as many as the largest uplink count). Same-rail traffic within a pod stays on its rail switch.
    """
    rail_t, spine_t = net.tier("rail"), net.tier("spine")
    nodes_in = sorted({ep.node for ep in endpoints})
    first = nodes_in[0] if nodes_in else 0
    per_pod = net.nodes_per_pod or (len(nodes_in) or 1)
    names: list[str] = []
    down: dict[str, float] = {}
    links: list[GraphLink] = []
    for ep in endpoints:
        if not 0 <= ep.rail < rails:
            raise field_error("network.rails", rails, f"has no rail {ep.rail} for {ep.name}", "raise network.rails")
        pod = (ep.node - first) // per_pod
        sw = f"rail{pod}.{ep.rail}"
        if sw not in down:
            down[sw] = 0.0
            names.append(sw)
        down[sw] += ep.rate_bps
        links.append(_access(ep, sw, net, "nic-rail"))
    names.sort(key=lambda x: tuple(int(p) for p in x[4:].split(".")))
    up = _up_rate(rail_t, [ep.rate_bps for ep in endpoints])
    loads = [down[x] for x in names]
    n_pods = len({x.split(".")[0] for x in names})
    nodes = [GraphNode(x, SWITCH, role="rail", buffer_bytes=rail_t.buffer_bytes) for x in names]
    if n_pods > 1 or len(names) > 1:
        n_spines = net.spines or max(_uplinks(d, rail_t, up) for d in loads)
        spines = [f"spine{j}" for j in range(n_spines)]
        nodes += [GraphNode(x, SWITCH, role="spine", buffer_bytes=spine_t.buffer_bytes) for x in spines]
        links += _connect_up(names, loads, spines, rail_t, up, "rail-spine")
    return nodes, links
