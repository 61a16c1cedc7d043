"""Ring: NCCL's default for every collective at large sizes.

Channels: each channel has its own ring order and its own queue pairs, so ECMP sees several flows.
Ring orders (per channel ``c``): ranks are grouped by node; inside node ``j`` (with local ranks
``L``) the ring enters at ``a = L[c mod m]`` and leaves at ``b = L[(c + 1) mod m]`` on even node
positions, the other way round on odd ones, so that consecutive nodes hand over between GPUs of the
same local index (the same NIC rail on rail-optimized clusters) and channels spread over the rails.
On ``mesh`` nodes (a direct link between every pair of GPUs) channel ``c`` instead follows one of a set of
link-disjoint rings (:mod:`hetero_ns3.collectives.mesh`), so the channels use every link of the mesh; in a
group that also spans other nodes, those keep the order above.

Data: the buffer is split over channels, each channel's share into ``n`` segments (one per rank)
and each segment into up to ``max_slices`` slices that pipeline through the ring steps. A slice's
next step waits for its receipt (and, in reduce-scatter steps, for the reduction on the receiving
GPU). Broadcast and reduce are pipelined chains along the ring starting (ending) at the root.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

from hetero_ns3.collectives.cost import (
    bottleneck,
    intra_kind,
    ll_max_busbw_Bps,
    ring_latency_s,
    ring_protocol_factor,
)
from hetero_ns3.collectives.emit import Emitter, budget_slices, n_slices, split
from hetero_ns3.collectives.env import CollectiveEnv
from hetero_ns3.collectives.mesh import disjoint_cycles, mesh_nodes, path_from
from hetero_ns3.collectives.registry import register
from hetero_ns3.collectives.types import (
    ALL_GATHER,
    ALL_REDUCE,
    BROADCAST,
    REDUCE,
    REDUCE_SCATTER,
    CollectiveCall,
    Hop,
)

RING_OPS = frozenset({ALL_REDUCE, REDUCE_SCATTER, ALL_GATHER, BROADCAST, REDUCE})


def ring_orders(env: CollectiveEnv, group: tuple[str, ...], channels: int) -> list[list[int]]:
    """Per channel, the ring order as rank indices into ``group`` (see the module docstring)."""
    key = ("ring", group, channels)
    hit = env.cache.get(key)
    if hit is not None:
        return hit  # type: ignore[return-value]
    nodes = env.nodes_of(group)
    mesh = mesh_nodes(env, group)
    orders = []
    for c in range(channels):
        order: list[int] = []
        entry = None  # local position at which the previous node was left: a mesh node is entered on that rail
        for pos, local in enumerate(nodes):
            m = len(local)
            if m == 1:
                order.extend(local)
                entry = None
                continue
            if mesh[pos]:
                path = _mesh_path(m, c, entry)
                order.extend(local[i] for i in path)
                entry = path[-1]
                continue
            a, b = local[c % m], local[(c + 1) % m]
            if pos % 2:
                a, b = b, a
            order.append(a)
            order.extend(env.by_pcie_switch(group, [r for r in local if r != a and r != b], a, b))
            order.append(b)
            entry = local.index(b)
        orders.append(order)
    env.cache[key] = orders
    return orders


def _mesh_path(m: int, c: int, entry: int | None) -> list[int]:
    """Channel ``c``'s path through a mesh node of ``m`` ranks (local positions): along disjoint cycle
    ``c mod k`` from ``entry`` (the position at which the previous node was left, the same NIC rail; for
    the first node ``c mod m``) to the rank before it in the cycle."""
    cycles = disjoint_cycles(m)
    start = c % m if entry is None or entry >= m else entry
    return path_from(cycles[c % len(cycles)], start)


def one_rank_per_node(env: CollectiveEnv, gpus: Sequence[str]) -> bool:
    """Whether ``gpus`` span several nodes with one rank on each (NCCL's ppn = 1 latency rule)."""
    return len(gpus) > 1 and len({env.node_of(g) for g in gpus}) == len(gpus)


def ring_steps(op: str, n: int) -> int:
    """Sequential steps of a ring ``op`` over ``n`` ranks (NCCL's ``nsteps``, chains: ``n - 1`` hops)."""
    return 2 * (n - 1) if op == ALL_REDUCE else n - 1


def ring_edges(group: Sequence[str], orders: list[list[int]], op: str, size: int, channels: int, root: int = 0):
    """Directed edges (src, dst, payload bytes) of a ring ``op`` over ``channels`` channels."""
    n = len(group)
    per_ch = split(size, channels)
    edges: list[tuple[str, str, float]] = []
    for c in range(channels):
        order = orders[c % len(orders)]
        d = per_ch[c]
        if op in (BROADCAST, REDUCE):
            i0 = order.index(root)
            chain = order[i0:] + order[:i0]
            if op == REDUCE:
                chain = chain[::-1]
            edges += [(group[chain[h]], group[chain[h + 1]], d) for h in range(n - 1)]
        else:
            carried = d * ring_steps(op, n) / n
            edges += [(group[order[p]], group[order[(p + 1) % n]], carried) for p in range(n)]
    return edges


def ring_cost(
    env: CollectiveEnv, call: CollectiveCall, protocol: str, channels: int, orders: list[list[int]], size: int
) -> tuple[float, Hop | None]:
    """Cost-model time of a ring ``call`` with the given orders (s) and its bottleneck hop."""
    group = call.group
    n = len(group)
    if n < 2 or size <= 0:
        return 0.0, None
    op = call.op
    edges = ring_edges(group, orders, op, size, channels, call.root)
    t_bw, hop = bottleneck(env, edges)
    n_nodes = len(env.nodes_of(group))
    multi = n_nodes > 1
    one_per_node = n_nodes == n
    steps = ring_steps(op, n)
    inter = (2 * (n_nodes - 1) if op == ALL_REDUCE else n_nodes - 1) if multi else 0
    intra = intra_kind(env, ((s, d) for s, d, _ in edges))
    lat = ring_latency_s(env, protocol, steps, inter, intra, multi, multi and one_per_node)
    t_proto = t_bw / ring_protocol_factor(env, op, protocol, multi, one_per_node)
    if protocol == "LL":  # NCCL's llMaxBw: bus bytes (what each rank sends) at most at the LL cap
        bus_bytes = size if op in (BROADCAST, REDUCE) else size * steps / n
        t_proto = max(t_proto, bus_bytes / ll_max_busbw_Bps(env, group, n_nodes))
    return lat + t_proto, hop


def ll_cap_scales(
    em: Emitter, ring: Sequence[str], slice_bytes: int, cap_ch_Bps: float, share: Mapping[tuple[str, str], int]
) -> list[float]:
    """Per ring hop ``p -> p + 1``, the wire-byte scale that holds an LL slice to the channel's share of NCCL's
    ``llMaxBws`` (``cap_ch_Bps``, bus bytes/s): at least 1, else the slice's time at the cap over its time on
    the hop's bottleneck line rate, which ``share[(src, kind)]`` of the call's channels send over at once
    (every channel's hop out of a GPU over NVLink shares that GPU's NVLink; over the network, its NIC). NCCL's
    cap stands for the LL thread block's own throughput (each 8-byte word travels with a flag the receiver
    polls), not the links': the scaled flow occupies its links longer than its bytes would, as NVLS's
    efficiency does (``Emitter.flow``'s ``scale``)."""
    out = []
    n = len(ring)
    for p in range(n):
        src, dst = ring[p], ring[(p + 1) % n]
        path = em.env.path(src, dst)
        on_wire = em.wire_bytes(src, dst, slice_bytes) * share[(src, path.kind)] / (path.rate_bps / 8.0)
        out.append(max(1.0, slice_bytes / cap_ch_Bps / on_wire))
    return out


def _hop_share(em: Emitter, gpus: Sequence[str], orders: list[list[int]], channels: int) -> dict[tuple[str, str], int]:
    """Per (source GPU, path kind), how many of the ring's channels send from it over that kind at once."""
    share: dict[tuple[str, str], int] = {}
    n = len(gpus)
    for c in range(channels):
        order = orders[c % len(orders)]
        for p in range(n):
            src, dst = gpus[order[p]], gpus[order[(p + 1) % n]]
            key = (src, em.env.path(src, dst).kind)
            share[key] = share.get(key, 0) + 1
    return share


def emit_ring(
    em: Emitter,
    gpus: Sequence[str],
    orders: list[list[int]],
    op: str,
    size: int,
    ready0: Mapping[str, int],
    channels: int,
    root: int = 0,
) -> dict[str, list[int]]:
    """Emit a ring ``op`` over ``gpus``; ``ready0[g]`` is the task after which rank ``g`` may start.

    Returns, per GPU, the task ids after which the GPU's data is final (for chaining phases).
    """
    n = len(gpus)
    t = em.tuning
    done: dict[str, list[int]] = {g: [ready0[g]] for g in gpus}
    if n < 2 or size <= 0:
        return done
    per_ch = split(size, channels)
    opn = one_rank_per_node(em.env, gpus)
    ll_cap_ch = 0.0
    share: dict[tuple[str, str], int] = {}
    if em.protocol == "LL" and op not in (BROADCAST, REDUCE):
        cap = ll_max_busbw_Bps(em.env, tuple(gpus), len(em.env.nodes_of(tuple(gpus))))
        ll_cap_ch = cap / channels if math.isfinite(cap) else 0.0
        share = _hop_share(em, gpus, orders, channels)
    for c in range(channels):
        order = orders[c % len(orders)]
        d = per_ch[c]
        if op in (BROADCAST, REDUCE):
            _emit_chain(em, gpus, order, op, d, ready0, c, root, done, opn)
            continue
        segs = split(d, n)
        k_sl = n_slices(max(segs), t.slice_bytes, t.max_slices)
        k_sl = budget_slices(k_sl, channels * n * ring_steps(op, n), t.max_flows_per_call)
        slices = [split(s, k_sl) for s in segs]
        ring = [gpus[r] for r in order]
        largest = max(max(x) for x in slices)
        em.set_window_for_latency(((ring[p], ring[(p + 1) % n]) for p in range(n)), largest)
        lat = [em.step_latency_s(ring[p], ring[(p + 1) % n], "ring", opn) for p in range(n)]
        # Unequal step latencies (a multi-node ring with several ranks per node): each step's latency delays
        # its data on the edge (Emitter.delay). Equal ones fold into the receiver's reduce / step task on its
        # stream: the same times while the data arrives after the receiver's previous step, as it does when
        # every hop costs the same, and one task less per step.
        on_edge = max(lat) > min(lat)
        scale = ll_cap_scales(em, ring, largest, ll_cap_ch, share) if ll_cap_ch else [1.0] * n
        ready = [[ready0[ring[p]]] * k_sl for p in range(n)]
        steps = ring_steps(op, n)
        red_steps = n - 1 if op in (ALL_REDUCE, REDUCE_SCATTER) else 0
        for s in range(steps):
            new = [[0] * k_sl for _ in range(n)]
            for p in range(n):
                q = (p + 1) % n
                src, dst = ring[p], ring[q]
                seg = slices[(p - s) % n]
                rp = ready[p]
                out = new[q]
                r0 = ready0[src]
                for k in range(k_sl):
                    # a rank forwards only once it has joined the call: on channels other than 0 nothing else
                    # says so at step 1 (its reduction is the first task on that channel's stream)
                    f = em.flow(src, dst, seg[k], (rp[k], r0) if s else (rp[k],), c, scale=scale[p])
                    if on_edge:
                        if k == 0 and lat[p] > 0:  # the step's latency delays its data, not dst's stream
                            f = em.delay(dst, lat[p], (f,), c)
                        out[k] = em.reduce(dst, seg[k], (f, ready0[dst]), c) if s < red_steps else f
                    elif s < red_steps:
                        out[k] = em.reduce(dst, seg[k], (f, ready0[dst]), c, lat[p] if k == 0 else 0.0)
                    elif k == 0 and lat[p] > 0:
                        out[k] = em.compute(dst, lat[p], (f,), c, "step")
                    else:
                        out[k] = f
            ready = new
        for p in range(n):
            done[ring[p]].extend(ready[p])
    return done


def _emit_chain(
    em: Emitter,
    gpus: Sequence[str],
    order: list[int],
    op: str,
    d: int,
    ready0: Mapping[str, int],
    c: int,
    root: int,
    done: dict[str, list[int]],
    opn: bool = False,
) -> None:
    """Pipelined chain along ``order`` from the root (broadcast) or toward it (reduce)."""
    n = len(gpus)
    t = em.tuning
    i0 = order.index(root)
    chain = [gpus[r] for r in order[i0:] + order[:i0]]
    if op == REDUCE:
        chain = chain[::-1]
    k_sl = max(1, min(math.ceil(d / t.chain_min_slice_bytes) if d > 0 else 1, t.chain_slices_per_hop * (n - 1)))
    k_sl = budget_slices(k_sl, em.channels * (n - 1), t.max_flows_per_call)
    sl = split(d, k_sl)
    lat = [em.step_latency_s(chain[h], chain[h + 1], "ring", opn) for h in range(n - 1)]
    last = [ready0[g] for g in chain]
    for k in range(k_sl):
        prev = ready0[chain[0]]
        for h in range(n - 1):
            src, dst = chain[h], chain[h + 1]
            f = em.flow(src, dst, sl[k], (prev,), c)
            if op == REDUCE:
                prev = em.reduce(dst, sl[k], (f, ready0[dst]), c, lat[h] if k == 0 else 0.0)
            elif k == 0 and lat[h] > 0:
                prev = em.compute(dst, lat[h], (f,), c, "step")
            else:
                prev = f
            last[h + 1] = prev
    for h, g in enumerate(chain):
        done[g].append(last[h])


class Ring:
    """NCCL-like multi-channel ring (and chains for broadcast / reduce)."""

    name = "ring"
    ops = RING_OPS
    family = "ring"
    auto = True

    def check(self, call: CollectiveCall, env: CollectiveEnv) -> str | None:
        return None

    def cost(self, call: CollectiveCall, env: CollectiveEnv, protocol: str, channels: int):
        orders = ring_orders(env, call.group, channels)
        return ring_cost(env, call, protocol, channels, orders, call.size_bytes)

    def plan(self, em: Emitter) -> None:
        call = em.call
        orders = ring_orders(em.env, call.group, em.channels)
        ready0 = {g: em.entry(g) for g in call.group}
        emit_ring(em, call.group, orders, call.op, call.size_bytes, ready0, em.channels, call.root)


register(Ring())
