"""Shared helper of the collective tests: a call planned and run on the flow-level backend."""

from __future__ import annotations

from collections.abc import Sequence

from hetero_ns3.collectives import CollectiveCall, CollectiveEnv, busbw_factor, plan_collective
from hetero_ns3.network.analytic import simulate_plan
from hetero_ns3.plan.builder import PlanBuilder
from hetero_ns3.topology.graph import NetGraph


def flow_level_busbw(graph: NetGraph, op: str, ranks: Sequence[str], size: int, **kw) -> float:
    """nccl-tests bus bandwidth (GB/s) of ``op`` over ``ranks`` at ``size`` bytes, planned by the
    collective planner (``kw``: ``CollectiveCall`` overrides) and timed on the flow-level backend."""
    env = CollectiveEnv.from_graph(graph)
    call = CollectiveCall(op, tuple(ranks), size, **kw)
    b = PlanBuilder(call.group)
    plan_collective(b, call, env)
    t = simulate_plan(graph, b.build(), seed=1).times.makespan_s
    return size / t / 1e9 * busbw_factor(op, len(ranks))
