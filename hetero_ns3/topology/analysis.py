"""Graph measures: bisection bandwidth (max-flow) and ECMP path counts.

Bisection bandwidth here is the max-flow, over the network links only, from the first half of the
network endpoints to the second half (endpoints: NICs of a cluster graph grouped by node in node
order, or the hosts of a plain graph in order). For fat-trees and leaf-spines with endpoints
numbered switch by switch this is the classic worst-case bisection, whose closed forms are in
docs/topologies.md; the tests compare the two.
"""

from __future__ import annotations

from collections import deque

from hetero_ns3.topology.graph import HOST, NetGraph


def network_endpoints(graph: NetGraph) -> list[int]:
    """Endpoint node indices of the scale-out network: NICs and hosts that are their own network port
    (direct NIC attach) if the graph has any, else hosts."""
    nics = [i for i, n in enumerate(graph.nodes) if n.role == "nic" or (n.kind == HOST and n.name in n.serves)]
    return nics or [i for i, n in enumerate(graph.nodes) if n.kind == HOST]


def _node_of(name: str) -> str:
    return name.split(".", 1)[0] if "." in name else name


def endpoint_halves(graph: NetGraph) -> tuple[list[int], list[int]]:
    """Split the endpoints into two halves of whole cluster nodes (first half of the nodes, the rest)."""
    eps = network_endpoints(graph)
    owners: list[str] = []
    for e in eps:
        o = _node_of(graph.nodes[e].name)
        if not owners or owners[-1] != o:
            owners.append(o)
    first = set(owners[: len(owners) // 2])
    a = [e for e in eps if _node_of(graph.nodes[e].name) in first]
    b = [e for e in eps if _node_of(graph.nodes[e].name) not in first]
    return a, b


def max_flow(graph: NetGraph, sources: list[int], sinks: list[int], kinds: tuple[str, ...] = ("network",)) -> float:
    """Max-flow in bit/s from ``sources`` to ``sinks`` over links of ``kinds`` (full duplex: rate each way).

    Dinic's algorithm; hosts other than sources and sinks do not relay.
    """
    n = len(graph.nodes)
    s, t = n, n + 1
    head: list[list[int]] = [[] for _ in range(n + 2)]
    to: list[int] = []
    cap: list[float] = []

    def arc(u: int, v: int, c: float) -> None:
        head[u].append(len(to))
        to.append(v)
        cap.append(c)
        head[v].append(len(to))
        to.append(u)
        cap.append(0.0)

    ends = set(sources) | set(sinks)
    relay = [graph.nodes[i].kind != HOST or i in ends for i in range(n)]
    for link in graph.links:
        if link.kind not in kinds:
            continue
        a, b = graph.index(link.a), graph.index(link.b)
        if relay[a] and relay[b]:
            arc(a, b, link.rate_bps)
            arc(b, a, link.rate_bps)
    inf = float("inf")
    for x in sources:
        arc(s, x, inf)
    for x in sinks:
        arc(x, t, inf)
    total = 0.0
    eps = 1e-6

    def push(u: int, f: float, level: list[int], it: list[int]) -> float:
        if u == t:
            return f
        while it[u] < len(head[u]):
            e = head[u][it[u]]
            v = to[e]
            if cap[e] > eps and level[v] == level[u] + 1:
                got = push(v, min(f, cap[e]), level, it)
                if got > eps:
                    cap[e] -= got
                    cap[e ^ 1] += got
                    return got
            it[u] += 1
        return 0.0

    while True:
        level = [-1] * (n + 2)
        level[s] = 0
        q = deque([s])
        while q:
            u = q.popleft()
            for e in head[u]:
                if cap[e] > eps and level[to[e]] < 0:
                    level[to[e]] = level[u] + 1
                    q.append(to[e])
        if level[t] < 0:
            return total
        it = [0] * (n + 2)
        while True:
            f = push(s, inf, level, it)
            if f <= eps:
                break
            total += f


def bisection_bandwidth(graph: NetGraph) -> float:
    """Bisection bandwidth in bit/s, one direction (see the module docstring for the cut)."""
    a, b = endpoint_halves(graph)
    if not a or not b:
        return 0.0
    return max_flow(graph, a, b)


def ecmp_path_count(graph: NetGraph, tables: dict[int, list[list[int]]], src: int, dst: int) -> int:
    """Number of distinct equal-cost paths from host ``src`` to host ``dst`` in the routing tables."""
    hops = tables[dst]
    memo: dict[int, int] = {dst: 1}
    links = graph.links
    index = graph.index
    # Iterative post-order over the next-hop DAG (paths are loop-free by construction).
    stack = [(src, False)]
    while stack:
        u, done = stack.pop()
        if u in memo:
            continue
        nxt = []
        for li in hops[u]:
            link = links[li]
            v = index(link.b) if index(link.a) == u else index(link.a)
            nxt.append(v)
        if done:
            memo[u] = sum(memo[v] for v in nxt)
            continue
        stack.append((u, True))
        stack.extend((v, False) for v in nxt if v not in memo)
    return memo[src]
