"""Planner plans through the packet-level backend (runs once the ns-3 DAG replay exists)."""

from __future__ import annotations

import numpy as np
import pytest

from hetero_ns3.collectives import CollectiveCall, CollectiveEnv, busbw_factor, plan_collective
from hetero_ns3.plan.builder import PlanBuilder
from hetero_ns3.topology import star

pytestmark = pytest.mark.ns3
replay = pytest.importorskip("hetero_ns3.network.ns3.replay", reason="ns-3 DAG replay not available yet")


def test_ring_all_reduce_packet_level(capi):
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


def test_nvls_all_reduce_packet_level(native):
    """NVLS through the NVSwitch endpoint packet by packet: completes in dependency order, every GPU
    port carries S(1+1/N) x wire factor each way, and the time is the flow-level backend's."""
    from pathlib import Path

    from hetero_ns3.collectives.algorithms.nvls import wire_scale
    from hetero_ns3.network.analytic import simulate_plan
    from hetero_ns3.network.config import NetworkConfig
    from hetero_ns3.plan.dag import FLOW
    from hetero_ns3.topology import resolve_topology

    g = resolve_topology(Path(__file__).parents[1] / "data" / "one-node-4gpu.toml")
    env = CollectiveEnv.from_graph(g)
    n, size = 4, 8 << 20
    b = PlanBuilder(env.gpus[:n])
    res = plan_collective(b, CollectiveCall("all_reduce", env.gpus[:n], size, algo="nvls"), env)
    plan = b.build()
    assert "n0.nvls" in plan.gpus
    out = replay.run_plan(g, plan, NetworkConfig(), 1)
    assert out.completed
    t = out.times
    owner = np.repeat(np.arange(len(plan)), np.diff(plan.dep_ptr))
    assert np.all(t.start_s[owner] >= t.finish_s[plan.dep_idx] - 1e-9)  # the switch waits for all shards
    f = env.wire_overhead(env.gpus[0], env.gpus[1]) * wire_scale(env, env.gpus[0], env.tuning.nvls.chunk(size, n))
    fl = out.flows
    assert len(fl) == int(np.count_nonzero(plan.kind == FLOW)) and fl.finish_s.notna().all()
    for gpu in env.gpus[:n]:
        assert fl[fl.src == gpu].size_bytes.sum() / f == pytest.approx(size * (1 + 1 / n), rel=1e-4)
        assert fl[fl.dst == gpu].size_bytes.sum() / f == pytest.approx(size * (1 + 1 / n), rel=1e-4)
    flow_level = simulate_plan(g, plan).times.makespan_s
    assert t.makespan_s == pytest.approx(flow_level, rel=0.10)
    assert t.makespan_s == pytest.approx(res.predicted_s, rel=0.15)


def _replayed_in_order(graph, plan):
    """``plan`` replayed packet by packet; asserts it completed and no task started before its dependencies."""
    from hetero_ns3.network.config import NetworkConfig

    out = replay.run_plan(graph, plan, NetworkConfig(), 1)
    assert out.completed
    owner = np.repeat(np.arange(len(plan)), np.diff(plan.dep_ptr))
    assert np.all(out.times.start_s[owner] >= out.times.finish_s[plan.dep_idx] - 1e-9)
    return out


def test_mesh_all_reduce_packet_level(capi):
    """An 8 x MI300X mesh (a direct link per GPU pair) packet by packet: the all-reduce completes in
    dependency order, its link-disjoint rings put the same bytes on each of the 56 directed links, and
    the time is the flow-level backend's within 5%."""
    from hetero_ns3.network.analytic import simulate_plan
    from hetero_ns3.topology import resolve_topology
    from hetero_ns3.validation import SUITE_PATH

    g = resolve_topology(SUITE_PATH.parent / "heldout" / "mi300x-1.toml")
    env = CollectiveEnv.from_graph(g)
    size = 64 << 20
    b = PlanBuilder(env.gpus)
    plan_collective(b, CollectiveCall("all_reduce", env.gpus, size, algo="ring", protocol="Simple"), env)
    plan = b.build()
    out = _replayed_in_order(g, plan)
    t = out.times
    per_link = out.flows.groupby(["src", "dst"]).size_bytes.sum()
    assert len(per_link) == 56
    assert per_link.max() == pytest.approx(per_link.min(), rel=1e-6)
    assert t.makespan_s == pytest.approx(simulate_plan(g, plan).times.makespan_s, rel=0.05)


def test_expert_dispatch_packet_level(capi):
    """DeepEP / HybridEP's token exchange on two DGX H100 nodes packet by packet: every flow completes after its
    dependencies, the network carries one leg per (sender, node) on the sender's rail, and the time is the
    flow-level backend's within 10% (both NIC-bound)."""
    from hetero_ns3.network.analytic import simulate_plan
    from hetero_ns3.topology import resolve_topology
    from hetero_ns3.validation import SUITE_PATH

    g = resolve_topology(SUITE_PATH.parent / "heldout" / "dgx-h100-2.toml")
    env = CollectiveEnv.from_graph(g)
    ranks = tuple(env.gpus[:16])
    size = 1024 * 8 * 2048 * 2  # 1024 tokens per rank, top 8, hidden 2048, BF16
    b = PlanBuilder(ranks)
    call = CollectiveCall("all_to_all", ranks, size, algo="expert_dispatch", protocol="Simple", routing=(128, 8))
    plan_collective(b, call, env)
    plan = b.build()
    out = _replayed_in_order(g, plan)
    t = out.times
    f = out.flows
    node = {gpu: env.node_of(gpu) for gpu in ranks}
    cross = f[[node[s] != node[d] for s, d in zip(f.src, f.dst, strict=True)]]
    assert all(env.rail_of(s) == env.rail_of(d) for s, d in zip(cross.src, cross.dst, strict=True))
    assert len(cross.groupby(["src", "dst"])) == 16
    assert t.makespan_s == pytest.approx(simulate_plan(g, plan).times.makespan_s, rel=0.10)
