"""Hierarchical all-reduce / all-gather / reduce-scatter: intra-node fabric first, then rail-aligned rings.

All-reduce of S bytes over N nodes with m ranks each (m equal on every node):

1. reduce-scatter inside every node (ring over NVLink / PCIe): local rank j ends with shard j (S/m);
2. all-reduce of shard j across nodes on the ring of the ranks with local index j (one ring per
   rail, so each inter-node ring stays on its NIC rail);
3. all-gather inside every node.

All-gather runs the inter-node rail rings first (each rank gathers its rail's shards), then the
intra-node all-gather; reduce-scatter runs intra-node first, then the rail rings. Phases are
sequential per rank: a rank starts phase k+1 once its own data from phase k is final.
"""

from __future__ import annotations

from dataclasses import replace

from hetero_ns3.collectives.algorithms.ring import emit_ring, ring_cost, ring_orders
from hetero_ns3.collectives.emit import Emitter, split
from hetero_ns3.collectives.env import CollectiveEnv
from hetero_ns3.collectives.registry import register
from hetero_ns3.collectives.types import ALL_GATHER, ALL_REDUCE, REDUCE_SCATTER, CollectiveCall, Hop


def _phases(call: CollectiveCall, nodes: list[list[int]]) -> list[tuple[str, str, list[tuple[int, ...]], list[int]]]:
    """(op, scope, subgroups as rank tuples, size per subgroup) for each phase."""
    m = len(nodes[0])
    s = call.size_bytes
    intra = [tuple(x) for x in nodes]
    rails = [tuple(x[j] for x in nodes) for j in range(m)]
    shard = split(s, m)
    multi = len(nodes) > 1
    ph: list[tuple[str, str, list[tuple[int, ...]], list[int]]] = []
    if call.op == ALL_REDUCE:
        if m > 1:
            ph.append((REDUCE_SCATTER, "intra", intra, [s] * len(intra)))
        if multi:
            ph.append((ALL_REDUCE, "inter", rails, shard))
        if m > 1:
            ph.append((ALL_GATHER, "intra", intra, [s] * len(intra)))
    elif call.op == REDUCE_SCATTER:
        if m > 1:
            ph.append((REDUCE_SCATTER, "intra", intra, [s] * len(intra)))
        if multi:
            ph.append((REDUCE_SCATTER, "inter", rails, shard))
    else:
        if multi:
            ph.append((ALL_GATHER, "inter", rails, shard))
        if m > 1:
            ph.append((ALL_GATHER, "intra", intra, [s] * len(intra)))
    return ph


class Hierarchical:
    """Intra-node over NVLink/PCIe, inter-node over rail-aligned rings."""

    name = "hierarchical"
    ops = frozenset({ALL_REDUCE, REDUCE_SCATTER, ALL_GATHER})
    family = "ring"
    auto = False

    def check(self, call: CollectiveCall, env: CollectiveEnv) -> str | None:
        if call.op not in self.ops:
            return f"hierarchical implements {sorted(self.ops)}"
        sizes = {len(x) for x in env.nodes_of(call.group)}
        if len(sizes) != 1:
            return f"hierarchical needs the same number of ranks on every node (got {sorted(sizes)})"
        return None

    def cost(self, call: CollectiveCall, env: CollectiveEnv, protocol: str, channels: int):
        group = call.group
        if len(group) < 2 or call.size_bytes <= 0:
            return 0.0, None
        total = 0.0
        worst: tuple[float, Hop | None] = (-1.0, None)
        for op, _, subs, sizes in _phases(call, env.nodes_of(group)):
            phase_t = 0.0
            for sub, size in zip(subs, sizes, strict=True):
                sg = tuple(group[r] for r in sub)
                sc = replace(call, op=op, group=sg, size_bytes=size, root=0)
                t, hop = ring_cost(env, sc, protocol, channels, ring_orders(env, sg, channels), size)
                phase_t = max(phase_t, t)
                if hop is not None and t > worst[0]:
                    worst = (t, hop)
            total += phase_t
        return total, worst[1]

    def plan(self, em: Emitter) -> None:
        call, env = em.call, em.env
        group = call.group
        ready = {g: em.entry(g) for g in group}
        for op, _, subs, sizes in _phases(call, env.nodes_of(group)):
            nxt = dict(ready)
            for sub, size in zip(subs, sizes, strict=True):
                sg = tuple(group[r] for r in sub)
                orders = ring_orders(env, sg, em.channels)
                done = emit_ring(em, sg, orders, op, size, {g: ready[g] for g in sg}, em.channels)
                for g, ids in done.items():
                    nxt[g] = (
                        ids[0] if len(ids) == 1 else em.b.add_barrier(g, ids, em.label(0, f"{op} done"), em.category, 0)
                    )
            ready = nxt
        for g, tid in ready.items():
            em.touch(g, tid)


register(Hierarchical())
