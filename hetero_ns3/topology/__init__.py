"""Topologies: cluster descriptions (node groups, intra-node fabrics, NICs) and network builders.

Public entry points:

* :func:`resolve_topology` — ``star:N``, ``leafspine:L,S,H``, a preset name or a TOML path -> NetGraph.
* :func:`star`, :func:`leaf_spine` — plain host topologies.
"""

from hetero_ns3.topology.resolve import resolve_topology
from hetero_ns3.topology.simple import leaf_spine, star

__all__ = ["leaf_spine", "resolve_topology", "star"]
