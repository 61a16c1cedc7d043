"""Plain host topologies written inline: ``star:N`` and ``leafspine:L,S,H``.

These have hosts ``h0``.. (no GPUs, no intra-node fabric) and are meant for network studies and
tests of the packet backend. Cluster presets (``topologies/*.toml``) go through
:func:`hetero_ns3.topology.build.build_graph` instead.
"""

from __future__ import annotations

from hetero_ns3.errors import ScenarioError
from hetero_ns3.topology.graph import HOST, SWITCH, GraphLink, GraphNode, NetGraph, make_graph
from hetero_ns3.topology.spec import NetworkSpec

#: Largest host count / link count of an inline topology (a typo such as star:10000000 would take minutes).
MAX_INLINE_HOSTS = 65_536
MAX_INLINE_LINKS = 1_000_000


def star(n_hosts: int, link_rate_bps: float = 100e9, link_delay_s: float = 1e-6) -> NetGraph:
    """``n_hosts`` hosts ``h0``.. on one switch ``sw0``; every link has the same rate (bit/s) and delay (s)."""
    if n_hosts < 1:
        raise ScenarioError(f"star hosts ({n_hosts}) must be >= 1, e.g. 'star:8'")
    nodes = [GraphNode(f"h{i}", HOST, role="host") for i in range(n_hosts)]
    nodes.append(GraphNode("sw0", SWITCH, role="leaf"))
    links = [GraphLink(f"h{i}", "sw0", link_rate_bps, link_delay_s, tier="host-leaf") for i in range(n_hosts)]
    return make_graph(nodes, links)


def leaf_spine(
    leaves: int, spines: int, hosts_per_leaf: int, link_rate_bps: float = 100e9, link_delay_s: float = 1e-6
) -> NetGraph:
    """Two-tier Clos: ``leaves`` leaves ``leaf0``.., ``spines`` spines ``spine0``.., every leaf to every spine.

    Hosts ``h0``.. are numbered leaf by leaf (``h0``..``h{H-1}`` on ``leaf0``). All links share one rate
    (bit/s) and delay (s), so the leaf oversubscription is ``hosts_per_leaf / spines``.
    """
    for name, v in (("leaves", leaves), ("spines", spines), ("hosts_per_leaf", hosts_per_leaf)):
        if v < 1:
            raise ScenarioError(f"leafspine {name} ({v}) must be >= 1, e.g. 'leafspine:4,2,8'")
    nodes: list[GraphNode] = []
    links: list[GraphLink] = []
    for leaf in range(leaves):
        for j in range(hosts_per_leaf):
            h = f"h{leaf * hosts_per_leaf + j}"
            nodes.append(GraphNode(h, HOST, role="host"))
            links.append(GraphLink(h, f"leaf{leaf}", link_rate_bps, link_delay_s, tier="host-leaf"))
    nodes += [GraphNode(f"leaf{i}", SWITCH, role="leaf") for i in range(leaves)]
    nodes += [GraphNode(f"spine{i}", SWITCH, role="spine") for i in range(spines)]
    for leaf in range(leaves):
        for s in range(spines):
            links.append(GraphLink(f"leaf{leaf}", f"spine{s}", link_rate_bps, link_delay_s, tier="leaf-spine"))
    return make_graph(nodes, links)


def parse_inline(spec: str, link_rate_bps: float, link_delay_s: float) -> NetGraph | None:
    """Build ``star:N`` / ``leafspine:L,S,H``; None when ``spec`` is not of that form."""
    kind, sep, args = spec.partition(":")
    if not sep or kind not in ("star", "leafspine"):
        return None
    try:
        nums = [int(x) for x in args.split(",")]
    except ValueError:
        raise ScenarioError(
            f"topology ({spec!r}) has non-integer arguments; write 'star:8' or 'leafspine:4,2,8'"
        ) from None
    if kind == "star" and len(nums) == 1 and nums[0] > MAX_INLINE_HOSTS:
        raise ScenarioError(f"topology ({spec!r}) has more than {MAX_INLINE_HOSTS} hosts; use fewer")
    if kind == "leafspine" and len(nums) == 3:
        hosts, links = nums[0] * nums[2], nums[0] * (nums[1] + nums[2])
        if hosts > MAX_INLINE_HOSTS or links > MAX_INLINE_LINKS:
            raise ScenarioError(
                f"topology ({spec!r}) has {hosts} hosts and {links} links, over the inline limit "
                f"({MAX_INLINE_HOSTS} hosts, {MAX_INLINE_LINKS} links); use fewer"
            )
    if kind == "star":
        if len(nums) != 1:
            raise ScenarioError(f"topology ({spec!r}) takes one number: 'star:N'")
        return star(nums[0], link_rate_bps, link_delay_s)
    if len(nums) != 3:
        raise ScenarioError(f"topology ({spec!r}) takes three numbers: 'leafspine:LEAVES,SPINES,HOSTS_PER_LEAF'")
    return leaf_spine(nums[0], nums[1], nums[2], link_rate_bps, link_delay_s)


def plain_network(n_hosts: int, net: NetworkSpec, link_rate_bps: float = 100e9, rails: int = 1) -> NetGraph:
    """Hosts ``h0``.. with one NIC each at ``link_rate_bps`` on the network ``net`` (any kind).

    For ``rail`` networks host i is node i on rail 0 unless ``rails`` > 1, in which case hosts are
    grouped ``rails`` per node, host i on rail ``i % rails``. Used for studies of the network alone.
    """
    from hetero_ns3.topology.networks import Endpoint, fat_tree, leaf_spine, rail_optimized

    if n_hosts < 1:
        raise ScenarioError(f"n_hosts ({n_hosts}) must be >= 1")
    eps = [Endpoint(f"h{i}", link_rate_bps, node=i // rails, rail=i % rails) for i in range(n_hosts)]
    hosts = [GraphNode(e.name, HOST, role="host") for e in eps]
    if net.kind == "leafspine":
        nodes, links = leaf_spine(eps, net)
    elif net.kind == "fattree":
        nodes, links = fat_tree(eps, net)
    elif net.kind == "rail":
        nodes, links = rail_optimized(eps, net, rails)
    else:
        raise ScenarioError(f"network.kind ({net.kind!r}) must be one of ['rail', 'leafspine', 'fattree']")
    return make_graph(hosts + nodes, links, net.routing)
