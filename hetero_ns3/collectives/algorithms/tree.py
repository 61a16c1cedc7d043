"""Double binary tree across nodes with an intra-node chain (NCCL's tree all-reduce).

Across nodes, two binary trees: tree 0 is the in-order binary tree over the nodes (root = middle
node); tree 1 is the same shape over the node list shifted by one, so that most leaves of one tree
are inner nodes of the other and both trees together load every node's NIC about equally. Inside a
node the ranks form a chain whose head talks to the network; tree 1 rotates the chain by one so a
different GPU (and NIC) heads it. Channels alternate between the trees (channel c uses tree c mod 2)
and each carries its share of the buffer in pipelined slices: reduce up to the root (a reduction on
every inner rank), then broadcast down.
"""

from __future__ import annotations

import math

from hetero_ns3.collectives.cost import (
    bottleneck,
    intra_kind,
    ll_max_busbw_Bps,
    tree_latency_s,
    tree_protocol_factor,
)
from hetero_ns3.collectives.emit import Emitter, budget_slices, split
from hetero_ns3.collectives.env import CollectiveEnv
from hetero_ns3.collectives.registry import register
from hetero_ns3.collectives.types import ALL_REDUCE, CollectiveCall


class RankTree:
    """A tree over rank indices: ``parent[r]`` (-1 at the root), ``children[r]``, traversal orders."""

    def __init__(self, n: int, parent: list[int]) -> None:
        self.parent = parent
        self.children: list[list[int]] = [[] for _ in range(n)]
        self.root = parent.index(-1)
        for r, p in enumerate(parent):
            if p >= 0:
                self.children[p].append(r)
        self.pre: list[int] = []
        depth = [0] * n
        stack = [self.root]
        while stack:
            r = stack.pop()
            self.pre.append(r)
            for ch in reversed(self.children[r]):
                depth[ch] = depth[r] + 1
                stack.append(ch)
        self.post = self.pre[::-1]  # children before parents
        self.depth = max(depth)


def _inorder_parents(count: int) -> list[int]:
    """Parent position of each position 0..count-1 in the in-order (balanced) binary tree."""
    parent = [-1] * count

    def build(lo: int, hi: int, up: int) -> None:
        if lo > hi:
            return
        mid = (lo + hi) // 2
        parent[mid] = up
        build(lo, mid - 1, mid)
        build(mid + 1, hi, mid)

    build(0, count - 1, -1)
    return parent


def double_tree(env: CollectiveEnv, group: tuple[str, ...], t: int) -> RankTree:
    """Tree ``t`` (0 or 1) of the double binary tree over ``group`` (rank indices)."""
    key = ("tree", group, t)
    hit = env.cache.get(key)
    if hit is not None:
        return hit  # type: ignore[return-value]
    nodes = env.nodes_of(group)
    n_nodes = len(nodes)
    shifted = [nodes[(i + t) % n_nodes] for i in range(n_nodes)]
    chains = []
    for local in shifted:
        s = t % len(local)
        chains.append(local[s:] + local[:s])
    parent = [-1] * len(group)
    node_parent = _inorder_parents(n_nodes)
    for pos, chain in enumerate(chains):
        up = node_parent[pos]
        parent[chain[0]] = chains[up][0] if up >= 0 else -1
        for i in range(1, len(chain)):
            parent[chain[i]] = chain[i - 1]
    tree = RankTree(len(group), parent)
    env.cache[key] = tree
    return tree


class Tree:
    """NCCL-like double binary tree all-reduce."""

    name = "tree"
    ops = frozenset({ALL_REDUCE})
    family = "tree"
    auto = True

    def check(self, call: CollectiveCall, env: CollectiveEnv) -> str | None:
        return None if call.op == ALL_REDUCE else "tree implements all_reduce only"

    def _trees(self, env: CollectiveEnv, call: CollectiveCall, channels: int) -> list[RankTree]:
        return [double_tree(env, call.group, t) for t in range(min(2, channels))]

    def cost(self, call: CollectiveCall, env: CollectiveEnv, protocol: str, channels: int):
        group = call.group
        n = len(group)
        if n < 2 or call.size_bytes <= 0:
            return 0.0, None
        trees = self._trees(env, call, channels)
        per_ch = split(call.size_bytes, channels)
        edges = []
        for c in range(channels):
            tr = trees[c % len(trees)]
            for r, p in enumerate(tr.parent):
                if p >= 0:
                    edges.append((group[r], group[p], per_ch[c]))
                    edges.append((group[p], group[r], per_ch[c]))
        t_bw, hop = bottleneck(env, edges)
        nodes = env.nodes_of(group)
        ppn = max(len(x) for x in nodes)
        intra = intra_kind(env, ((s, d) for s, d, _ in edges))
        lat = tree_latency_s(env, protocol, ppn, len(nodes), intra)
        t_proto = t_bw / tree_protocol_factor(env, protocol, len(nodes) > 1)
        if protocol == "LL":  # NCCL's llMaxBw on the bus bandwidth; tree algbw = busbw / 2
            t_proto = max(t_proto, 2 * call.size_bytes / ll_max_busbw_Bps(env, group, len(nodes)))
        return lat + t_proto, hop

    def plan(self, em: Emitter) -> None:
        call, env, t = em.call, em.env, em.tuning
        group = call.group
        if len(group) < 2 or call.size_bytes <= 0:
            for g in group:
                em.entry(g)
            return
        trees = self._trees(env, call, em.channels)
        entry = [em.entry(g) for g in group]
        lat_cache: dict[tuple[int, int], float] = {}

        def lat(a: int, b: int) -> float:
            v = lat_cache.get((a, b))
            if v is None:
                v = lat_cache[(a, b)] = em.step_latency_s(group[a], group[b], "tree")
            return v

        for c, d in enumerate(split(call.size_bytes, em.channels)):
            tr = trees[c % len(trees)]
            k_sl = math.ceil(d / t.chain_min_slice_bytes) if d > 0 else 1
            k_sl = max(1, min(k_sl, t.chain_slices_per_hop * max(1, tr.depth)))
            k_sl = budget_slices(k_sl, em.channels * 2 * (len(group) - 1), t.max_flows_per_call)
            em.set_window_for_slices(math.ceil(d / k_sl))
            for k, nb in enumerate(split(d, k_sl)):
                up_val = list(entry)
                up_flow: dict[int, int] = {}
                for r in tr.post:
                    kids = tr.children[r]
                    if kids:
                        # the first slice's hop latency delays its data (Emitter.delay), not r's stream: the
                        # next slice's reduction and the down phase's kernels on r are not held behind it
                        deps = [
                            em.delay(group[r], lat(x, r), (up_flow[x],), c) if k == 0 and lat(x, r) > 0 else up_flow[x]
                            for x in kids
                        ]
                        deps.append(entry[r])
                        up_val[r] = em.reduce(group[r], nb * len(kids), deps, c)
                    p = tr.parent[r]
                    if p >= 0:
                        up_flow[r] = em.flow(group[r], group[p], nb, (up_val[r],), c, "up")
                have = {tr.root: up_val[tr.root]}
                for r in tr.pre:
                    for x in tr.children[r]:
                        f = em.flow(group[r], group[x], nb, (have[r],), c, "down")
                        if k == 0 and lat(r, x) > 0:
                            f = em.delay(group[x], lat(r, x), (f,), c)
                        have[x] = f
                        em.touch(group[x], f)


register(Tree())
