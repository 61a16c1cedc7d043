"""``replay_times``: the analytic replay without its flows table (what ``validate`` runs) gives the task
times of ``simulate_plan`` bit for bit, in less memory; and the pieces that make it lean (finish times
written over the task codes, bytes per path row summed in blocks) change no figure."""

from __future__ import annotations

import tracemalloc

import numpy as np
import pytest

from hetero_ns3.collectives import CollectiveCall, CollectiveEnv, plan_collective
from hetero_ns3.errors import SimulationError
from hetero_ns3.network.analytic import AnalyticConfig, prepare_times, replay_times, simulate_plan
from hetero_ns3.network.analytic import flows as flows_mod
from hetero_ns3.network.analytic.flows import row_bytes
from hetero_ns3.network.analytic.native import load_kernel, replay_native
from hetero_ns3.plan.builder import PlanBuilder
from hetero_ns3.topology import leaf_spine
from tests.unit.test_analytic_backend import random_plan

ENGINES = ["native", "numpy"] if load_kernel() is not None else ["numpy"]


def collective_plan(graph):
    """Two ring all-reduces over 8 GPUs on two leaves: many flows per connection (channels, steps)."""
    env = CollectiveEnv.from_graph(graph)
    b = PlanBuilder(env.gpus)
    for size in (64 << 20, 3 << 20):
        plan_collective(b, CollectiveCall("all_reduce", env.gpus, size, algo="ring"), env)
    return b.build()


@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize("key", ["connection", "flow"])
@pytest.mark.parametrize("which", ["random", "collective"])
def test_replay_times_equal_simulate_plan_bit_for_bit(engine, key, which):
    g = leaf_spine(2, 2, 4, 100e9, 1e-6)
    plan = random_plan(8, 800, seed=5) if which == "random" else collective_plan(g)
    cfg = AnalyticConfig(engine=engine, ecmp_key=key)
    full = simulate_plan(g, plan, cfg, seed=3)
    lean = replay_times(g, plan, cfg, seed=3)
    assert np.array_equal(lean.times.start_s, full.times.start_s)  # bitwise (no NaN: every task ran)
    assert np.array_equal(lean.times.finish_s, full.times.finish_s)
    assert np.array_equal(lean.link_bytes, full.link_bytes)
    assert lean.stats.flows == full.stats.flows == plan.n_flows
    assert (lean.stats.events, lean.stats.rate_updates) == (full.stats.events, full.stats.rate_updates)
    assert lean.stats.engine == full.stats.engine == engine


@pytest.mark.skipif("native" not in ENGINES, reason="needs the C kernel")
def test_replay_times_holds_less_memory_than_simulate_plan():
    """Peak of the numpy allocations (tracemalloc counts them) during each call on the same plan: without
    the flows table (8 columns of F entries, ideal FCTs, sizes) and with finish written over the codes,
    the lean call needs well under the full one."""
    g = leaf_spine(2, 2, 4, 100e9, 1e-6)
    plan = collective_plan(g)
    cfg = AnalyticConfig(engine="native")
    peaks = []
    for fn in (simulate_plan, replay_times):
        tracemalloc.start()
        fn(g, plan, cfg, seed=3)
        peaks.append(tracemalloc.get_traced_memory()[1])
        tracemalloc.stop()
    assert peaks[1] < 0.6 * peaks[0], peaks


@pytest.mark.skipif("native" not in ENGINES, reason="needs the C kernel")
def test_finish_times_may_overwrite_the_task_codes():
    """``finish_out=task_code``: the loop reads a task's code only before it starts and writes its finish
    after, so the shared array ends as the finish times, equal to those of a separate output."""
    lib = load_kernel(required=True)
    rng = np.random.default_rng(7)
    b = PlanBuilder(["h0", "h1"])
    for i in range(400):  # compute tasks only, on two streams: durations and zero-duration tasks
        deps = rng.choice(i, size=min(i, 3), replace=False) if i else []
        b.add_compute(int(rng.integers(2)), float(rng.choice([0.0, rng.uniform(1e-6, 1e-3)])), deps=deps)
    plan = b.build()
    code = plan.duration_s.copy()
    args = (None, plan.duration_s, plan.dep_ptr, plan.dep_idx, None, plan.size_bytes)
    empty = (np.zeros((0, 1), np.int32), np.zeros(0), np.ones(1))
    ref = replay_native(lib, *args, *empty, task_code=plan.duration_s.copy())
    got = replay_native(lib, *args, *empty, task_code=code, finish_out=code)
    assert got.finish_s is code
    assert np.array_equal(code, ref.finish_s) and np.array_equal(got.start_s, ref.start_s)


@pytest.mark.parametrize("per_task", [False, True])
def test_row_bytes_in_blocks_equal_one_bincount(monkeypatch, per_task):
    rng = np.random.default_rng(11)
    n_flows, n_rows = 1000, 37
    rows = rng.integers(0, n_rows, n_flows).astype(np.int32)
    size = rng.integers(1, 2**40, n_flows)  # large whole bytes: sums stay below 2**53
    task = None
    if per_task:
        task = np.sort(rng.choice(3000, n_flows, replace=False))
        per = np.zeros(3000, np.int64)
        per[task] = size
        size_arg = per
    else:
        size_arg = size
    monkeypatch.setattr(flows_mod, "_BYTES_BLOCK", 7)  # many blocks, a ragged last one
    got = row_bytes(rows, n_rows, size_arg, task)
    assert np.array_equal(got, np.bincount(rows, weights=size, minlength=n_rows))


@pytest.mark.parametrize("engine", ENGINES)
def test_prepared_replay_runs_on_without_the_plan_columns_it_no_longer_reads(engine):
    """Route, then drop the plan's durations, priorities and channels (as validate does), then replay:
    the same times; a second run is refused on the native engine (its codes became finish times)."""
    g = leaf_spine(2, 2, 4, 100e9, 1e-6)
    plan = collective_plan(g)
    cfg = AnalyticConfig(engine=engine)
    full = simulate_plan(g, plan, cfg, seed=3)
    job = prepare_times(g, plan, cfg, seed=3)
    for name in ("duration_s", "priority", "channel"):
        getattr(plan, name)[:] = -7  # the loop must not read these any more
    got = job.run()
    assert np.array_equal(got.times.finish_s, full.times.finish_s)
    assert np.array_equal(got.times.start_s, full.times.start_s)
    if engine == "native":
        with pytest.raises(SimulationError, match="has run already"):
            job.run()
