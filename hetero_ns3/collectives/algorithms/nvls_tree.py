"""NVLS-Tree: NCCL's all-reduce across NVLS-capable nodes (NVLS inside, a tree over the NICs).

NCCL 2.30 (``src/device/all_reduce.h``, NVLS-Tree branch; ``src/graph/tuning.cc``): inside each node
the NVSwitch reduces every head's chunk across the node's GPUs (as NVLS does), the heads of all
nodes that own the same chunk all-reduce it over the network along a tree (reduce up, broadcast
down), and each head's ``multimem.st`` multicasts the final chunk to the GPUs of its node. Pure
NVLS across nodes needs IB SHARP (CollNet), which is not modelled; without it NCCL runs NVLS-Tree.

Planned per round as NVLS (see :mod:`.nvls`): reads of every GPU to its node's switch, a reduction
at the switch, results to the heads (every rank of a node of up to 32, else 32 of them:
:func:`.nvls.nvls_heads`); then, per head index ``j``, a binary tree over the nodes (the in-order tree
over the node list, shifted by one on odd rounds as NCCL's double binary tree does): each head
reduces its children's chunks (a memory-bound kernel on the GPU, as the tree algorithm's) and sends
the sum up; the root's sum is sent down; last, each head stores its final chunk and the switch
multicasts the round to the node's GPUs.

Cost model: latency ``[nvls].latency_us + 2 floor(log2 nodes) x [nvls].tree_net_latency_us``
(NCCL's NVLS-Tree latency with baseLat 0), bandwidth the slower of the NVLS ports (as NVLS) and the
tree's NIC loads (:func:`~hetero_ns3.collectives.cost.bottleneck`), plus ``FILL_ROUNDS`` rounds
of pipeline fill. NCCL's per-channel cap ``perChMaxNVLSTreeBws`` is a tuning-model cap that our graph-based
bottleneck replaces (cited in tuning.toml, not applied).
"""

from __future__ import annotations

import math

from hetero_ns3.collectives.algorithms.nvls import nvls_heads, nvls_rounds, nvls_support, port_bytes, wire_scale
from hetero_ns3.collectives.algorithms.tree import _inorder_parents
from hetero_ns3.collectives.cost import bottleneck
from hetero_ns3.collectives.emit import Emitter, split
from hetero_ns3.collectives.env import CollectiveEnv
from hetero_ns3.collectives.registry import register
from hetero_ns3.collectives.types import ALL_REDUCE, CollectiveCall, Hop

#: Pipeline fill of an NVLS-Tree call in rounds, as the flow-level replay of its plan shows (a round
#: is a chain of six transfers: read, result, tree up, tree down, store, multicast, with
#: ``inflight_slices`` rounds in flight): 2.3-2.6 rounds at 4-32 rounds on 2 x 8 H100.
FILL_ROUNDS = 2.5


def node_trees(n_nodes: int) -> list[tuple[list[int], list[int]]]:
    """The two trees over node positions: per tree, (parent position per position, post-order)."""
    out = []
    base = _inorder_parents(n_nodes)
    for t in range(2 if n_nodes > 2 else 1):
        # Tree t: the in-order tree over the node list shifted by t (position p holds node (p + t) % n).
        parent = [-1] * n_nodes
        for p, up in enumerate(base):
            parent[(p + t) % n_nodes] = (up + t) % n_nodes if up >= 0 else -1
        children: list[list[int]] = [[] for _ in range(n_nodes)]
        for x, up in enumerate(parent):
            if up >= 0:
                children[up].append(x)
        root = parent.index(-1)
        pre, stack = [], [root]
        while stack:
            x = stack.pop()
            pre.append(x)
            stack.extend(reversed(children[x]))
        out.append((parent, pre[::-1]))
    return out


def tree_latency_s(env: CollectiveEnv, n_nodes: int) -> float:
    nv = env.tuning.nvls
    assert nv is not None
    levels = int(math.log2(n_nodes)) if n_nodes > 1 else 0
    return nv.latency_s + 2 * levels * nv.tree_net_latency_s


