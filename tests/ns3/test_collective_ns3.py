"""Planner plans through the packet-level backend (runs once the ns-3 DAG replay exists)."""

from __future__ import annotations

import numpy as np
import pytest

from hetero_ns3.collectives import CollectiveCall, CollectiveEnv, busbw_factor, plan_collective
from hetero_ns3.plan.builder import PlanBuilder
from hetero_ns3.topology import star

pytestmark = pytest.mark.ns3
replay = pytest.importorskip("hetero_ns3.network.ns3.replay", reason="ns-3 DAG replay not available yet")


def test_ring_all_reduce_packet_level(native):
    from hetero_ns3.network.config import NetworkConfig

    g = star(4, 10e9, 1e-6)
    env = CollectiveEnv.from_graph(g)
    b = PlanBuilder(env.gpus)
    size = 8 << 20
    res = plan_collective(b, CollectiveCall("all_reduce", env.gpus, size, algo="ring", protocol="Simple"), env)
    plan = b.build()
    out = replay.run_plan(g, plan, NetworkConfig(), 1)
    assert out.completed
    t = out.times
    owner = np.repeat(np.arange(len(plan)), np.diff(plan.dep_ptr))
    assert np.all(t.start_s[owner] >= t.finish_s[plan.dep_idx] - 1e-9)  # chunks wait for receipt
    busbw = size / t.makespan_s * busbw_factor("all_reduce", 4)
    assert busbw >= 0.8 * 10e9 / 8 * 0.94  # goodput after RoCE headers, small-size pipeline fill allowed
    assert t.makespan_s == pytest.approx(res.predicted_s, rel=0.3)
