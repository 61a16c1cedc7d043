"""Routed paths of flows as arrays of directed-link resources.

A *resource* is one direction of one full-duplex link: ``2 * link`` carries traffic from ``link.a`` to
``link.b``, ``2 * link + 1`` from ``b`` to ``a``. Resource ``2 * n_links`` is a padding entry with infinite
capacity and zero delay, so that paths of different lengths fit in one rectangular array.

Paths follow the ECMP next-hop sets of :mod:`hetero_ns3.topology.graph`; at every node a flow picks one next
hop by a deterministic hash of ``(key, node, seed)``, so a flow keeps one path for its life (per-flow
ECMP, as a switch hashing the 5-tuple does), different keys spread, and a run is reproducible. The key
is the flow's connection id (``AnalyticConfig.ecmp_key = "connection"``: all messages of one queue pair
share its UDP source port, hence its path) or the flow's own id (``"flow"``).
"""

from __future__ import annotations

import ctypes
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from itertools import chain

import numpy as np

from hetero_ns3.errors import SimulationError
from hetero_ns3.network.analytic.config import AnalyticConfig
from hetero_ns3.network.analytic.ecmp import ecmp_hash, native_seed_word, packet_backend_hash
from hetero_ns3.network.analytic.flows import row_bytes
from hetero_ns3.topology.graph import NetGraph
from hetero_ns3.topology.routing import packed_routing_tables


@dataclass(frozen=True)
class LinkArrays:
    """Per-resource arrays (length ``2 * n_links + 1``, the last entry is the padding resource)."""

    a: np.ndarray
    """int64 per link: node index of end ``a``."""
    b: np.ndarray
    """int64 per link: node index of end ``b``."""
    rate_bps: np.ndarray
    """Line rate in bit/s per resource (pad: inf)."""
    delay_s: np.ndarray
    """Propagation delay in s per resource (pad: 0)."""
    payload_bytes: np.ndarray
    """Packet payload in bytes per resource (pad: 0)."""
    overhead_bytes: np.ndarray
    """Per-packet overhead in bytes per resource (pad: 0)."""
    capacity: np.ndarray
    """Goodput in payload bytes/s per resource: ``rate / 8 * payload / (payload + overhead)`` (pad: inf)."""

    @property
    def pad(self) -> int:
        return int(self.capacity.shape[0] - 1)


def link_arrays(graph: NetGraph, config: AnalyticConfig) -> LinkArrays:
    """Arrays of the links of ``graph`` with the framing of ``config`` applied per link kind."""
    n = len(graph.links)
    a = np.fromiter((graph.index(ln.a) for ln in graph.links), np.int64, n)
    b = np.fromiter((graph.index(ln.b) for ln in graph.links), np.int64, n)
    rate = np.fromiter((ln.rate_bps for ln in graph.links), np.float64, n)
    delay = np.fromiter((ln.delay_s for ln in graph.links), np.float64, n)
    fr = [config.framing_of(ln.kind) for ln in graph.links]
    # A link's own MTU (``GraphLink.mtu_bytes``, 0 = default) overrides its kind's payload, as in the packet backend.
    payload = np.fromiter(
        ((getattr(ln, "mtu_bytes", 0) or f.payload_bytes) for ln, f in zip(graph.links, fr, strict=True)), np.float64, n
    )
    overhead = np.fromiter((f.overhead_bytes for f in fr), np.float64, n)

    def per_res(x: np.ndarray, pad: float) -> np.ndarray:
        return np.append(np.repeat(x, 2), pad)

    cap = rate / 8.0 * payload / (payload + overhead)
    return LinkArrays(
        a=a,
        b=b,
        rate_bps=per_res(rate, np.inf),
        delay_s=per_res(delay, 0.0),
        payload_bytes=per_res(payload, 0.0),
        overhead_bytes=per_res(overhead, 0.0),
        capacity=per_res(cap, np.inf),
    )


