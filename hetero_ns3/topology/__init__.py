"""Topologies: cluster descriptions (node groups, intra-node fabrics, NICs) and network builders.

Public entry points:

* :func:`resolve_topology` — ``star:N``, ``leafspine:L,S,H``, a preset name or a TOML path -> NetGraph.
* :func:`load_cluster` / :func:`parse_cluster` — a validated :class:`ClusterSpec`.
* :func:`build_graph` — ClusterSpec -> NetGraph (GPUs ``n3.g5``, fabrics, NICs, network).
* :func:`fat_tree`, :func:`leaf_spine_network`, :func:`rail_optimized` — network builders over endpoints.
* :func:`star`, :func:`leaf_spine`, :func:`plain_network` — plain host topologies.
* :func:`bisection_bandwidth`, :func:`ecmp_path_count` — graph measures.
"""

from hetero_ns3.topology.analysis import bisection_bandwidth, ecmp_path_count
from hetero_ns3.topology.build import build_graph
from hetero_ns3.topology.loader import load_cluster, parse_cluster
from hetero_ns3.topology.networks import Endpoint, fat_tree, rail_optimized
from hetero_ns3.topology.networks import leaf_spine as leaf_spine_network
from hetero_ns3.topology.resolve import resolve_topology
from hetero_ns3.topology.simple import leaf_spine, plain_network, star
from hetero_ns3.topology.spec import ClusterSpec, GpuInfo, NetworkSpec, NodeGroup, TierSpec

__all__ = [
    "ClusterSpec",
    "Endpoint",
    "GpuInfo",
    "NetworkSpec",
    "NodeGroup",
    "TierSpec",
    "bisection_bandwidth",
    "build_graph",
    "ecmp_path_count",
    "fat_tree",
    "leaf_spine",
    "leaf_spine_network",
    "load_cluster",
    "parse_cluster",
    "plain_network",
    "rail_optimized",
    "resolve_topology",
    "star",
]
