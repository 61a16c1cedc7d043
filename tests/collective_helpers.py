"""Shared helpers of the collective tests: a call planned alone, and planned and run on the flow-level backend."""

from __future__ import annotations

from collections.abc import Sequence

from hetero_ns3.collectives import CollectiveCall, CollectiveEnv, CollectiveResult, busbw_factor, plan_collective
from hetero_ns3.network.analytic import simulate_plan
from hetero_ns3.plan.builder import PlanBuilder
from hetero_ns3.plan.dag import ExecutionPlan
from hetero_ns3.topology.graph import NetGraph


def planned(env: CollectiveEnv, call: CollectiveCall) -> tuple[CollectiveResult, ExecutionPlan]:
    """``call`` planned alone by the collective planner: its choice and its plan."""
    b = PlanBuilder(call.group)
    res = plan_collective(b, call, env)
    return res, b.build()


def flow_level_busbw(graph: NetGraph, op: str, ranks: Sequence[str], size: int, **kw) -> float:
    """nccl-tests bus bandwidth (GB/s) of ``op`` over ``ranks`` at ``size`` bytes, planned by the
    collective planner (``kw``: ``CollectiveCall`` overrides) and timed on the flow-level backend."""
    env = CollectiveEnv.from_graph(graph)
    _, plan = planned(env, CollectiveCall(op, tuple(ranks), size, **kw))
    t = simulate_plan(graph, plan, seed=1).times.makespan_s
    return size / t / 1e9 * busbw_factor(op, len(ranks))
