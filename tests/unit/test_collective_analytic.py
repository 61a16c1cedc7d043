"""Planner plans through the flow-level (max-min) backend: goodput, timeline order, agreement."""

from __future__ import annotations

import numpy as np
import pytest

from hetero_ns3.collectives import CollectiveCall, CollectiveEnv, busbw_factor, estimate_plan, plan_collective
from hetero_ns3.collectives.testbeds import rail_cluster
from hetero_ns3.network.analytic import AnalyticConfig, simulate_plan
from hetero_ns3.plan.builder import PlanBuilder
from hetero_ns3.topology import star

CONFIG = AnalyticConfig()  # framing as the packet backend's NIC


def _sim(graph, op, size, **kw):
    env = CollectiveEnv.from_graph(graph)
    b = PlanBuilder(env.gpus)
    res = plan_collective(b, CollectiveCall(op, env.gpus, size, **kw), env)
    plan = b.build()
    out = simulate_plan(graph, plan, config=CONFIG)
    return env, plan, res, out


@pytest.mark.parametrize("op", ["all_reduce", "all_gather", "all_to_all"])
def test_maxmin_busbw_reaches_goodput(op):
    g = star(8, 100e9, 1e-6)
    env, plan, res, out = _sim(g, op, 1 << 30)
    busbw = (1 << 30) / out.times.makespan_s * busbw_factor(op, 8)
    goodput = 100e9 / 8 * CONFIG.framing.efficiency
    assert 0.9 * goodput <= busbw <= 1.001 * goodput


def test_maxmin_timeline_respects_chunk_dependencies():
    g = rail_cluster(2, 4)
    env, plan, res, out = _sim(g, "all_reduce", 8 << 20, algo="ring", channels=4)
    owner = np.repeat(np.arange(len(plan)), np.diff(plan.dep_ptr))
    t = out.times
    assert np.all(t.start_s[owner] >= t.finish_s[plan.dep_idx] - 1e-12)


def test_closed_form_agrees_with_maxmin_on_rings():
    g = rail_cluster(2, 8)
    env, plan, res, out = _sim(g, "all_reduce", 1 << 28, algo="ring", protocol="Simple")
    closed = estimate_plan(plan, env).makespan_s
    assert closed == pytest.approx(out.times.makespan_s, rel=0.1)
    assert res.predicted_s == pytest.approx(out.times.makespan_s, rel=0.15)
