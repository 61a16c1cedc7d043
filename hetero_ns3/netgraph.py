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
* Routing is shortest path by the links' ``cost`` (1 by default, i.e. hop count) with every
  equal-cost next hop kept (ECMP).
* Zones (cluster graphs): every element of a server carries the server's ``zone`` (``n3``);
  network switches and plain hosts have zone ``""``. NICs are *gateways*: ``serves`` names the
  hosts whose traffic they carry. Routes obey what a server does: traffic between two hosts of one
  zone stays inside it; traffic between zones leaves through a gateway serving the source, enters
  through a gateway serving the destination and never crosses a third zone (a server is no router).
  One approximation: a switch inside a zone shared by hosts of several gateways keeps all its
  equal-cost gateways, so a host there may leave through a neighbour's NIC.
"""

from __future__ import annotations

import gc
import heapq
import weakref
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import overload

import numpy as np

from hetero_ns3.errors import ScenarioError

HOST = "host"
SWITCH = "switch"
#: Role of a switch-side endpoint: a host node that stands for the reduction engine of an NVSwitch
#: (NVLink SHARP). Flows to and from it are the traffic between the GPUs and the switch; it is not a
#: GPU (collective groups, GPU counts and summaries skip it). See topology/fabric.py.
NVLS_ROLE = "nvls"


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
    zone: str = ""
    """Server this element belongs to (``n3``); ``""`` for the network and for plain hosts."""
    serves: tuple[str, ...] = ()
    """Gateways (NICs) only: the hosts of its zone whose inter-zone traffic it carries."""


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
    cost: float = 1.0
    """Routing cost (> 0); shortest paths minimise the sum. 1 everywhere = hop count."""
    mtu_bytes: int = 0
    """Largest segment on this link, bytes; 0 = the network configuration's MTU (NVLink may use more)."""


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

    def gpu_names(self) -> list[str]:
        """Hosts that are GPUs or plain hosts, without switch-side endpoints (role ``nvls``)."""
        return [n.name for n in self.nodes if n.kind == HOST and n.role != NVLS_ROLE]

    def host_indices(self) -> list[int]:
        return [i for i, n in enumerate(self.nodes) if n.kind == HOST]

    def gpu_indices(self) -> list[int]:
        """Indices of :meth:`gpu_names`."""
        return [i for i, n in enumerate(self.nodes) if n.kind == HOST and n.role != NVLS_ROLE]

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
    for i, n in enumerate(nodes):
        for h in n.serves:
            k = index.get(h)
            if n.kind != SWITCH or k is None or nodes[k].kind != HOST or nodes[k].zone != n.zone or not n.zone:
                raise ScenarioError(
                    f"nodes[{i}].serves ({h!r}) must name a host of the same non-empty zone ({n.zone!r}) "
                    f"and only switches (NICs) may serve hosts"
                )
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
        if not link.cost > 0:
            raise ScenarioError(f"links[{j}].cost ({link.cost}) must be > 0, e.g. 1.0")
        if link.mtu_bytes < 0:
            raise ScenarioError(f"links[{j}].mtu_bytes ({link.mtu_bytes}) must be >= 0 (0 = default MTU)")
    return NetGraph(tuple(nodes), tuple(links), index)


_EPS = 1e-9


