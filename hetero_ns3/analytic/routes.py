"""Routed paths of flows as arrays of directed-link resources.

A *resource* is one direction of one full-duplex link: ``2 * link`` carries traffic from ``link.a`` to
``link.b``, ``2 * link + 1`` from ``b`` to ``a``. Resource ``2 * n_links`` is a padding entry with infinite
capacity and zero delay, so that paths of different lengths fit in one rectangular array.

Paths follow the ECMP next-hop sets of :mod:`hetero_ns3.netgraph`; at every node a flow picks one next
hop by a deterministic hash of ``(flow id, node, seed)``, so a flow keeps one path for its life
(per-flow ECMP, as a switch hashing the 5-tuple does), different flows spread, and a run is reproducible.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from itertools import chain

import numpy as np

from hetero_ns3.analytic.config import AnalyticConfig
from hetero_ns3.errors import SimulationError
from hetero_ns3.netgraph import NetGraph, routing_tables

_M1 = np.uint64(0xBF58476D1CE4E5B9)
_M2 = np.uint64(0x94D049BB133111EB)
_GOLD = np.uint64(0x9E3779B97F4A7C15)


def ecmp_hash(flow_id: np.ndarray, node: np.ndarray, seed: int) -> np.ndarray:
    """A 64-bit mix (splitmix64 finalizer) of ``(flow id, node, seed)``; uint64 array, deterministic."""
    x = flow_id.astype(np.uint64) * _GOLD
    x ^= node.astype(np.uint64) + np.uint64(0x632BE59BD9B4E019)
    x += np.uint64((seed * 0x94D049BB133111EB) & 0xFFFFFFFFFFFFFFFF)
    for shift, mul in ((30, _M1), (27, _M2)):
        x ^= x >> np.uint64(shift)
        x *= mul
    x ^= x >> np.uint64(31)
    return x


def _mix64(x: np.ndarray) -> np.ndarray:
    x = x ^ (x >> np.uint64(30))
    x = x * _M1
    x = x ^ (x >> np.uint64(27))
    x = x * _M2
    return x ^ (x >> np.uint64(31))


def packet_backend_hash(
    flow_seq: np.ndarray, node: np.ndarray, src: np.ndarray, dst: np.ndarray, ecmp_seed: int = 0
) -> np.ndarray:
    """The per-flow ECMP hash of the packet backend's switches (``RoceNode::SelectPort``), vectorized.

    ``flow_seq`` is the packet backend's flow number (flows are numbered as they are released), from which
    it derives the UDP source port; ``node``, ``src``, ``dst`` are node indices; the UDP destination port
    is RoCEv2's 4791. The next hop is ``hops[hash % len(hops)]`` over the next-hop list in routing-table order.
    """
    u = np.uint64
    sport = u(49152) + ((((flow_seq.astype(u) * u(2654435761)) & u(0xFFFFFFFF)) >> u(18)) % u(16384))
    h = _mix64((u(ecmp_seed) << u(32)) ^ node.astype(u))
    h = _mix64(h ^ ((src.astype(u) << u(32)) | dst.astype(u)))
    return _mix64(h ^ ((sport << u(16)) | u(4791)) ^ (u(17) << u(40)))


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
    """Paths of F flows: ``res[f, :hops[f]]`` are the resources in order, the rest is padding."""

    res: np.ndarray
    """int32 (F, H): resource ids, padded with the pad resource."""
    hops: np.ndarray
    """int32 (F,): number of links on each path."""
    latency_s: np.ndarray
    """float64 (F,): propagation delays plus store-and-forward serialization of one packet per later hop."""


def _next_hops_at(
    routes: Mapping[int, Sequence[Sequence[int]]], dst: np.ndarray, node: np.ndarray, n_nodes: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """ECMP sets toward ``dst[i]`` at ``node[i]``: (count, offset into flat, flat link indices).

    Each distinct (destination, node) pair is looked up once.
    """
    uniq, inv = np.unique(dst * n_nodes + node, return_inverse=True)
    lists = []
    for key in uniq.tolist():
        d, u = divmod(key, n_nodes)
        table = routes.get(d) if hasattr(routes, "get") else routes[d]
        lists.append(table[u] if table else ())
    lens = np.fromiter(map(len, lists), np.int64, len(lists))
    ptr = np.zeros(len(lists) + 1, np.int64)
    np.cumsum(lens, out=ptr[1:])
    flat = np.fromiter(chain.from_iterable(lists), np.int64, int(ptr[-1]))
    return lens[inv], ptr[:-1][inv], flat


def route_flows(
    graph: NetGraph,
    links: LinkArrays,
    src: np.ndarray,
    dst: np.ndarray,
    flow_id: np.ndarray,
    size_bytes: np.ndarray,
    config: AnalyticConfig,
    seed: int = 0,
    routes: Mapping[int, Sequence[Sequence[int]]] | None = None,
) -> FlowPaths:
    """Route flows ``src[i] -> dst[i]`` (node indices) along ECMP next hops.

    ``routes`` maps a destination node index to its per-node next-hop link lists (the output of
    :func:`hetero_ns3.netgraph.routing_tables`, computed here when absent, so that both backends route
    alike). Raises SimulationError when a destination cannot be reached.
    """
    n_nodes = len(graph.nodes)
    f = int(src.shape[0])
    width = 4
    res = np.full((f, width), links.pad, np.int32)
    hops = np.zeros(f, np.int32)
    if f == 0:
        return FlowPaths(res, hops, np.zeros(0))
    if routes is None:
        routes = routing_tables(graph)
    dst = dst.astype(np.int64)
    cur = src.astype(np.int64)
    flow_seq = np.arange(f, dtype=np.int64)  # release order if flows are released in id order
    alive = np.arange(f)
    step = 0
    while alive.size:
        c, d = cur[alive], dst[alive]
        n_opt, base, flat = _next_hops_at(routes, d, c, n_nodes)
        if np.any(n_opt == 0):
            k = int(np.flatnonzero(n_opt == 0)[0])
            raise SimulationError(
                f"no route from node {graph.nodes[int(c[k])].name!r} to host {graph.nodes[int(d[k])].name!r}; "
                "check that the topology connects them"
            )
        if config.ecmp_hash == "packet":
            hv = packet_backend_hash(flow_seq[alive], c, src[alive], d, seed)
        else:
            hv = ecmp_hash(flow_id[alive], c, seed)
        pick = (hv % n_opt.astype(np.uint64)).astype(np.int64)
        li = flat[base + pick]
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
            raise SimulationError("routing loop in the next-hop tables; check the topology's routing")
    used = int(hops.max())
    res = np.ascontiguousarray(res[:, :used])
    latency = links.delay_s[res].sum(axis=1)
    if config.store_and_forward and used > 1:
        later = res[:, 1:]
        pkt = (
            np.minimum(size_bytes.astype(np.float64)[:, None], links.payload_bytes[later]) + links.overhead_bytes[later]
        )
        latency = latency + (pkt * 8.0 / links.rate_bps[later]).sum(axis=1)
    return FlowPaths(res, hops, latency)
