"""Which collective calls have the network to themselves: directed links of routes, per rank group.

A call's traffic is *isolated* when every directed link any of its flows may take (every equal-cost
next hop of the routing tables both backends use, so the answer does not depend on the ECMP hash) is
taken by no flow of another rank group. Groups are keyed by (category, set of GPUs): calls of one
group are one communicator, which :mod:`hetero_ns3.plan.fuse` serialises. With ``switches=True``
(a backend whose switches have state shared between ports: the packet level's shared buffers, PFC)
the switches on the routes must not be shared either. Pure functions of the routes; no simulation.

:func:`calls_ordered` checks the other half of a group's claim to its links: that its calls never overlap in time
(each follows the previous one on every rank through op dependencies).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Hashable, Iterable, Mapping, Sequence

from hetero_ns3.collectives.env import CollectiveEnv
from hetero_ns3.topology.graph import SWITCH

#: A directed link: (link index, 0 for a -> b, 1 for b -> a).
DirLink = tuple[int, int]

#: Ancestors one search of :func:`calls_ordered` may visit per rank and pair of calls before it gives up.
ORDER_BUDGET = 256


def route_links(env: CollectiveEnv, src: str, dst: str) -> tuple[DirLink, ...]:
    """Every directed link on any least-cost route from ``src`` to ``dst``, in walk order (no repeats)."""
    graph = env.graph
    index, links = graph._index, graph.links
    d = graph.index(dst)
    table = env.next_hop_table(d)
    out: dict[DirLink, None] = {}
    seen = {graph.index(src)}
    stack = [graph.index(src)]
    while stack:
        u = stack.pop()
        for li in table[u]:
            link = links[li]
            a = index[link.a]
            v, direction = (index[link.b], 0) if a == u else (a, 1)
            out[(li, direction)] = None
            if v != d and v not in seen:
                seen.add(v)
                stack.append(v)
    return tuple(out)


def pair_links(env: CollectiveEnv, pairs: Iterable[tuple[str, str]]) -> frozenset[DirLink]:
    """The union of :func:`route_links` over ``pairs`` (memoised on ``env.cache``)."""
    memo = env.cache.setdefault("isolation.route_links", {})
    assert isinstance(memo, dict)
    out: set[DirLink] = set()
    for p in pairs:
        got = memo.get(p)
        if got is None:
            got = memo[p] = route_links(env, *p)
        out.update(got)
    return frozenset(out)


def switches_of(env: CollectiveEnv, links: Iterable[DirLink]) -> frozenset[int]:
    """Switch node indices at either end of ``links``."""
    graph = env.graph
    out = set()
    for li, _ in links:
        link = graph.links[li]
        for end in (link.a, link.b):
            k = graph.index(end)
            if graph.nodes[k].kind == SWITCH:
                out.add(k)
    return frozenset(out)


def isolated_groups(
    env: CollectiveEnv, links_of: Mapping[Hashable, frozenset[DirLink]], *, switches: bool
) -> set[Hashable]:
    """The groups of ``links_of`` (group -> directed links of all its calls' flows) that share no
    directed link (and with ``switches``, no switch) with any other group. A group without links is
    not listed (nothing to isolate)."""
    owners: dict[object, set[Hashable]] = {}
    for gid, links in links_of.items():
        items: Iterable[object] = links
        if switches:
            items = [*links, *(("switch", s) for s in switches_of(env, links))]
        for item in items:
            owners.setdefault(item, set()).add(gid)
    shared = {gid for own in owners.values() if len(own) > 1 for gid in own}
    return {gid for gid, links in links_of.items() if links and gid not in shared}


def calls_ordered(
    rank: Sequence[int], dep_ptr: Sequence[int], dep_pos: Sequence[int], calls: Sequence[Sequence[int]]
) -> bool:
    """Whether each of a group's calls follows the previous one on every rank through op dependencies.

    ``calls``: the member op positions of each call, in the order of the calls' smallest op ids; ``rank``,
    ``dep_ptr``, ``dep_pos``: the op table's columns (rank per op, the dependencies of op ``i`` at
    ``dep_pos[dep_ptr[i]:dep_ptr[i + 1]]``). For consecutive calls X, Y each member op of Y must have X's member
    on its rank among its ancestors. Then every rank enters Y after its part of X completed, so two calls of the
    group never share the links in time. Two searches, each of at most :data:`ORDER_BUDGET` ops per member, and
    either may find it: depth first over every dependency, then breadth first over the member's own rank's
    dependencies only, which reaches the previous call in a few steps of the rank's stream chain where the first
    wanders through other ranks (an interleaved pipeline schedule's forward and backward passes lie between).
    """
    for prev, cur in zip(calls, calls[1:], strict=False):
        target = {rank[m]: m for m in prev}
        for y in cur:
            want = target.get(rank[y])
            if want is None:
                return False
            if not (_reaches(dep_ptr, dep_pos, y, want) or _reaches(dep_ptr, dep_pos, y, want, rank)):
                return False
    return True


def _reaches(
    dep_ptr: Sequence[int], dep_pos: Sequence[int], y: int, want: int, rank: Sequence[int] | None = None
) -> bool:
    """Whether op ``want`` is an ancestor of op ``y`` within :data:`ORDER_BUDGET` visited ops: depth first over
    every dependency, or, given ``rank``, breadth first over the dependencies on ``y``'s rank."""
    ranks: Sequence[int] = () if rank is None else rank
    own = None if rank is None else rank[y]
    first = [d for d in dep_pos[dep_ptr[y] : dep_ptr[y + 1]] if own is None or ranks[d] == own]
    if want in first:
        return True
    seen = set(first)
    todo = deque(first)
    take = todo.pop if own is None else todo.popleft
    while todo and len(seen) <= ORDER_BUDGET:
        u = take()
        for d in dep_pos[dep_ptr[u] : dep_ptr[u + 1]]:
            if d == want:
                return True
            if d not in seen and (own is None or ranks[d] == own):
                seen.add(d)
                todo.append(d)
    return False
