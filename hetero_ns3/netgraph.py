"""A plain, simulator-independent description of a network: nodes, links, routes.

This is the contract between the topology builders (``hetero_ns3.topology``), the packet-level
backend (``hetero_ns3.network``) and the flow-level backend. It imports nothing from ns-3.

Conventions
-----------
* Nodes are *hosts* (traffic endpoints: GPUs, or plain hosts ``h0``..) or *switches* (anything
  that forwards: Ethernet switches, NVSwitch, PCIe switches, NICs modelled as two-port relays).
  Hosts never forward transit traffic.
* Links are full-duplex point-to-point with one rate (bit/s) and one propagation delay (s) per
  direction. ``kind`` says which fabric a link belongs to (``network``, ``nvlink``, ``pcie``...).
* Node indices are positions in ``NetGraph.nodes``; the packet backend uses them as node ids.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field

from hetero_ns3.errors import ScenarioError

HOST = "host"
SWITCH = "switch"


@dataclass(frozen=True)
class GraphNode:
    """One node of the network graph."""

    name: str
    """Unique, human-readable name (e.g. ``n3.g5`` for GPU 5 of node 3, ``leaf2``)."""
    kind: str
    """``"host"`` (endpoint) or ``"switch"`` (forwards)."""
    role: str = ""
    """Free-form role for summaries and plots: ``gpu``, ``nic``, ``leaf``, ``spine``, ``nvswitch``..."""
    buffer_bytes: int = 0
    """Switch shared buffer in bytes; 0 means the network configuration's default."""
    group: str = ""
    """Node group (for GPUs: the cluster node group name); empty for fabric elements."""
    gpu_type: str = ""
    """GPU type of a GPU host (e.g. ``H100-SXM``); empty otherwise."""


@dataclass(frozen=True)
class GraphLink:
    """A full-duplex point-to-point link between nodes ``a`` and ``b`` (names)."""

    a: str
    b: str
    rate_bps: float
    """Line rate in bit/s, each direction."""
    delay_s: float
    """One-way propagation delay in seconds."""
    kind: str = "network"
    """Fabric of this link: ``network``, ``nvlink``, ``pcie``."""
    tier: str = ""
    """Tier label for summaries: ``host-leaf``, ``leaf-spine``, ``spine-core``..."""


@dataclass(frozen=True)
class NetGraph:
    """Nodes and links of one network. Build with :func:`make_graph` to validate."""

    nodes: tuple[GraphNode, ...]
    links: tuple[GraphLink, ...]
    _index: dict[str, int] = field(default_factory=dict, compare=False, repr=False, hash=False)

    def index(self, name: str) -> int:
        """Node index of ``name``; raises ScenarioError naming the unknown node."""
        try:
            return self._index[name]
        except KeyError:
            raise ScenarioError(f"unknown node {name!r}; valid hosts look like {self.host_names()[:3]}") from None

    def host_names(self) -> list[str]:
        return [n.name for n in self.nodes if n.kind == HOST]

    def host_indices(self) -> list[int]:
        return [i for i, n in enumerate(self.nodes) if n.kind == HOST]

    def adjacency(self) -> list[list[tuple[int, int]]]:
        """Per node, a list of ``(neighbour index, link index)`` in link order."""
        adj: list[list[tuple[int, int]]] = [[] for _ in self.nodes]
        for li, link in enumerate(self.links):
            a, b = self._index[link.a], self._index[link.b]
            adj[a].append((b, li))
            adj[b].append((a, li))
        return adj


def make_graph(
    nodes: list[GraphNode] | tuple[GraphNode, ...], links: list[GraphLink] | tuple[GraphLink, ...]
) -> NetGraph:
    """Validate and build a :class:`NetGraph`.

    Raises ScenarioError for duplicate names, unknown kinds, dangling links, self-loops,
    non-positive rates and negative delays.
    """
    index: dict[str, int] = {}
    for i, n in enumerate(nodes):
        if n.kind not in (HOST, SWITCH):
            raise ScenarioError(f"nodes[{i}].kind ({n.kind!r}) must be 'host' or 'switch'")
        if n.name in index:
            raise ScenarioError(f"nodes[{i}].name ({n.name!r}) is used twice; node names must be unique")
        if n.buffer_bytes < 0:
            raise ScenarioError(f"nodes[{i}].buffer_bytes ({n.buffer_bytes}) must be >= 0")
        index[n.name] = i
    for j, link in enumerate(links):
        for end in (link.a, link.b):
            if end not in index:
                raise ScenarioError(f"links[{j}] names an unknown node {end!r}; define it first")
        if link.a == link.b:
            raise ScenarioError(f"links[{j}] ({link.a!r} - {link.b!r}) is a self-loop")
        if not link.rate_bps > 0:
            raise ScenarioError(f"links[{j}].rate_bps ({link.rate_bps}) must be > 0, e.g. 100e9")
        if link.delay_s < 0:
            raise ScenarioError(f"links[{j}].delay_s ({link.delay_s}) must be >= 0")
    return NetGraph(tuple(nodes), tuple(links), index)


def shortest_path_next_hops(graph: NetGraph, dst: int) -> list[list[int]]:
    """ECMP next hops toward host ``dst``: for every node, the link indices on a shortest path.

    Hop-count shortest paths; hosts other than ``dst`` are never used as transit. The returned
    list has one entry per node; the entry of ``dst`` and of unreachable nodes is empty.
    """
    adj = graph.adjacency()
    n = len(graph.nodes)
    dist = [-1] * n
    dist[dst] = 0
    queue = deque([dst])
    while queue:
        u = queue.popleft()
        # Only switches (and dst itself) relay; a host reached here is a leaf of the BFS.
        if u != dst and graph.nodes[u].kind == HOST:
            continue
        for v, _ in adj[u]:
            if dist[v] < 0:
                dist[v] = dist[u] + 1
                queue.append(v)
    hops: list[list[int]] = [[] for _ in range(n)]
    for u in range(n):
        if u == dst or dist[u] < 0:
            continue
        for v, li in adj[u]:
            if dist[v] == dist[u] - 1 and (v == dst or graph.nodes[v].kind == SWITCH):
                hops[u].append(li)
    return hops


def routing_tables(graph: NetGraph) -> dict[int, list[list[int]]]:
    """ECMP next-hop link sets toward every host: ``tables[dst][node] -> [link index, ...]``."""
    return {d: shortest_path_next_hops(graph, d) for d in graph.host_indices()}
