"""Payload bytes that each group of flows (e.g. each job) puts on each directed link.

Neither backend counts bytes per job on a link: the flow level knows each flow's path but sums bytes
over all flows, the packet level counts bytes per switch port. Routing is deterministic, so the split by
group is recomputed here from the plan with the routing each backend uses (docs/topologies.md, "ECMP"):

* per-flow ECMP (both backends): every flow, or every connection with ``ecmp_key = "connection"``, is
  walked along the next-hop tables with the backend's hash (the flow level's ``flow`` hash, or the
  switches' ``packet`` hash for the packet level, the contract of ``tests/ns3/test_ecmp_contract.py``);
  a flow's bytes go to every link of its path. This is exact for payload bytes; retransmissions are not
  counted.
* packet spraying (packet level, ``routing.packet_spray``): each frame re-hashes at every switch, so a
  flow's bytes are spread evenly over the next hops at each node: the expected split, computed by pushing
  each (group, source, destination) total through the next-hop tables.

No ns-3 import: both backends call this with their own hash settings (their ``link_load`` method).
"""

from __future__ import annotations

import numpy as np

from hetero_ns3.errors import SimulationError
from hetero_ns3.network.analytic.api import route_plan
from hetero_ns3.network.analytic.config import AnalyticConfig
from hetero_ns3.network.analytic.flows import plan_flows
from hetero_ns3.network.analytic.routes import NextHopTable, graph_next_hop_table, link_arrays
from hetero_ns3.plan.dag import FLOW, ExecutionPlan
from hetero_ns3.topology.graph import NetGraph


def _check_groups(plan: ExecutionPlan, group: np.ndarray, n_groups: int) -> np.ndarray:
    g = np.asarray(group, np.int64)
    if g.shape != (len(plan),):
        raise ValueError(f"group has shape {g.shape}; give one group per task ({len(plan)})")
    if g.size and (g.min() < 0 or g.max() >= n_groups):
        raise ValueError(f"group ids must lie in [0, {n_groups}); got {int(g.min())}..{int(g.max())}")
    return g


def routed_link_bytes(
    graph: NetGraph, plan: ExecutionPlan, group: np.ndarray, n_groups: int, config: AnalyticConfig, seed: int
) -> np.ndarray:
    """float64 (n_groups, n_links, 2): payload bytes per group and directed link (column 0: ``a`` to ``b``),
    with per-flow (or per-connection) ECMP paths as ``config.ecmp_hash`` / ``config.ecmp_key`` and ``seed``
    choose them."""
    g = _check_groups(plan, group, n_groups)
    n_links = len(graph.links)
    out = np.zeros((n_groups, 2 * n_links + 1))
    flows = plan_flows(plan, config.ecmp_key == "connection")
    if flows.task.size == 0:
        return out[:, :-1].reshape(n_groups, n_links, 2)
    links = link_arrays(graph, config)
    size = plan.size_bytes[flows.task].astype(np.float64)
    paths = route_plan(graph, plan, flows, size, links, config, seed, graph_next_hop_table(graph), None)
    res = paths.res  # (F, H), padded with the pad resource (last column of ``out``)
    fg = np.broadcast_to(g[flows.task][:, None], res.shape)
    np.add.at(out, (fg, res), np.broadcast_to(size[:, None], res.shape))
    return out[:, :-1].reshape(n_groups, n_links, 2)


def sprayed_link_bytes(graph: NetGraph, plan: ExecutionPlan, group: np.ndarray, n_groups: int) -> np.ndarray:
    """float64 (n_groups, n_links, 2): the expected payload bytes per group and directed link when every
    frame picks one of the equal-cost next hops at random (packet spraying): each node splits what reaches
    it evenly over its next hops toward the destination."""
    g = _check_groups(plan, group, n_groups)
    n_links = len(graph.links)
    out = np.zeros((n_groups, n_links, 2))
    flows = np.flatnonzero(plan.kind == FLOW)
    if flows.size == 0:
        return out
    node_of = np.array([graph.index(name) for name in plan.gpus], np.int64)
    src, dst = node_of[plan.gpu[flows]], node_of[plan.dst[flows]]
    # Totals per (destination, source, group): the split depends only on where the bytes are and go.
    n_nodes = len(graph.nodes)
    key = (dst * n_nodes + src) * n_groups + g[flows]
    uniq, inv = np.unique(key, return_inverse=True)
    total = np.bincount(inv, weights=plan.size_bytes[flows].astype(np.float64), minlength=uniq.size)
    table = graph_next_hop_table(graph)
    a = np.fromiter((graph.index(lk.a) for lk in graph.links), np.int64, n_links)
    b = np.fromiter((graph.index(lk.b) for lk in graph.links), np.int64, n_links)
    dests = uniq // (n_nodes * n_groups)
    for d in np.unique(dests):
        sel = dests == d
        at = np.zeros((n_nodes, n_groups))  # bytes now sitting at each node, per group
        np.add.at(at, ((uniq[sel] // n_groups) % n_nodes, uniq[sel] % n_groups), total[sel])
        _push(int(d), at, table, a, b, out, graph)
    return out


def _push(
    d: int, at: np.ndarray, table: NextHopTable, a: np.ndarray, b: np.ndarray, out: np.ndarray, graph: NetGraph
) -> None:
    """Move everything in ``at`` toward ``d`` one hop at a time, splitting evenly over next hops."""
    base = int(table.slot[d]) * table.n_nodes
    for _ in range(table.n_nodes):
        at[d] = 0.0
        nodes = np.flatnonzero(at.any(axis=1))
        if nodes.size == 0:
            return
        nxt = np.zeros_like(at)
        for u in nodes:
            k = base + int(u)
            cnt = int(table.count[k])
            if table.slot[d] < 0 or cnt == 0:
                raise SimulationError(f"no route from {graph.nodes[u].name!r} to {graph.nodes[d].name!r}")
            share = at[u] / cnt
            for li in table.link[table.off[k] : table.off[k] + cnt]:
                fwd = a[li] == u
                out[:, li, 0 if fwd else 1] += share
                nxt[b[li] if fwd else a[li]] += share
        at[:] = nxt
    raise SimulationError("routing loop in the next-hop tables; check the topology's routing")
