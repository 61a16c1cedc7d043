"""Rings on a fully connected scale-up fabric (``mesh`` nodes: AMD Infinity Fabric / xGMI).

On an NVSwitch every ring order crosses the same GPU ports, so NCCL's channels may all follow one
order. On a mesh each ring hop is its own GPU-to-GPU link: channels that share an order share its
``m`` links and leave the other ``m (m - 2)`` directed links idle. RCCL's rings on an 8-GPU MI300X
platform use all seven links of every GPU (the platform's aggregate, 7 x 45-48 GB/s, is what its
all-reduce reaches; ROCm blog "Understanding RCCL Bandwidth and xGMI Performance on AMD Instinct
MI300X", 2025). The planner does the same with a set of *arc-disjoint directed Hamiltonian cycles*
of the complete directed graph on the node's ranks: ring ``c`` follows cycle ``c mod k``, and the
channel count is rounded up to a multiple of ``k`` (:func:`round_channels`), so every link carries
the same share of the data.

How many there are: ``m - 1`` (every directed link used once) for every ``m`` except 4 and 6, where
the complete directed graph has no such decomposition (Tillson, "A Hamiltonian decomposition of
K*_2m, 2m >= 8", J. Combin. Theory B 29, 1980) and the largest set has 2 and 4 cycles. Found by a
depth-first search over cycles through rank 0 (ordered by their second rank, which makes sets
unique), deterministic and cached per rank count: under 1 ms for m = 8, 0.47 s for m = 6 (the search
exhausts the space: no fifth cycle exists), 0.33 s for m = 16 (measured on this project's 2-core machine);
beyond a budget of search steps the largest set found so far is used (never fewer than one cycle: the
identity order).
"""

from __future__ import annotations

import functools
from collections.abc import Iterator, Sequence
from typing import Protocol

SEARCH_BUDGET = 200_000
"""Search steps (cycle extensions) before :func:`disjoint_cycles` settles for the best set so far."""


def _cycles_avoiding(m: int, used: set[tuple[int, int]]) -> Iterator[list[int]]:
    """Directed Hamiltonian cycles ``0 -> ... -> 0`` on ``m`` ranks that avoid the arcs in ``used``."""
    path = [0]
    seen = [False] * m
    seen[0] = True

    def extend() -> Iterator[list[int]]:
        u = path[-1]
        if len(path) == m:
            if (u, 0) not in used:
                yield list(path)
            return
        for v in range(1, m):
            if not seen[v] and (u, v) not in used:
                seen[v] = True
                path.append(v)
                yield from extend()
                path.pop()
                seen[v] = False

    yield from extend()


@functools.lru_cache(maxsize=64)
def disjoint_cycles(m: int) -> tuple[tuple[int, ...], ...]:
    """A largest found set of arc-disjoint directed Hamiltonian cycles on ranks ``0 .. m-1``.

    Each cycle is a rank order starting at 0 (the ring closes from its last rank back to 0).
    ``m = 1`` gives ``((0,),)``; ``m = 2`` the one 2-cycle; ``m = 3`` the two orientations.
    """
    if m < 1:
        raise ValueError(f"a ring needs at least one rank, got m = {m}")
    if m <= 2:
        return (tuple(range(m)),)
    target = m - 1
    best: list[list[int]] = []
    chosen: list[list[int]] = []
    used: set[tuple[int, int]] = set()
    steps = 0

    def search() -> bool:
        nonlocal best, steps
        if len(chosen) > len(best):
            best = [list(c) for c in chosen]
        if len(best) >= target:
            return True
        for cyc in _cycles_avoiding(m, used):
            steps += 1
            if steps > SEARCH_BUDGET:
                return True
            if chosen and cyc[1] <= chosen[-1][1]:
                continue  # each set once: cycles in increasing order of their first hop out of 0
            arcs = [(cyc[i], cyc[(i + 1) % m]) for i in range(m)]
            used.update(arcs)
            chosen.append(cyc)
            if search():
                return True
            chosen.pop()
            used.difference_update(arcs)
        return False

    search()
    return tuple(tuple(c) for c in best) or (tuple(range(m)),)


class _Env(Protocol):
    cache: dict

    def direct(self, src: str, dst: str) -> bool: ...

    def nodes_of(self, group: tuple[str, ...]) -> list[list[int]]: ...


def is_mesh(env: _Env, gpus: Sequence[str]) -> bool:
    """Whether every ordered pair of ``gpus`` (two or more) is joined by a direct link of its own."""
    return len(gpus) >= 2 and all(env.direct(a, b) for a in gpus for b in gpus if a != b)


def mesh_nodes(env: _Env, group: tuple[str, ...]) -> list[bool]:
    """Per node of ``group`` (``env.nodes_of`` order): whether its ranks, two or more, form a mesh."""
    key = ("mesh-nodes", group)
    hit = env.cache.get(key)
    if hit is None:
        hit = env.cache[key] = [is_mesh(env, [group[i] for i in local]) for local in env.nodes_of(group)]
    return list(hit)


def mesh_rings(env: _Env, group: tuple[str, ...]) -> int:
    """Disjoint rings per mesh node of the group (0 when no node's ranks form a mesh).

    With mesh nodes of different rank counts, the smallest count (the rounding of :func:`round_channels`
    then evens out the links of those nodes at least). Nodes that are not meshes (NVSwitch, PCIe) in the
    same group keep their usual ring orders.
    """
    nodes = env.nodes_of(group)
    counts = [len(disjoint_cycles(len(local))) for local, m in zip(nodes, mesh_nodes(env, group), strict=True) if m]
    return min(counts) if counts else 0


def round_channels(channels: int, rings: int) -> int:
    """``channels`` rounded up to a multiple of ``rings`` (each disjoint ring gets as many channels)."""
    if rings <= 1:
        return channels
    return -(-channels // rings) * rings


def path_from(cycle: tuple[int, ...], entry: int) -> list[int]:
    """The cycle's ranks as a path that starts at ``entry`` (and ends at the rank before it in the cycle)."""
    i = cycle.index(entry)
    return list(cycle[i:] + cycle[:i])
