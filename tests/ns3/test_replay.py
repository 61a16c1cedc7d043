"""Packet-level DAG replay (ns3::DagReplay over ns3::RdmaNetwork) against analytic expectations."""

import numpy as np
import pandas as pd
import pytest

from hetero_ns3.collectives import CollectiveCall, CollectiveEnv, plan_collective
from hetero_ns3.plan.builder import PlanBuilder
from hetero_ns3.plan.dag import FLOW, critical_path_s
from hetero_ns3.topology import resolve_topology

pytestmark = pytest.mark.ns3

HOSTS = ["h0", "h1", "h2", "h3"]


@pytest.fixture(scope="module")
def star4():
    return resolve_topology("star:4", 100e9, 1e-6)


def _deps_respected(plan, times) -> float:
    """Largest (dep finish - task start) over all dependency edges; <= 0 when every dep was respected."""
    owner = np.repeat(np.arange(len(plan)), np.diff(plan.dep_ptr))
    if owner.size == 0:
        return -np.inf
    return float(np.max(times.finish_s[plan.dep_idx] - times.start_s[owner]))


def test_compute_flow_compute_chain_matches_standalone_flow(capi, star4):
    from hetero_ns3.network.ns3.replay import run_plan
    from hetero_ns3.network.ns3.roce import simulate_flows

    b = PlanBuilder(HOSTS)
    c0 = b.add_compute("h0", 1e-6, label="fwd")
    f = b.add_flow("h0", "h1", 10**6, deps=[c0])
    c1 = b.add_compute("h1", 2e-6, deps=[f], label="bwd")
    res = run_plan(star4, b.build(), seed=1)
    assert res.completed
    t = res.times
    assert t.start_s[f] == pytest.approx(1e-6, abs=1e-12)
    assert t.start_s[c1] == pytest.approx(t.finish_s[f], abs=1e-12)
    assert t.finish_s[c1] - t.start_s[c1] == pytest.approx(2e-6, abs=1e-12)
    # The same flow alone, started at the same time by the plain flow API: identical FCT.
    alone = simulate_flows(
        star4, pd.DataFrame({"src": ["h0"], "dst": ["h1"], "size_bytes": [10**6], "start_s": [1e-6]}), seed=1
    )
    assert t.finish_s[f] - t.start_s[f] == pytest.approx(float(alone.flows.fct_s[0]), rel=1e-9)
    assert list(res.flows.columns[:4]) == ["task", "src", "dst", "size_bytes"]


def test_pure_compute_plan_equals_critical_path(capi, star4):
    from hetero_ns3.network.ns3.replay import run_plan

    b = PlanBuilder(HOSTS)
    rng = np.random.default_rng(3)
    ids = []
    for i in range(60):
        deps = rng.choice(ids, size=min(len(ids), 2), replace=False).tolist() if ids else []
        ids.append(b.add_compute(HOSTS[i % 4], float(rng.uniform(1e-6, 5e-6)), deps=deps, stream=int(i % 2)))
    plan = b.build()
    res = run_plan(star4, plan, seed=1)
    ref = critical_path_s(plan)
    assert res.completed
    # ns-3 keeps time in whole nanoseconds: each scheduled duration rounds by at most 0.5 ns.
    np.testing.assert_allclose(res.times.finish_s, ref.finish_s, rtol=0, atol=0.5e-9 * len(plan))


def test_ring_all_reduce_respects_chunk_dependencies_and_agrees_with_analytic(capi, star4):
    from hetero_ns3.network.analytic import simulate_plan
    from hetero_ns3.network.ns3.replay import run_plan

    b = PlanBuilder(HOSTS)
    env = CollectiveEnv.from_graph(star4)
    call = CollectiveCall("all_reduce", tuple(HOSTS), 4 * 2**20, algo="ring", protocol="Simple", channels=2)
    plan_collective(b, call, env)
    plan = b.build()
    res = run_plan(star4, plan, seed=1)
    assert res.completed
    assert _deps_respected(plan, res.times) <= 1e-12
    assert len(res.flows) == plan.n_flows and (res.flows.fct_s > 0).all()
    # Uncongested (each host sends to one neighbour per channel): flow-level and packet-level agree.
    analytic = simulate_plan(star4, plan, seed=1).times.makespan_s
    assert res.times.makespan_s == pytest.approx(analytic, rel=0.05)


def test_link_at_half_rate_doubles_transfer_time(capi, star4):
    from hetero_ns3.network.ns3.replay import LinkFault, run_plan

    def one_flow(faults):
        b = PlanBuilder(HOSTS)
        f = b.add_flow("h0", "h1", 2 * 10**6)
        res = run_plan(star4, b.build(), seed=1, link_faults=faults)
        assert res.completed
        return res.times.finish_s[f]

    base = one_flow(())
    slow = one_flow((LinkFault("h0", "sw0", at_s=0.0, rate_factor=0.5),))
    assert slow / base == pytest.approx(2.0, rel=0.03)


def test_plan_with_flows_reports_every_flow_once(capi, star4):
    from hetero_ns3.network.ns3.replay import run_plan

    b = PlanBuilder(HOSTS)
    fs = [b.add_flow(HOSTS[i], HOSTS[(i + 1) % 4], 100_000 * (i + 1)) for i in range(4)]
    res = run_plan(star4, b.build(), seed=1)
    assert sorted(res.flows.task.tolist()) == fs
    plan_flows = (b.build().kind == FLOW).sum()
    assert len(res.flows) == plan_flows
