"""The flow table of a plan (:mod:`hetero_ns3.network.analytic.flows`): native and numpy give the flow rows and the
connections of ``ExecutionPlan.flow_connections``, and the native event loop still reports tasks that
never become ready."""

from __future__ import annotations

import numpy as np
import pytest

from hetero_ns3.errors import SimulationError
from hetero_ns3.network.analytic.flows import plan_flows
from hetero_ns3.network.analytic.native import load_kernel, replay_native, successors_native
from hetero_ns3.plan.builder import PlanBuilder
from hetero_ns3.plan.dag import FLOW

native = pytest.mark.skipif(load_kernel() is None, reason="no C compiler for the analytic kernel")


def random_plan(seed: int, n_gpus: int = 12, tasks: int = 3000):
    """Compute tasks and flows mixed, flows over a few categories and channels (-1: no collective)."""
    rng = np.random.default_rng(seed)
    b = PlanBuilder([f"g{i}" for i in range(n_gpus)])
    labels = ["ring ch0 step1", "ring ch3 step2", "tree ch12", "p2p", "ch7", "chx ch2"]
    channels = [0, 3, 12, -1, 7, 2]
    for _ in range(tasks):
        g = int(rng.integers(n_gpus))
        if rng.random() < 0.4:
            b.add_compute(g, 1e-6, label="gemm")
        else:
            d = int((g + 1 + rng.integers(n_gpus - 1)) % n_gpus)
            k = int(rng.integers(len(labels)))
            b.add_flow(g, d, 1000, label=labels[k], category=str(rng.choice(["dp", "tp", "pp"])), channel=channels[k])
    return b.build()


@pytest.mark.parametrize("seed", [0, 1, 2])
@pytest.mark.parametrize("engine", ["numpy", pytest.param("native", marks=native)])
def test_plan_flows_match_flow_connections(seed, engine):
    plan = random_plan(seed)
    pf = plan_flows(plan, True, load_kernel(required=True) if engine == "native" else None)
    is_flow = plan.kind == FLOW
    np.testing.assert_array_equal(pf.task, np.flatnonzero(is_flow))
    np.testing.assert_array_equal(pf.row[is_flow], np.arange(is_flow.sum()))
    assert (pf.row[~is_flow] == -1).all()
    np.testing.assert_array_equal(pf.connection, plan.flow_connections()[is_flow])
    # first[c] is the first flow of connection c, in order of first appearance
    np.testing.assert_array_equal(pf.connection[pf.first], np.arange(pf.first.size))
    assert (np.diff(pf.first) > 0).all()
    assert 0 < pf.first.size < pf.task.size  # flows share connections
    plain = plan_flows(plan, False, load_kernel() if engine == "native" else None)
    assert plain.connection is None and plain.first is None
    np.testing.assert_array_equal(plain.row, pf.row)


@native
@pytest.mark.parametrize("counters", [False, True])
def test_native_replay_names_tasks_that_never_start(counters):
    """Task 1 waits for task 2, task 2 for task 1 (a cycle): the loop ends with both unstarted, whether it
    sets up its dependency counters itself or takes them from successors_native."""
    n = 3
    dep_ptr = np.array([0, 0, 1, 2], np.int64)
    dep_idx = np.array([2, 1], np.int32)
    flow_row = np.full(n, -1, np.int32)
    args = (np.full(n, 1e-6), dep_ptr, dep_idx, flow_row, np.zeros(n, np.int64))
    paths = (np.zeros((0, 1), np.int32), np.zeros(0), np.array([np.inf]))
    lib = load_kernel(required=True)
    prepared = successors_native(lib, dep_ptr, dep_idx, with_counters=counters)
    assert len(prepared) == (3 if counters else 2)
    with pytest.raises(SimulationError, match=r"2 tasks never became ready \(first: task 1\)"):
        replay_native(lib, None, *args, *paths, successors=prepared)


@native
def test_task_codes_tell_flows_rows_and_durations_apart():
    plan = random_plan(4)
    lib = load_kernel(required=True)
    ref = plan_flows(plan, True, lib)
    coded = plan_flows(plan, True, lib, codes=True)
    assert coded.row is None
    np.testing.assert_array_equal(coded.connection, ref.connection)
    want = np.where(ref.row >= 0, -(ref.row + 1.0), plan.duration_s)
    np.testing.assert_array_equal(coded.code, want)
    assert (coded.code[plan.kind != FLOW] >= 0).all()