@dataclass(frozen=True)
class FlowPaths:
    """Paths of F flows over P distinct path rows: flow ``f`` takes row ``row[f]`` (row ``f`` when ``row`` is
    None); ``paths[p, :path_hops[p]]`` are a row's resources in order, the rest is padding."""

    paths: np.ndarray
    """int32 (P, H): resource ids, padded with the pad resource."""
    path_hops: np.ndarray
    """int32 (P,): number of links on each path row."""
    latency_s: np.ndarray | None
    """float64 (F,): propagation delays plus store-and-forward serialization of one packet per later hop
    (None when not asked for: the native event loop computes them as flows start)."""
    ideal_fct_s: np.ndarray | None
    """float64 (F,): FCT alone in the network: size over the slowest hop's goodput, plus ``latency_s``
    (None with ``latency_s``)."""
    res_bytes: np.ndarray
    """float64 (2 * n_links + 1,): payload bytes the flows carry over each resource (the last entry: padding)."""
    row: np.ndarray | None = None
    """int32 (F,): the path row of each flow (flows of one connection share one); None: row f for flow f."""

    @property
    def res(self) -> np.ndarray:
        """int32 (F, H): the resources of each flow's path (a gathered copy when rows are shared)."""
        return self.paths if self.row is None else gather_rows(self.paths, self.row)

    @property
    def hops(self) -> np.ndarray:
        """int32 (F,): number of links on each flow's path."""
        return self.path_hops if self.row is None else self.path_hops[self.row]


@dataclass(frozen=True)
class NextHopTable:
    """ECMP next hops of every destination host as flat arrays (destination slot x node).

    Toward host ``d`` at node ``u``: ``link[off[k] : off[k] + count[k]]`` with ``k = slot[d] * n_nodes + u``,
    in the order of :func:`hetero_ns3.topology.routing.routing_tables`.
    """

    slot: np.ndarray
    """int64 per node: the table slot of a destination host; -1 for nodes without a table."""
    off: np.ndarray
    """int64 (slots * n_nodes,): offsets into ``link``."""
    count: np.ndarray
    """int32 (slots * n_nodes,): number of next hops."""
    link: np.ndarray
    """int32: link indices."""
    n_nodes: int

    @property
    def slots(self) -> int:
        """Number of destinations with a table."""
        return int(self.off.shape[0]) // max(self.n_nodes, 1)


def next_hop_table(routes: Mapping[int, Sequence[Sequence[int]]], n_nodes: int) -> NextHopTable:
    """Pack next-hop tables (``routes[dst][node] -> [link, ...]``, :func:`~hetero_ns3.topology.routing.routing_tables`)."""
    dests = list(routes)
    empty: list[Sequence[int]] = [()] * n_nodes
    rows = []
    for d in dests:
        row = routes[d] or empty
        if len(row) != n_nodes:
            raise SimulationError(f"next-hop table of node {d} has {len(row)} entries for {n_nodes} nodes")
        rows.append(row)
    slot = np.full(n_nodes, -1, np.int64)
    slot[np.asarray(dests, np.int64)] = np.arange(len(dests))
    cells = len(dests) * n_nodes
    count = np.fromiter(map(len, chain.from_iterable(rows)), np.int32, cells)
    off = np.zeros(cells, np.int64)
    np.cumsum(count[:-1], out=off[1:])
    link = np.fromiter(chain.from_iterable(chain.from_iterable(rows)), np.int32, int(count.sum(dtype=np.int64)))
    return NextHopTable(slot, off, count, link, n_nodes)


def graph_next_hop_table(graph: NetGraph) -> NextHopTable:
    """The next-hop table of ``graph`` (:func:`~hetero_ns3.topology.routing.packed_routing_tables`, same content as
    :func:`next_hop_table` of :func:`~hetero_ns3.topology.routing.routing_tables`, without the Python lists)."""
    packed = packed_routing_tables(graph)
    n_nodes = len(graph.nodes)
    slot = np.full(n_nodes, -1, np.int64)
    slot[packed.hosts] = np.arange(packed.hosts.shape[0])
    return NextHopTable(slot, packed.off.ravel(), packed.count.ravel(), packed.links, n_nodes)


