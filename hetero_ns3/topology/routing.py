"""Shortest-path ECMP routing over a :class:`~hetero_ns3.topology.graph.NetGraph`: next-hop tables per destination.

Routing is shortest path by the links' ``cost`` (1 by default, i.e. hop count) with every equal-cost next hop
kept (ECMP), under the zone rules of :mod:`hetero_ns3.topology.graph` (traffic between two servers leaves
through a gateway serving the source and enters through one serving the destination). Both backends route on
these tables; which of the equal-cost next hops a flow takes is the ECMP hash contract in
docs/topologies.md ("ECMP hash contract"). Pure Python + numpy, no ns-3.

With ``graph.routing == "dmodk"`` every network switch keeps one next hop per destination instead
(:class:`_DModK`): static destination-mod-k routing as InfiniBand subnet managers install on fat-trees
(Zahavi, "D-Mod-K Routing Providing Non-Blocking Traffic for Shift Permutations on Real Life Fat Trees",
CCIT Report 776, Technion 2010; OpenSM's ``ftree`` engine). Switches inside servers keep ECMP.
"""

from __future__ import annotations

import gc
import heapq
import weakref
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import overload

import numpy as np

from hetero_ns3.topology.graph import HOST, NetGraph

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
    for g, served in enumerate(router.served):
        for h in served:
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
    for (port, _zone, _gws), hosts in by_port.items():
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


class _DModK:
    """Which next hop a network switch keeps toward a destination under D-mod-K routing.

    Ports: every node attached to the network (a NIC, a directly attached GPU, a plain host) gets a
    number, consecutive under one first switch: ``rank x width + i`` for the ``i``-th node (in link
    order) on the ``rank``-th first switch (in order of first access link), ``width`` the most nodes on
    one first switch. (Numbering NICs node by node would give every NIC of a rail switch the same
    residue and send them all up one spine.) Levels: a network switch with an access link is level 1,
    its other network neighbours level 2 and so on (edge, aggregation, core). At level ``l`` a switch
    with ``n`` equal-cost next hops toward port ``p`` keeps hop ``(p // D_l) mod n`` (hops in link order),
    ``D_1 = 1`` and ``D_{l+1} = D_l x`` (the most up-links of a level-``l`` switch). In a k-ary fat-tree
    every destination then owns one core and one down path per core, and shift permutations (the
    node-to-node steps of a ring) are free of collisions on the way up as well.
    """

    def __init__(self, router: _Router) -> None:
        graph, adj, zone, is_host = router.graph, router.adj, router.zone, router.is_host
        net = [zone[u] == 0 and not is_host[u] for u in range(len(adj))]
        attached: dict[int, list[int]] = {}  # level-1 switch -> its attached nodes, in link order
        seen: set[int] = set()
        for link in graph.links:
            a, b = graph.index(link.a), graph.index(link.b)
            for end, sw in ((a, b), (b, a)):
                if net[sw] and not net[end] and end not in seen:
                    seen.add(end)
                    attached.setdefault(sw, []).append(end)
        width = max((len(ends) for ends in attached.values()), default=1)
        port = {end: rank * width + i for rank, ends in enumerate(attached.values()) for i, end in enumerate(ends)}
        level = dict.fromkeys(attached, 1)
        frontier = sorted(level)
        while frontier:
            nxt = []
            for u in frontier:
                for v, _ in adj[u]:
                    if net[v] and v not in level:
                        level[v] = level[u] + 1
                        nxt.append(v)
            frontier = nxt
        up: dict[int, int] = {}
        for u, lu in level.items():
            up[lu] = max(up.get(lu, 0), sum(1 for v, _ in adj[u] if level.get(v) == lu + 1))
        self.divisor: dict[int, int] = {}
        d = 1
        for lu in sorted(up):
            self.divisor[lu] = d
            d *= max(1, up[lu])
        self.level = level
        self.port = port
        self.gateways: dict[int, int] = {}
        for g, served in enumerate(router.served):
            if g in port:
                for h in served:
                    if h not in self.gateways or port[g] < port[self.gateways[h]]:
                        self.gateways[h] = g

    def port_of(self, dst: int) -> int:
        """The network port of host ``dst`` (its own, or its gateway's); -1 if it has none."""
        if dst in self.port:
            return self.port[dst]
        g = self.gateways.get(dst)
        return -1 if g is None else self.port[g]

    def prune(self, parts: list[TablePart]) -> list[TablePart]:
        """``parts`` with one next hop kept at every network switch that has several (patches appended)."""
        multi: dict[int, list[int]] = {}
        out: list[TablePart] = []
        for d, base, patch in parts:
            p = self.port_of(d)
            if p < 0:
                out.append((d, base, patch))
                continue
            key = id(base)
            if key not in multi:
                multi[key] = [u for u in self.level if len(base[u]) > 1]
            final = dict(patch)
            nodes = set(multi[key]) | {u for u, hops in final.items() if u in self.level and len(hops) > 1}
            extra = []
            for u in sorted(nodes):
                hops = final.get(u, base[u])
                if len(hops) > 1:
                    extra.append((u, [hops[(p // self.divisor[self.level[u]]) % len(hops)]]))
            out.append((d, base, list(patch) + extra))
        return out


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
            if graph.routing == "dmodk":
                parts = _DModK(_Router(graph)).prune(parts)
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