class _Router:
    """Adjacency, costs and zone data of a graph, prepared once for many shortest-path searches."""

    def __init__(self, graph: NetGraph) -> None:
        self.graph = graph
        self.adj = graph.adjacency()
        self.cost = [link.cost for link in graph.links]
        self.is_host = [n.kind == HOST for n in graph.nodes]
        zones: dict[str, int] = {"": 0}
        self.zone = [zones.setdefault(n.zone, len(zones)) for n in graph.nodes]
        self.gateway = [bool(n.serves) for n in graph.nodes]
        self.served: list[frozenset[int]] = [frozenset(graph.index(h) for h in n.serves) for n in graph.nodes]

    def _allowed(self, u: int, v: int, dst: int, zd: int) -> bool:
        """May ``v`` forward toward ``dst`` through ``u`` (reverse-search edge u -> v)?"""
        zu, zv = self.zone[u], self.zone[v]
        if zu == zv:
            # Inside the destination's zone or the network: free; in another zone only the
            # gateway-to-inside and inside-to-host steps (egress toward a gateway, no transit).
            return zu == 0 or zu == zd or self.is_host[v] or self.gateway[u]
        if zu != 0 and (zu != zd or dst not in self.served[u]):
            return False  # leave a zone only from the destination's own zone, through its gateway
        return zv == 0 or (zv != zd and self.gateway[v])

    def _distances(self, start: int, dst: int, zd: int, members: list[int] | None) -> dict[int, float]:
        """Least costs toward ``start`` (Dijkstra on the reversed edges that :meth:`_allowed` admits),
        in the order nodes were first reached; with ``members``, only among those nodes."""
        adj, cost, is_host, zone = self.adj, self.cost, self.is_host, self.zone
        inf = float("inf")
        inside = None if members is None else set(members)
        dist: dict[int, float] = {start: 0.0}
        heap = [(0.0, start)]
        done: set[int] = set()
        allowed = self._allowed
        get, push, pop = dist.get, heapq.heappush, heapq.heappop
        while heap:
            d, u = pop(heap)
            if u in done:
                continue
            done.add(u)
            if u != start and is_host[u]:
                continue  # hosts are leaves: they never relay
            zu = zone[u]
            for v, li in adj[u]:
                nd = d + cost[li]
                if (
                    nd < get(v, inf) - _EPS
                    and (inside is None or v in inside)
                    and (not (zu or zone[v]) or allowed(u, v, dst, zd))  # network to network: always allowed
                ):
                    dist[v] = nd
                    push(heap, (nd, v))
        return dist

    @overload
    def search(self, start: int, dst: int, zd: int) -> list[list[int]]: ...

    @overload
    def search(self, start: int, dst: int, zd: int, members: list[int]) -> dict[int, list[int]]: ...

    def search(
        self, start: int, dst: int, zd: int, members: list[int] | None = None
    ) -> list[list[int]] | dict[int, list[int]]:
        """Least-cost next hops toward ``start`` under the zone rules for destination ``dst``.

        ``start`` is ``dst`` itself, or a switch that every route to ``dst`` passes last (the
        destination's single port, or the network switch in front of its single gateway). ``zd``
        is the destination zone (-1: treat every zone as foreign, for a search from the network).
        Returns one next-hop list per node; with ``members``, the search stays among those nodes
        (a server-local search) and returns ``{node: next hops}`` for the reached ones only.
        """
        adj, cost, is_host = self.adj, self.cost, self.is_host
        zone, gateway, served = self.zone, self.gateway, self.served
        dist = self._distances(start, dst, zd, members)
        hops: dict[int, list[int]] = {}
        for u, du in dist.items():
            if u == start:
                continue
            out: list[int] = []
            zu = zone[u]
            foreign_host = is_host[u] and zu not in (0, zd)
            for v, li in adj[u]:
                dv = dist.get(v)
                if dv is None or abs(dv + cost[li] - du) > _EPS or (is_host[v] and v != start):
                    continue
                if (zu or zone[v]) and not self._allowed(v, u, dst, zd):
                    continue  # (between two network nodes every step is allowed)
                if foreign_host and not (u in served[v] or any(u in served[w] for w, _ in adj[v] if gateway[w])):
                    continue  # a host leaves its zone through a gateway serving it
                out.append(li)
            hops[u] = out
        if members is not None:
            return hops
        full: list[list[int]] = [[] for _ in adj]
        for u, out in hops.items():
            full[u] = out
        return full

    def next_hops(self, dst: int, port: int = -1) -> list[list[int]]:
        """Next-hop links toward ``dst``; ``port`` >= 0 searches from switch ``port`` instead.

        With ``port`` the result serves every host whose single link goes to ``port`` and that has
        the same zone and gateways as ``dst``: only ``port`` and those hosts' own entries differ.
        """
        return self.search(dst if port < 0 else port, dst, self.zone[dst])


def shortest_path_next_hops(graph: NetGraph, dst: int) -> list[list[int]]:
    """ECMP next hops toward host ``dst``: for every node, the link indices on a least-cost path.

    Costs are the links' ``cost`` (hop count by default); hosts other than ``dst`` are never used
    as transit, and the zone rules of the module docstring hold. The returned
    list has one entry per node; the entry of ``dst`` and of unreachable nodes is empty.
    """
    return _Router(graph).next_hops(dst)


#: One destination's table as a shared base row plus patches applied in order: ``(dst, base, [(node, hops)])``.
TablePart = tuple[int, list[list[int]], list[tuple[int, list[int]]]]


@contextmanager
def _gc_paused() -> Iterator[None]:
    """Pause the cyclic garbage collector: the searches allocate many small lists, dicts and tuples (no
    cycles), and each allocation burst would otherwise trigger collections that walk every live object."""
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()