class NvlsTree:
    """NCCL's NVLS-Tree all-reduce over several NVLS-capable nodes."""

    name = "nvls_tree"
    ops = frozenset({ALL_REDUCE})
    family = "nvls"
    auto = True

    def _layout(self, call: CollectiveCall, env: CollectiveEnv) -> list[list[str]]:
        return [[call.group[r] for r in local] for local in env.nodes_of(call.group)]

    def check(self, call: CollectiveCall, env: CollectiveEnv) -> str | None:
        if call.op != ALL_REDUCE:
            return "nvls_tree implements all_reduce only"
        nodes = self._layout(call, env)
        if len(nodes) < 2:
            return "nvls_tree needs several nodes (one node: nvls)"
        if len({len(x) for x in nodes}) > 1:
            return "nvls_tree needs the same number of ranks on every node"
        if len(nodes[0]) < 2:
            return "nvls_tree needs at least 2 ranks per node (the switch reduces across a node's GPUs)"
        return nvls_support(env, call.group)

    def cost(self, call: CollectiveCall, env: CollectiveEnv, protocol: str, channels: int):
        nv = env.tuning.nvls
        if nv is None or call.size_bytes <= 0:
            return 0.0, None
        if protocol != "Simple":
            return math.inf, None
        nodes = self._layout(call, env)
        m, k, size = len(nodes[0]), len(nodes), call.size_bytes
        heads = [nvls_heads(x, nv.max_heads) for x in nodes]
        h = len(heads[0])
        chunk = nv.chunk(size, h, tree=True, nodes=k)
        worst_t, hop = 0.0, None
        out_b, in_b = port_bytes(ALL_REDUCE, size, m, h)
        for g in call.group:
            ep = env.nvls_endpoint(g)
            assert ep is not None
            rate = env.hop_bandwidth_Bps(g, ep) / wire_scale(env, g, chunk)
            t = max(out_b, in_b) / rate
            if t > worst_t:
                worst_t, hop = t, Hop(g, ep, rate, env.path(g, ep).kind)
        trees = node_trees(k)
        edges = []
        for parent, _ in trees:
            share = size / h / len(trees)
            for x, up in enumerate(parent):
                if up >= 0:
                    for j in range(h):
                        edges.append((heads[x][j], heads[up][j], share))
                        edges.append((heads[up][j], heads[x][j], share))
        t_net, net_hop = bottleneck(env, edges)
        if t_net > worst_t:
            worst_t, hop = t_net, net_hop
        rounds = nvls_rounds(env, size, h, chunk)
        return tree_latency_s(env, k) + worst_t * (1 + FILL_ROUNDS / rounds), hop

    def plan(self, em: Emitter) -> None:
        call, env = em.call, em.env
        nv = env.tuning.nvls
        assert nv is not None
        nodes = self._layout(call, env)
        k = len(nodes)
        ready = {g: em.entry(g, tree_latency_s(env, k)) for g in call.group}
        if call.size_bytes <= 0:
            return
        hg = [nvls_heads(x, nv.max_heads) for x in nodes]  # per node, its head GPUs
        h = len(hg[0])
        chunk = nv.chunk(call.size_bytes, h, tree=True, nodes=k)
        eps = [env.nvls_endpoint(x[0]) for x in nodes]
        for ep in eps:
            assert ep is not None
            em.b.endpoint(ep)
        scale = {g: wire_scale(env, g, chunk) for g in call.group}
        trees = node_trees(k)
        rounds = nvls_rounds(env, call.size_bytes, h, chunk)
        ch = 0
        for r, part in enumerate(split(call.size_bytes, rounds)):
            heads = split(part, h)  # head j's chunk of this round
            have: list[list[int]] = []
            for x, gpus in enumerate(nodes):
                ep = eps[x]
                assert ep is not None  # checked when registering the endpoints above
                reads = [em.flow(g, ep, part, (ready[g],), ch, "nvls-read", scale[g]) for g in gpus]
                red = em.b.add_barrier(ep, reads, label=em.label(ch, "nvls-reduce"), category=em.category, channel=ch)
                have.append(
                    [em.flow(ep, g, heads[j], (red,), ch, "nvls-result", scale[g]) for j, g in enumerate(hg[x])]
                )
            parent, post = trees[r % len(trees)]
            children: list[list[int]] = [[] for _ in range(k)]
            for x, up in enumerate(parent):
                if up >= 0:
                    children[up].append(x)
            for j in range(h):
                up_flow: dict[int, int] = {}
                val = [have[x][j] for x in range(k)]
                for x in post:
                    g = hg[x][j]
                    if children[x]:
                        deps = [up_flow[c] for c in children[x]] + [val[x]]
                        val[x] = em.reduce(g, heads[j] * len(children[x]), deps, ch)
                    if parent[x] >= 0:
                        up_flow[x] = em.flow(g, hg[parent[x]][j], heads[j], (val[x],), ch, "tree-up")
                final = list(val)
                for x in reversed(post):  # pre-order: parents before children
                    for c in children[x]:
                        final[c] = em.flow(hg[x][j], hg[c][j], heads[j], (final[x],), ch, "tree-down")
                for x in range(k):
                    have[x][j] = final[x]
            for x, gpus in enumerate(nodes):
                ep = eps[x]
                assert ep is not None  # checked when registering the endpoints above
                stores = [
                    em.flow(g, ep, heads[j], (have[x][j],), ch, "nvls-store", scale[g]) for j, g in enumerate(hg[x])
                ]
                mc = em.b.add_barrier(
                    ep, stores, label=em.label(ch, "nvls-multicast"), category=em.category, channel=ch
                )
                for g in gpus:
                    em.flow(ep, g, part, (mc,), ch, "nvls-multicast", scale[g])


register(NvlsTree())
