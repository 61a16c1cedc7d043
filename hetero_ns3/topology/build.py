"""Assemble a cluster graph: intra-node fabrics of every node plus the scale-out network."""

from __future__ import annotations

from hetero_ns3.errors import ScenarioError
from hetero_ns3.topology.fabric import direct_nics, node_fabric, nvls_endpoint
from hetero_ns3.topology.graph import GraphLink, GraphNode, NetGraph, make_graph
from hetero_ns3.topology.networks import Endpoint, fat_tree, leaf_spine, rail_optimized
from hetero_ns3.topology.spec import FATTREE, LEAFSPINE, RAIL, ClusterSpec


def nic_endpoints(cluster: ClusterSpec) -> list[Endpoint]:
    """All NICs, node by node, with rate and rail (rail networks; -1 otherwise).

    A NIC folded into its GPU (``nic_attach = "direct"``, :func:`direct_nics`) is the GPU's own port:
    named after the GPU, at min(NIC rate, PCIe rate), with the two PCIe link delays (GPU - switch -
    NIC) added to the access link.
    """
    out = []
    for node, g in cluster.node_groups():
        folded = direct_nics(g)
        f = g.fabric
        for k in range(g.nics.count):
            rail = cluster.nic_rail(g, k)
            if k in folded:
                rate = min(g.nics.rate_bps, f.pcie_rate_bps)
                out.append(Endpoint(f"n{node}.g{folded[k]}", rate, node, rail, extra_delay_s=2 * f.pcie_delay_s))
            else:
                out.append(Endpoint(f"n{node}.nic{k}", g.nics.rate_bps, node, rail))
    return out


def build_network(cluster: ClusterSpec, endpoints: list[Endpoint]) -> tuple[list[GraphNode], list[GraphLink]]:
    """Network switches and links of ``cluster.network`` over ``endpoints``."""
    net = cluster.network
    if net.kind == RAIL:
        return rail_optimized(endpoints, net, cluster.rails())
    if net.kind == LEAFSPINE:
        return leaf_spine(endpoints, net)
    if net.kind == FATTREE:
        return fat_tree(endpoints, net)
    raise AssertionError(net.kind)  # the loader admits only the kinds above


def build_graph(cluster: ClusterSpec) -> NetGraph:
    """The whole cluster as a NetGraph: GPU hosts first (``n0.g0``, ``n0.g1``, ...), then switches.

    Node order: all GPUs node by node, then each node's fabric switches and NICs, then the network
    switches, then the NVLS endpoints of NVLS-capable nodes (last, so that adding them leaves every
    other node and link index unchanged). Link kinds: ``nvlink``, ``pcie``, ``network``.
    """
    hosts: list[GraphNode] = []
    switches: list[GraphNode] = []
    links: list[GraphLink] = []
    for node, group in cluster.node_groups():
        g, s, lk = node_fabric(node, group)
        hosts += g
        switches += s
        links += lk
    ep_nodes: list[GraphNode] = []
    ep_links: list[GraphLink] = []
    for node, group in cluster.node_groups():
        ep = nvls_endpoint(node, group)
        if ep is not None:
            ep_nodes.append(ep[0])
            ep_links.append(ep[1])
    net_nodes, net_links = build_network(cluster, nic_endpoints(cluster))
    graph = make_graph(hosts + switches + net_nodes + ep_nodes, links + net_links + ep_links, cluster.network.routing)
    check_connected(graph, cluster.name)
    return graph


def check_connected(graph: NetGraph, name: str = "topology") -> None:
    """Raise ScenarioError unless every host reaches every other one over links of non-zero rate."""
    hosts = graph.host_indices()
    if len(hosts) < 2:
        return
    adj = graph.adjacency()
    seen = {hosts[0]}
    stack = [hosts[0]]
    while stack:
        u = stack.pop()
        for v, li in adj[u]:
            if v not in seen and graph.links[li].rate_bps > 0:
                seen.add(v)
                stack.append(v)
    cut = [graph.nodes[h].name for h in hosts if h not in seen]
    if cut:
        raise ScenarioError(
            f"topology {name!r} is disconnected: {len(cut)} of {len(hosts)} GPUs (e.g. {cut[0]!r}) cannot reach "
            f"{graph.nodes[hosts[0]].name!r}; give every node group NICs on the network (groups[].nics)"
        )