def _no_route(graph: NetGraph, node: int, dst: int) -> SimulationError:
    return SimulationError(
        f"no route from node {graph.nodes[node].name!r} to host {graph.nodes[dst].name!r}; "
        "check that the topology connects them"
    )


_LOOP = "routing loop in the next-hop tables; check the topology's routing"


def _walk_numpy(
    graph: NetGraph, table: NextHopTable, links: LinkArrays, src: np.ndarray, dst: np.ndarray, hash_of
) -> tuple[np.ndarray, np.ndarray]:
    """All flows one hop at a time (vectorized); ``hash_of(alive, node)`` gives the ECMP hashes."""
    n_nodes = table.n_nodes
    f = int(src.shape[0])
    width = 4
    res = np.full((f, width), links.pad, np.int32)
    hops = np.zeros(f, np.int32)
    cur = src.copy()
    base_key = np.where(table.slot[dst] >= 0, table.slot[dst] * n_nodes, -1)
    alive = np.arange(f)
    step = 0
    while alive.size:
        c, d = cur[alive], dst[alive]
        key = base_key[alive]
        safe = np.maximum(key, 0) + c
        lo = table.off[safe]
        n_opt = np.where(key >= 0, table.count[safe], 0).astype(np.int64)
        if np.any(n_opt == 0):
            k = int(np.flatnonzero(n_opt == 0)[0])
            raise _no_route(graph, int(c[k]), int(d[k]))
        pick = (hash_of(alive, c) % n_opt.astype(np.uint64)).astype(np.int64)
        li = table.link[lo + pick].astype(np.int64)
        fwd = links.a[li] == c
        if step >= width:
            res = np.concatenate((res, np.full((f, width), links.pad, np.int32)), axis=1)
            width *= 2
        res[alive, step] = 2 * li + (~fwd)
        nxt = np.where(fwd, links.b[li], links.a[li])
        cur[alive] = nxt
        step += 1
        done = nxt == d
        hops[alive[done]] = step
        alive = alive[~done]
        if step > n_nodes:
            raise SimulationError(_LOOP)
    return np.ascontiguousarray(res[:, : int(hops.max())]), hops


