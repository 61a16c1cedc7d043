"""Direct all-to-all (and all-to-all-v): every rank sends its block to every other rank at once.

Each pair (i, j) gets ``min(channels, p2p_per_peer)`` queue pairs (flows) carrying its bytes; rank i
posts its sends in the order i+1, i+2, ... (mod n), as NCCL's grouped send/recv loop does, which
staggers the incast. A transfer waits for both ranks to join (a send completes only when the peer
has posted the matching receive).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from hetero_ns3.collectives.cost import Edge, bottleneck, ring_protocol_factor
from hetero_ns3.collectives.emit import Emitter, split
from hetero_ns3.collectives.env import CollectiveEnv
from hetero_ns3.collectives.registry import register
from hetero_ns3.collectives.types import ALL_TO_ALL, ALL_TO_ALL_V, CollectiveCall

Route = Callable[[int, int], list[tuple[int, int]]]
"""(src rank, dst rank) -> the rank-to-rank legs that carry the pair's bytes, in order."""


def pair_bytes(call: CollectiveCall) -> list[list[int]]:
    """Bytes from rank i to rank j (diagonal 0): ``size / n`` blocks, or the all_to_all_v matrix."""
    n = len(call.group)
    if call.op == ALL_TO_ALL_V and call.pair_bytes is not None:
        return [[0 if i == j else call.pair_bytes[i][j] for j in range(n)] for i in range(n)]
    block = split(call.size_bytes, n)
    return [[0 if i == j else block[j] for j in range(n)] for i in range(n)]


def direct_route(i: int, j: int) -> list[tuple[int, int]]:
    return [(i, j)]


def a2a_cost(call: CollectiveCall, env: CollectiveEnv, protocol: str, route: Route):
    group = call.group
    n = len(group)
    mat = pair_bytes(call)
    edges = [
        (group[a], group[b], mat[i][j]) for i in range(n) for j in range(n) if mat[i][j] > 0 for a, b in route(i, j)
    ]
    hops = max(len(route(i, j)) for i in range(n) for j in range(n) if i != j) if n > 1 else 1
    return exchange_cost(call, env, protocol, edges, hops)


def exchange_cost(call: CollectiveCall, env: CollectiveEnv, protocol: str, edges: Sequence[Edge], hops: int):
    """Time (s) and bottleneck hop of an exchange whose ``edges`` (src GPU, dst GPU, bytes) all move at once:
    the most loaded resource's transfer time over the ring protocol's efficiency, plus the ring family's base
    latency and ``hops`` hops of the slowest hop kind's latency (2 when blocks are relayed)."""
    edges = [e for e in edges if e[2] > 0]
    if not edges:
        return 0.0, None
    kinds = {env.path(a, b).kind for a, b, _ in edges}
    t_bw, hop = bottleneck(env, edges)
    tn = env.tuning
    n_nodes = len(env.nodes_of(call.group))
    worst = "network" if "network" in kinds else ("pcie" if "pcie" in kinds else "nvlink")
    lat = tn.base_latency_s["ring"][protocol] + hops * tn.hw_latency(worst, "ring", protocol)
    return lat + t_bw / ring_protocol_factor(env, call.op, protocol, n_nodes > 1, n_nodes == len(call.group)), hop


def exchange_entries(em: Emitter) -> tuple[int, list[int]]:
    """Queue pairs per peer and every rank's entry task (base latency plus its slowest peer hop's step latency)."""
    group = em.call.group
    n = len(group)
    qps = max(1, min(em.channels, em.tuning.p2p_per_peer))
    worst_lat = [
        max((em.step_latency_s(group[i], group[j], "ring") for j in range(n) if j != i), default=0.0) for i in range(n)
    ]
    return qps, [em.entry(group[i], worst_lat[i]) for i in range(n)]


def emit_a2a(em: Emitter, route: Route) -> None:
    call = em.call
    group = call.group
    n = len(group)
    mat = pair_bytes(call)
    qps, entry = exchange_entries(em)
    for i in range(n):
        for off in range(1, n):
            j = (i + off) % n
            if mat[i][j] <= 0:
                continue
            legs = route(i, j)
            for c, nb in enumerate(split(mat[i][j], qps)):
                prev: tuple[int, ...] = (entry[i], entry[j])
                for a, b in legs:
                    f = em.flow(group[a], group[b], nb, prev, c, "a2a")
                    prev = (f,)


class DirectAllToAll:
    """Pairwise all-to-all: every pair's block on its own queue pairs, all at once."""

    name = "direct"
    ops = frozenset({ALL_TO_ALL, ALL_TO_ALL_V})
    family = "ring"
    auto = True

    def check(self, call: CollectiveCall, env: CollectiveEnv) -> str | None:
        return None if call.op in self.ops else "direct implements all_to_all and all_to_all_v"

    def cost(self, call: CollectiveCall, env: CollectiveEnv, protocol: str, channels: int):
        return a2a_cost(call, env, protocol, direct_route)

    def plan(self, em: Emitter) -> None:
        emit_a2a(em, direct_route)


register(DirectAllToAll())
