"""The results layer over real planner output: NCCL-like collectives replayed by the analytic backend."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from hetero_ns3.collectives import CollectiveCall, CollectiveEnv, plan_collective
from hetero_ns3.collectives.testbeds import rail_cluster
from hetero_ns3.network.analytic import simulate_plan
from hetero_ns3.plan.builder import PlanBuilder
from hetero_ns3.results import GpuMeta, summarize, write_run


def dp_iteration(graph, compute_s, size_bytes=16 << 20):
    """Forward+backward per GPU, a DP all-reduce planned by the collective planner, an optimizer step."""
    env = CollectiveEnv.from_graph(graph)
    b = PlanBuilder(env.gpus)
    bwd = {}
    for g in env.gpus:
        b.add_compute(g, compute_s[g] / 3, label="fwd")
        bwd[g] = b.add_compute(g, 2 * compute_s[g] / 3, label="bwd")
    res = plan_collective(
        b, CollectiveCall("all_reduce", env.gpus, size_bytes, algo="ring"), env, {g: [t] for g, t in bwd.items()}, "dp"
    )
    for g in env.gpus:
        b.add_compute(g, 1e-4, res.exits[g], label="opt")
    meta = {g: GpuMeta(env.gpu_type(g), env.node_of(g)) for g in env.gpus}
    return b.build(), meta


def test_slow_gpu_under_real_collectives_and_flow_level_network(tmp_path):
    graph = rail_cluster(2, 4)
    gpus = CollectiveEnv.from_graph(graph).gpus
    base_c = dict.fromkeys(gpus, 3e-3)
    slow_c = {**base_c, gpus[0]: 6e-3}
    plan, meta = dp_iteration(graph, base_c)
    base = summarize(plan, simulate_plan(graph, plan).times, meta)
    plan_s, _ = dp_iteration(graph, slow_c)
    out = simulate_plan(graph, plan_s)
    slow_meta = {**meta, gpus[0]: GpuMeta(meta[gpus[0]].gpu_type, meta[gpus[0]].node, 2.0)}  # 6 ms vs 3 ms
    slow = summarize(plan_s, out.times, slow_meta)
    for s in (base, slow):
        for g, bd in s.per_gpu.items():
            assert bd.total_s == pytest.approx(s.iteration_time_s, rel=1e-9), g
            assert bd.other_s == pytest.approx(0.0, abs=1e-9 * s.iteration_time_s), g
        # a 2-node ring is paced by its network hops (400 Gb/s NIC vs 3.6 TB/s NVLink): the exposed
        # communication is the inter-node part
        assert s.overall.exposed_inter_node_comm_s > 0.05e-3
        # (the slow case also counts the ring's end skew as communication, of the hops it sits on: up to 1/3)
        bound = 0.25 if s is base else 1.0 / 3.0
        assert s.overall.exposed_intra_node_comm_s < bound * s.overall.exposed_inter_node_comm_s
    assert base.overall_max.straggler_wait_s < 1e-6
    for g in gpus[1:]:  # the others wait the 3 ms the slow GPU computes longer (the end skew is communication)
        assert slow.per_gpu[g].straggler_wait_s == pytest.approx(3e-3, rel=0.05)
    assert slow.per_gpu[gpus[0]].straggler_wait_s < 0.01 * 3e-3

    paths = write_run(
        tmp_path,
        scenario_resolved={},
        versions={},
        plan=plan_s,
        times=out.times,
        gpu_meta=meta,
        flows_df=out.flows,
        plots=False,
    )
    flows = pd.read_csv(paths.flows)
    assert len(flows) == plan_s.n_flows
    assert np.allclose(flows["fct_s"], flows["finish_s"] - flows["start_s"])
    assert flows["channel"].nunique() >= 1 and flows["collective"].str.len().min() > 0
    assert json.loads(paths.summary.read_text())["status"] == "ok"