def _stats_numpy(
    res: np.ndarray, size: np.ndarray, links: LinkArrays, store_and_forward: bool
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Latency, ideal FCT and carried bytes per resource of routed flows (numpy)."""
    latency = links.delay_s[res].sum(axis=1)
    if store_and_forward and res.shape[1] > 1:
        later = res[:, 1:]
        pkt = np.minimum(size.astype(np.float64)[:, None], links.payload_bytes[later]) + links.overhead_bytes[later]
        latency = latency + (pkt * 8.0 / links.rate_bps[later]).sum(axis=1)
    ideal = size / links.capacity[res].min(axis=1) + latency
    w = np.repeat(size.astype(np.float64), res.shape[1])
    carried = np.bincount(res.ravel(), weights=w, minlength=links.capacity.shape[0])
    return latency, ideal, carried


def _walk_native(
    lib: ctypes.CDLL,
    graph: NetGraph,
    table: NextHopTable,
    links: LinkArrays,
    src: np.ndarray,
    dst: np.ndarray,
    key: np.ndarray,
    mode: int,
    seed_word: int,
) -> tuple[np.ndarray, np.ndarray]:
    """:func:`_walk_numpy` in C (``flowsim_route``): the same paths, hashing ``key`` per row."""
    f = int(src.shape[0])
    fid = np.ascontiguousarray(key, np.int64)
    hops = np.empty(f, np.int32)
    need = np.zeros(1, np.int64)
    bad = np.zeros(2, np.int64)
    width = 8
    while True:
        res = np.empty(f * width, np.int32)
        rc = lib.flowsim_route(
            f, src.ctypes.data, dst.ctypes.data, fid.ctypes.data, table.n_nodes, table.slots, table.slot.ctypes.data,
            table.off.ctypes.data, table.count.ctypes.data, table.link.ctypes.data, links.a.ctypes.data, links.b.ctypes.data, mode,
            seed_word, width, links.pad, res.ctypes.data, hops.ctypes.data, need.ctypes.data, bad.ctypes.data,
        )  # fmt: skip
        if rc == 1:
            raise _no_route(graph, int(bad[0]), int(bad[1]))
        if rc == 2:
            raise SimulationError(_LOOP)
        if rc == 3:
            raise MemoryError("the analytic kernel ran out of memory")
        used = int(need[0])
        if used <= width:
            break
        width = used
    lib.flowsim_narrow(f, width, used, res.ctypes.data)
    return res[: f * used].reshape(f, used), hops


def _stats_native(
    lib: ctypes.CDLL, res: np.ndarray, size: np.ndarray, links: LinkArrays, store_and_forward: bool
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """:func:`_stats_numpy` in C (``flowsim_path_stats``), bit for bit; numpy for paths over 128 hops."""
    f, used = res.shape
    if used > 128:
        return _stats_numpy(res, size, links, store_and_forward)
    res = np.ascontiguousarray(res, np.int32)
    sz = np.ascontiguousarray(size, np.float64)
    latency, ideal = np.empty(f), np.empty(f)
    carried = np.zeros(links.capacity.shape[0])
    lib.flowsim_path_stats(
        f, used, res.ctypes.data, sz.ctypes.data, links.delay_s.ctypes.data, links.payload_bytes.ctypes.data,
        links.overhead_bytes.ctypes.data, links.rate_bps.ctypes.data, links.capacity.ctypes.data,
        int(store_and_forward), latency.ctypes.data, ideal.ctypes.data, carried.ctypes.data,
    )  # fmt: skip
    return latency, ideal, carried


def connection_rows(
    connection: np.ndarray, src: np.ndarray, dst: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Distinct connections of F flows: ``(ids, rep, rows)``.

    ``ids`` are the distinct connection ids in increasing order, ``rep[k]`` one flow of connection
    ``ids[k]``, ``rows[f]`` the position of flow ``f``'s connection in ``ids``. Dense ids (at most 4F)
    take two scatters instead of a sort. Raises SimulationError when an id is negative or when flows of
    one connection go between different hosts.
    """
    conn = np.ascontiguousarray(connection, np.int64)
    f = int(src.shape[0])
    if conn.shape != (f,):
        raise SimulationError(f"connection ids have shape {conn.shape}, expected ({f},): one id per flow")
    if f and int(conn.min()) < 0:
        i = int(np.argmin(conn))
        raise SimulationError(f"connection[{i}] ({int(conn[i])}) is negative; give every flow an id >= 0")
    n_ids = int(conn.max()) + 1 if f else 0
    if n_ids <= 4 * f:
        any_flow = np.empty(n_ids, np.int64)
        any_flow[conn] = np.arange(f, dtype=np.int64)
        used = np.zeros(n_ids, bool)
        used[conn] = True
        ids = np.flatnonzero(used)
        pos = np.empty(n_ids, np.int64)
        pos[ids] = np.arange(ids.size, dtype=np.int64)
        rep, rows = any_flow[ids], pos[conn]
    else:
        ids, rep, rows = np.unique(conn, return_index=True, return_inverse=True)
        rows = rows.reshape(-1)
    bad = (src[rep][rows] != src) | (dst[rep][rows] != dst)
    if bad.any():
        i = int(np.flatnonzero(bad)[0])
        raise SimulationError(
            f"flows {int(rep[rows[i]])} and {i} share connection {int(conn[i])} but not their hosts; "
            "a connection links one source to one destination"
        )
    return ids, rep, rows


def gather_rows(a: np.ndarray, rows: np.ndarray) -> np.ndarray:
    """``a[rows]`` of a C-contiguous 2-D int32 array, each row moved as one item (int64 pairs when the
    width is even, else a raw record): several times faster than a 2-D fancy index for millions of rows."""
    a = np.ascontiguousarray(a, np.int32)
    n, w = a.shape
    if w == 0 or n == 0:
        return a[rows]
    item = a.view(np.int64) if w % 2 == 0 else a.view(np.dtype((np.void, 4 * w)))
    return np.take(item, rows, axis=0).view(np.int32).reshape(rows.shape[0], w)


def route_flows(
    graph: NetGraph,
    links: LinkArrays,
    src: np.ndarray,
    dst: np.ndarray,
    flow_id: np.ndarray,
    size_bytes: np.ndarray,
    config: AnalyticConfig,
    seed: int = 0,
    routes: Mapping[int, Sequence[Sequence[int]]] | NextHopTable | None = None,
    lib: ctypes.CDLL | None = None,
    connection: np.ndarray | None = None,
) -> FlowPaths:
    """Route flows ``src[i] -> dst[i]`` (node indices) along ECMP next hops.

    ``routes`` maps a destination node index to its per-node next-hop link lists (the output of
    :func:`hetero_ns3.topology.routing.routing_tables`, computed here when absent, so that both backends route
    alike). ``lib`` is the native kernel (:func:`hetero_ns3.network.analytic.native.load_kernel`): with it the walk
    runs in C, else in numpy; both give the same paths and figures. ``connection`` (int64 per flow,
    optional) with ``config.ecmp_key == "connection"``: the hash identity of a flow is its connection id
    instead of ``flow_id`` (``packet`` hash: instead of its position), each distinct connection is walked
    once and its path given to all its flows. Raises SimulationError when a destination cannot be reached.
    """
    f = int(src.shape[0])
    pad = links.pad
    if f == 0:
        z = np.zeros(0)
        return FlowPaths(np.full((0, 4), pad, np.int32), np.zeros(0, np.int32), z, z, np.zeros(pad + 1))
    table = resolve_next_hops(graph, routes)
    src = np.ascontiguousarray(src, np.int64)
    dst = np.ascontiguousarray(dst, np.int64)
    packet = config.ecmp_hash == "packet"
    if connection is not None and config.ecmp_key == "connection":
        key, rep, rows = connection_rows(connection, src, dst)
        return route_connections(graph, links, src[rep], dst[rep], key, rows, size_bytes, config, seed, table, lib)
    # packet: flows numbered by position (release order if flows are released in id order)
    key = np.arange(f, dtype=np.int64) if packet else np.asarray(flow_id, np.int64)
    res, hops = _walk(graph, table, links, src, dst, key, packet, seed, lib)
    return FlowPaths(res, hops, *_path_stats(lib, res, size_bytes, links, config.store_and_forward))


def resolve_next_hops(
    graph: NetGraph, routes: Mapping[int, Sequence[Sequence[int]]] | NextHopTable | None
) -> NextHopTable:
    """The next-hop table to walk: ``routes`` packed (or as given when already a table), else the graph's."""
    if isinstance(routes, NextHopTable):
        return routes
    return graph_next_hop_table(graph) if routes is None else next_hop_table(routes, len(graph.nodes))


def route_connections(
    graph: NetGraph,
    links: LinkArrays,
    src: np.ndarray,
    dst: np.ndarray,
    key: np.ndarray,
    rows: np.ndarray,
    size_bytes: np.ndarray,
    config: AnalyticConfig,
    seed: int = 0,
    routes: Mapping[int, Sequence[Sequence[int]]] | NextHopTable | None = None,
    lib: ctypes.CDLL | None = None,
    figures: bool = True,
    task: np.ndarray | None = None,
) -> FlowPaths:
    """Route C connections ``src[c] -> dst[c]`` (node indices, hash identity ``key[c]``) once each, and
    give flow ``f`` (``size_bytes[f]``) the path of connection ``rows[f]``: the shared form of
    :func:`route_flows` (``FlowPaths.row`` is ``rows``), with the same figures per flow (``figures=False``:
    without per-flow latency and ideal FCT for paths of up to 128 entries, for the native loop, which
    computes them itself). ``task`` (optional, per flow): ``size_bytes`` is then per task, flow ``f``
    having ``size_bytes[task[f]]`` bytes (no array of F sizes is made when ``figures=False``)."""
    src = np.ascontiguousarray(src, np.int64)
    dst = np.ascontiguousarray(dst, np.int64)
    packet = config.ecmp_hash == "packet"
    res, hops = _walk(graph, resolve_next_hops(graph, routes), links, src, dst, key, packet, seed, lib)
    if not figures and res.shape[1] <= 128:  # (the native loop's limit; longer paths get figures here)
        rows = np.ascontiguousarray(rows, np.int32)
        return FlowPaths(res, hops, None, None, _shared_bytes(res, rows, size_bytes, links, task), row=rows)
    size = size_bytes if task is None else size_bytes[task]
    return _shared_paths(res, hops, rows, size, links, config.store_and_forward, lib)


def _shared_bytes(
    res: np.ndarray, rows: np.ndarray, size: np.ndarray, links: LinkArrays, task: np.ndarray | None = None
) -> np.ndarray:
    """Payload bytes per resource of flows ``size`` (per task with ``task``) on path rows ``res[rows]``
    (whole bytes: exact in float64)."""
    conn_bytes = row_bytes(rows, res.shape[0], size, task)
    return np.bincount(res.ravel(), weights=np.repeat(conn_bytes, res.shape[1]), minlength=links.pad + 1)


def _path_stats(
    lib: ctypes.CDLL | None, res: np.ndarray, size: np.ndarray, links: LinkArrays, store_and_forward: bool
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    if lib is not None:
        return _stats_native(lib, res, size, links, store_and_forward)
    return _stats_numpy(res, size, links, store_and_forward)


def _shared_paths(
    res: np.ndarray,
    hops: np.ndarray,
    rows: np.ndarray,
    size: np.ndarray,
    links: LinkArrays,
    store_and_forward: bool,
    lib: ctypes.CDLL | None,
) -> FlowPaths:
    """Flows on the paths of their connections: ``res[rows[f]]``, with the figures of a per-flow computation.

    Per connection: latency of a flow of at least one packet on every later hop, bottleneck goodput, and
    bytes (summed over its flows, whole bytes: exact in float64). A flow shorter than a later hop's
    payload (its store-and-forward packet is smaller) gets its own figures.
    """
    size = np.asarray(size)
    lat_c, _, _ = _path_stats(lib, res, np.full(res.shape[0], np.inf), links, store_and_forward)
    bottleneck = links.capacity[res].min(axis=1)
    carried = _shared_bytes(res, rows, size, links)
    latency = lat_c[rows]
    ideal = size / bottleneck[rows]
    ideal += latency
    if store_and_forward and res.shape[1] > 1:
        limit = links.payload_bytes[res[:, 1:]].max(axis=1)  # per connection
        maybe = np.flatnonzero(size < limit.max(initial=0.0))  # few flows: no per-flow float temporaries
        small = maybe[size[maybe] < limit[rows[maybe]]]
        if small.size:
            own = gather_rows(res, rows[small])
            latency[small], ideal[small], _ = _path_stats(lib, own, size[small], links, store_and_forward)
    return FlowPaths(res, hops, latency, ideal, carried, row=np.ascontiguousarray(rows, np.int32))


def _walk(
    graph: NetGraph,
    table: NextHopTable,
    links: LinkArrays,
    src: np.ndarray,
    dst: np.ndarray,
    key: np.ndarray,
    packet: bool,
    seed: int,
    lib: ctypes.CDLL | None,
) -> tuple[np.ndarray, np.ndarray]:
    """Paths (res, hops) of rows ``src -> dst`` hashing ``key`` (flow/connection id, or packet sequence)."""
    if lib is not None:
        word = native_seed_word(seed, packet)
        return _walk_native(lib, graph, table, links, src, dst, key, int(packet), word)
    if packet:

        def hash_of(alive: np.ndarray, node: np.ndarray) -> np.ndarray:
            return packet_backend_hash(key[alive], node, src[alive], dst[alive], seed)
    else:

        def hash_of(alive: np.ndarray, node: np.ndarray) -> np.ndarray:
            return ecmp_hash(key[alive], node, seed)

    return _walk_numpy(graph, table, links, src, dst, hash_of)
