"""Which collective calls have the network to themselves: directed links of routes, per rank group.

A call's traffic is *isolated* when every directed link any of its flows may take (every equal-cost
next hop of the routing tables both backends use, so the answer does not depend on the ECMP hash) is
taken by no flow of another rank group. Groups are keyed by (category, set of GPUs): calls of one
group are one communicator, which :mod:`hetero_ns3.plan.fuse` serialises. With ``switches=True``
(a backend whose switches have state shared between ports: the packet level's shared buffers, PFC)
the switches on the routes must not be shared either. Pure functions of the routes; no simulation.
"""

from __future__ import annotations

from collections.abc import Hashable, Iterable, Mapping

from hetero_ns3.collectives.env import CollectiveEnv
from hetero_ns3.topology.graph import SWITCH

#: A directed link: (link index, 0 for a -> b, 1 for b -> a).
DirLink = tuple[int, int]


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