def _table_parts(graph: NetGraph) -> list[TablePart]:
    """The tables of :func:`routing_tables`, each as a base row (shared between destinations) and patches.

    Searches are shared where routes provably coincide: hosts with a single link to the same switch
    share one search (their routes differ only at that switch and at themselves), and GPUs whose
    single NIC has a single network switch as neighbour share one search from that switch (a leaf
    or rail switch) plus a small search inside their own server.
    """
    router = _Router(graph)
    parts: list[TablePart] = []
    gateways: dict[int, list[int]] = {}
    for g, hosts in enumerate(router.served):
        for h in hosts:
            gateways.setdefault(h, []).append(g)
    members: dict[int, list[int]] = {}
    for u, z in enumerate(router.zone):
        if z:
            members.setdefault(z, []).append(u)
    by_port: dict[tuple[int, int, frozenset[int]], list[int]] = {}
    by_leaf: dict[int, list[tuple[int, list[int]]]] = {}
    for d in graph.host_indices():
        z = router.zone[d]
        gws = gateways.get(d, [])
        if z and len(gws) == 1:
            out = [(v, li) for v, li in router.adj[gws[0]] if router.zone[v] != z]
            leaf = out[0][0] if out else -1
            if out and all(v == leaf for v, _ in out) and router.zone[leaf] == 0 and not router.is_host[leaf]:
                by_leaf.setdefault(leaf, []).append((d, [li for _, li in out]))
                continue
        neigh = router.adj[d]
        if len(neigh) == 1 and not router.is_host[neigh[0][0]]:
            key = (neigh[0][0], z, frozenset(gws))
            by_port.setdefault(key, []).append(d)
        else:
            parts.append((d, router.next_hops(d), []))
    for (port, _, _), hosts in by_port.items():
        if len(hosts) == 1:
            parts.append((hosts[0], router.next_hops(hosts[0]), []))
            continue
        base = router.next_hops(hosts[0], port=port)
        for d in hosts:
            parts.append((d, base, [(d, []), (port, [router.adj[d][0][1]])]))
    for leaf, dests in by_leaf.items():
        # Outside the destination's server every route ends "-> leaf -> its NIC": search once from
        # the leaf with every server foreign, then patch in the server-local part per destination.
        base = router.search(leaf, leaf, -1)
        for d, links in dests:
            z = router.zone[d]
            patch: list[tuple[int, list[int]]] = [(u, []) for u in members[z]]
            patch += list(router.search(d, d, z, members[z]).items())
            patch.append((leaf, list(links)))
            parts.append((d, base, patch))
    return parts


#: :func:`_table_parts` per graph, for as long as the graph lives (keys compare by content).
_PARTS: weakref.WeakKeyDictionary[NetGraph, list[TablePart]] = weakref.WeakKeyDictionary()


def shared_table_parts(graph: NetGraph) -> list[TablePart]:
    """:func:`_table_parts` of ``graph``, computed once per topology while the graph object lives.

    The collective planner (:func:`routing_tables`) and the backends (:func:`packed_routing_tables`)
    route on the same tables; sharing them saves the searches (about 1.5 s at 1024 GPUs) on the second
    use. The parts are read-only by contract.
    """
    parts = _PARTS.get(graph)
    if parts is None:
        with _gc_paused():
            parts = _table_parts(graph)
        _PARTS[graph] = parts
    return parts


def routing_tables(graph: NetGraph) -> dict[int, list[list[int]]]:
    """ECMP next-hop link sets toward every host: ``tables[dst][node] -> [link index, ...]``.

    Searches are shared where routes provably coincide (see :func:`packed_routing_tables`): a rail
    cluster costs one network-wide search per rail switch, not per GPU. Inner lists are shared between
    destinations: treat the result as read-only.
    """
    tables: dict[int, list[list[int]]] = {}
    parts = shared_table_parts(graph)
    for d, base, patch in parts:
        t = list(base) if patch else base
        for u, hops in patch:
            t[u] = hops
        tables[d] = t
    return {d: tables[d] for d in graph.host_indices()}


@dataclass(frozen=True)
class PackedTables:
    """:func:`routing_tables` as flat arrays: toward host ``hosts[s]`` at node ``u`` the next hops are
    ``links[off[s, u] : off[s, u] + count[s, u]]``, in the same order."""

    hosts: np.ndarray
    """int64 (S,): destination host node indices (graph order)."""
    off: np.ndarray
    """int64 (S, n_nodes): offsets into ``links``."""
    count: np.ndarray
    """int32 (S, n_nodes): number of next hops."""
    links: np.ndarray
    """int32: link indices (rows shared between destinations are stored once)."""


def packed_routing_tables(graph: NetGraph) -> PackedTables:
    """The tables of :func:`routing_tables` without building a Python list per destination and node.

    Each shared base row is packed once; a destination's row is a copy of its base's offsets and counts
    with its few patched nodes pointing at their own hops.
    """
    hosts = graph.host_indices()
    slot = {d: s for s, d in enumerate(hosts)}
    n = len(graph.nodes)
    off = np.zeros((len(hosts), n), np.int64)
    count = np.zeros((len(hosts), n), np.int32)
    pool: list[np.ndarray] = []
    size = 0
    packed: dict[int, tuple[np.ndarray, np.ndarray]] = {}

    def put(hops: list[int] | np.ndarray) -> int:
        nonlocal size
        at = size
        pool.append(np.asarray(hops, np.int32))
        size += len(hops)
        return at

    parts = shared_table_parts(graph)
    for d, base, patch in parts:
        key = id(base)
        if key not in packed:
            lens = np.fromiter(map(len, base), np.int64, n)
            starts = np.zeros(n, np.int64)
            np.cumsum(lens[:-1], out=starts[1:])
            flat = np.fromiter((li for hops in base for li in hops), np.int32, int(lens.sum()))
            packed[key] = (starts + put(flat), lens.astype(np.int32))
        s = slot[d]
        off[s], count[s] = packed[key]
        for u, hops in patch:
            off[s, u] = put(hops)
            count[s, u] = len(hops)
    links = np.concatenate(pool) if pool else np.zeros(0, np.int32)
    return PackedTables(np.asarray(hosts, np.int64), off, count, links)
