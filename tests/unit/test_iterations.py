"""Several training iterations per run: repeat_plan, per-iteration times, steady-state summary.

The plans here are small hand-built DAGs with known answers and one lowered toy scenario; the
replay is the flow-level (analytic) backend. The packet-level run is in tests/ns3/test_cosim_ns3.py.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from hetero_ns3.errors import PlanningError, ScenarioError
from hetero_ns3.network.analytic import simulate_plan
from hetero_ns3.pipeline import load_run_cluster, lower_scenario, run_scenario
from hetero_ns3.plan.builder import PlanBuilder
from hetero_ns3.plan.dag import COMPUTE, FLOW, critical_path_s
from hetero_ns3.plan.iterations import boundary_deps, repeat_plan
from hetero_ns3.results import GpuMeta, load_run, summarize
from hetero_ns3.results.breakdown import TERMS
from hetero_ns3.scenario.loader import load_scenario, scenario_from_dict
from hetero_ns3.topology import build_graph

DATA = Path(__file__).resolve().parent.parent / "data"
REPO = Path(__file__).resolve().parent.parent.parent
TOY = {"name": "toy", "layers": 4, "hidden": 1024, "heads": 16, "ffn_hidden": 4096, "vocab": 512, "seq_len": 512}
#: Two pipeline stages of TP=4 on each node of two-node-h100, two replicas (DP crosses the network).
PAR = {"tp": 4, "pp": 2, "global_batch": 4, "micro_batch": 1, "zero_stage": 1}
GPUS = ["n0.g0", "n0.g1", "n0.g2"]  # names of two-node-h100's hosts, for the analytic backend


def _toy_scenario(**run):
    raw = {"model": TOY, "parallelism": PAR, "cluster": {"topology": str(DATA / "two-node-h100.toml")}}
    if run:
        raw["run"] = run
    return scenario_from_dict(raw)


@pytest.fixture(scope="module")
def lowered_toy():
    sc = _toy_scenario()
    cluster = load_run_cluster(sc)
    graph = build_graph(cluster)
    _, low = lower_scenario(sc, graph, cluster)
    meta = {g.name: GpuMeta(g.gpu_type, g.node) for g in cluster.gpus()}
    return graph, low.plan, meta


@pytest.fixture(scope="module")
def graph():
    return build_graph(load_run_cluster(_toy_scenario()))


def _two_stage() -> PlanBuilder:
    """Stage 0 (GPU 0) and stage 1 (GPU 1) of a one-microbatch pipeline, compute only; stage 1 ends
    with a long optimizer step, so stage 0 is done first (1+1+1+1+1 = 5 s on GPU 0, 6 s on GPU 1)."""
    b = PlanBuilder(GPUS[:2])
    f0 = b.add_compute(0, 1.0, label="fwd s0")
    f1 = b.add_compute(1, 1.0, [f0], label="fwd s1")
    b1 = b.add_compute(1, 1.0, [f1], label="bwd s1")
    b0 = b.add_compute(0, 1.0, [b1], label="bwd s0")
    b.add_compute(0, 1.0, [b0], label="opt s0")
    b.add_compute(1, 3.0, [b1], label="opt s1")
    return b


def test_repeated_plan_is_valid_and_keeps_each_iteration_a_copy(lowered_toy):
    _, plan, _ = lowered_toy
    n, reps = len(plan), 3
    rep = repeat_plan(plan, reps)
    rep.plan.validate()  # deps point to earlier tasks: acyclic
    assert len(rep.plan) == reps * n and rep.tasks_per_iteration == n and rep.iterations == reps
    assert rep.plan.labels == plan.labels and rep.plan.categories == plan.categories
    np.testing.assert_array_equal(rep.iteration, np.repeat(np.arange(reps), n))
    for name in ("kind", "gpu", "dst", "size_bytes", "duration_s", "stream", "priority", "label", "category"):
        np.testing.assert_array_equal(getattr(rep.plan, name)[2 * n :], getattr(plan, name), err_msg=name)
    # Every iteration keeps its own dependencies (shifted); later ones add only deps on the previous one.
    for i in (0, n // 2, n - 1):
        deps = rep.plan.deps(2 * n + i).tolist()
        assert set(plan.deps(i).tolist()) <= {d - 2 * n for d in deps}
        assert all(n <= d < 3 * n for d in deps)
    extra = len(rep.plan.dep_idx) - reps * len(plan.dep_idx)
    assert extra == 2 * len(boundary_deps(plan)[0]) > 0
    assert repeat_plan(plan, 1).plan is plan


@pytest.mark.parametrize("bad", [0, -1, 2.5, True])
def test_repeat_plan_rejects_non_positive_counts(bad):
    with pytest.raises(PlanningError, match="iterations"):
        repeat_plan(_two_stage().build(), bad)


def test_every_task_runs_once_and_each_gpu_finishes_an_iteration_before_the_next(lowered_toy):
    graph, plan, _ = lowered_toy
    rep = repeat_plan(plan, 3)
    res = simulate_plan(graph, rep.plan, seed=1)
    start, finish = res.times.start_s, res.times.finish_s
    assert np.isfinite(start).all() and np.isfinite(finish).all() and (finish >= start).all()
    owner = np.repeat(np.arange(len(rep.plan)), np.diff(rep.plan.dep_ptr))
    assert (start[owner] >= finish[rep.plan.dep_idx] - 1e-12).all()
    assert len(res.flows) == rep.plan.n_flows == 3 * plan.n_flows  # every flow ran exactly once
    # The iteration rule: on each GPU, iteration k+1 starts after everything of iteration k (so each
    # (gpu, stream) stays in order across iterations).
    for g in range(len(plan.gpus)):
        for k in (0, 1):
            mine = rep.plan.gpu == g
            before, after = mine & (rep.iteration == k), mine & (rep.iteration == k + 1)
            assert start[after].min() >= finish[before].max() - 1e-12, (plan.gpus[g], k)
            for s in np.unique(rep.plan.stream[before & (rep.plan.kind == COMPUTE)]).tolist():
                st = rep.plan.stream == s
                assert start[after & st].min() >= finish[before & st].max() - 1e-12


def test_iterations_that_do_not_overlap_take_n_times_one(graph):
    # One chain across two GPUs: the next iteration's first kernel waits for the previous one's last.
    b = PlanBuilder(GPUS[:2])
    a = b.add_compute(0, 1e-3, label="fwd a")
    c = b.add_compute(1, 2e-3, [a], label="fwd b")
    b.add_compute(0, 0.5e-3, [c], label="opt a")
    plan = b.build()
    one = simulate_plan(graph, plan, seed=1).times.makespan_s
    assert one == pytest.approx(3.5e-3)
    for reps in (2, 5):
        rep = repeat_plan(plan, reps)
        times = simulate_plan(graph, rep.plan, seed=1).times
        assert times.makespan_s == pytest.approx(reps * one, rel=1e-9)
        s = summarize(rep.plan, times, None, rep.iteration)
        assert s.iteration_times_s == pytest.approx([one] * reps, rel=1e-9)
        assert s.iteration_time_s == pytest.approx(one, rel=1e-9)


@pytest.mark.parametrize("reps", [3, 11])
def test_next_iteration_overlaps_the_previous_pipeline_drain(reps):
    # Stage 0 finishes at 5 s, stage 1 at 6 s: iteration 2 starts on stage 0 at 5 s and ends at 11 s.
    rep = repeat_plan(_two_stage().build(), reps)
    times = critical_path_s(rep.plan)
    s = summarize(rep.plan, times, None, rep.iteration)
    assert s.iteration_times_s == pytest.approx([6.0] + [5.0] * (reps - 1))
    assert s.iteration_time_s == pytest.approx(5.0)  # steady state: iterations 2..N
    assert s.makespan_s == pytest.approx(6.0 + 5.0 * (reps - 1)) == pytest.approx(sum(s.iteration_times_s))
    # The breakdown is per steady-state iteration: each GPU's terms sum to the iteration time.
    for g, bd in s.per_gpu.items():
        assert bd.total_s == pytest.approx(s.iteration_time_s, rel=1e-9), g
        assert all(getattr(bd, t) >= -1e-12 for t in TERMS)
    # Stage 1 (F1, B1, a 3 s optimizer step) is busy all the time. Stage 0 computes 3 s per iteration,
    # but the steady-state window [end_0, end_N-1] is in time: it starts after stage 0's second forward
    # ([5, 6]), so 1 s of compute falls outside it (docs/results.md); the error shrinks as 1/(N-1).
    assert s.per_gpu[GPUS[1]].compute_s == pytest.approx(5.0)
    assert s.per_gpu[GPUS[0]].compute_s == pytest.approx((3.0 * (reps - 1) - 1.0) / (reps - 1))


def test_per_iteration_times_sum_to_the_makespan_on_a_lowered_plan(lowered_toy):
    graph, plan, meta = lowered_toy
    rep = repeat_plan(plan, 4)
    times = simulate_plan(graph, rep.plan, seed=1).times
    s = summarize(rep.plan, times, meta, rep.iteration)
    assert len(s.iteration_times_s) == 4 and s.iterations == 4
    assert sum(s.iteration_times_s) == pytest.approx(s.makespan_s, rel=1e-12)
    assert s.makespan_s == pytest.approx(times.makespan_s)
    assert s.iteration_time_s == pytest.approx(np.mean(s.iteration_times_s[1:]), rel=1e-12)
    for g, bd in s.per_gpu.items():
        assert bd.total_s == pytest.approx(s.iteration_time_s, rel=1e-9), g
    assert s.overall.total_s == pytest.approx(s.iteration_time_s, rel=1e-9)


@pytest.mark.parametrize("which", ["toy", "demo"])
def test_steady_iterations_agree_and_the_run_directory_records_them(tmp_path, which):
    if which == "toy":
        sc = _toy_scenario(iterations=3)
    else:  # the README's mixed H100/A100 cluster, with fewer microbatches to keep it quick
        sc = load_scenario(REPO / "scenarios" / "demo.toml", ["parallelism.global_batch=4", "run.iterations=3"])
    out = run_scenario(sc, tmp_path / "run", backend="analytic")
    s = out.summary
    times = s.iteration_times_s
    assert len(times) == 3 and all(t > 0 for t in times)
    assert max(times[1:]) == pytest.approx(min(times[1:]), rel=1e-3)
    assert out.stats["iterations"] == 3 and out.stats["tasks"] == 3 * out.stats["tasks_per_iteration"]
    mfu = out.stats["model_flops"] / (s.iteration_time_s * out.stats["peak_flops"])
    assert out.stats["mfu"] == pytest.approx(mfu)
    doc = json.loads(out.paths.summary.read_text())
    assert doc["iterations"] == 3 and doc["iteration_times_s"] == pytest.approx(list(times))
    assert doc["iteration_time_s"] == pytest.approx(s.iteration_time_s)
    assert doc["makespan_s"] == pytest.approx(sum(times))
    assert sum(doc["breakdown"]["overall"].values()) == pytest.approx(s.iteration_time_s, rel=1e-9)
    run = load_run(out.paths.root)
    assert sorted(run.tasks["iteration"].unique().tolist()) == [0, 1, 2]
    again = run.resummarize()
    assert again.iteration_time_s == pytest.approx(s.iteration_time_s, rel=1e-9)
    assert again.iteration_times_s == pytest.approx(times, rel=1e-9)


def test_one_iteration_run_is_unchanged(tmp_path, lowered_toy):
    graph, plan, meta = lowered_toy
    times = simulate_plan(graph, plan, seed=1).times
    plain = summarize(plan, times, meta)
    tagged = summarize(plan, times, meta, np.zeros(len(plan), dtype=np.int32))
    assert plain.iteration_times_s == (plain.iteration_time_s,) and plain.iterations == 1
    assert tagged.iteration_time_s == plain.iteration_time_s and tagged.overall == plain.overall
    assert plain.makespan_s == pytest.approx(plain.iteration_time_s)
    out = run_scenario(_toy_scenario(), tmp_path / "one", backend="analytic")
    assert out.summary.iteration_time_s == pytest.approx(plain.iteration_time_s, rel=1e-9)
    assert (load_run(out.paths.root).tasks["iteration"] == 0).all()


@pytest.mark.parametrize("bad", ["0", "-1", "x", "1.5"])
def test_run_iterations_must_be_a_positive_integer(bad):
    with pytest.raises(ScenarioError, match=r"run\.iterations \(") as err:
        load_scenario(REPO / "scenarios" / "demo.toml", [f"run.iterations={bad}"])
    assert "integer" in str(err.value)
    assert load_scenario(REPO / "scenarios" / "demo.toml", ["run.iterations=3"]).run.iterations == 3


def test_only_flows_and_kernels_of_a_gpu_gate_its_next_iteration():
    # A flow belongs to its sender: GPU 1's next iteration waits for its own kernel, not for the flow
    # it receives (which the sender's next iteration waits for).
    b = PlanBuilder(GPUS[:2])
    k0 = b.add_compute(0, 1.0, label="k0")
    f = b.add_flow(0, 1, 1 << 20, [k0], label="pp act", category="pp")
    b.add_compute(1, 1.0, [f], label="k1")
    plan = b.build()
    entry, sink = boundary_deps(plan)
    pairs = sorted(zip(entry.tolist(), sink.tolist(), strict=True))
    assert pairs == [(0, 1), (2, 2)]  # k0 <- flow (GPU 0's sink); k1 <- k1 (GPU 1's sink)
    assert plan.kind[1] == FLOW
