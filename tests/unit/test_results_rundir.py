"""Run directory: files, tables, Chrome trace validity, partial writes, atomicity."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from hetero_ns3.plan.builder import PlanBuilder
from hetero_ns3.plan.dag import FLOW, TaskTimes, critical_path_s
from hetero_ns3.results import (
    GpuMeta,
    atomic,
    format_summary,
    load_plan,
    summarize,
    versions_info,
    write_partial,
    write_run,
)

GPUS = ["n0.g0", "n0.g1", "n1.g0", "n1.g1"]
META = {g: GpuMeta("H100" if g.startswith("n0") else "A100", int(g[1])) for g in GPUS}


def small_plan():
    """fwd/bwd per GPU, two concurrent flows per channel (forces trace lanes), a reduction, an opt step."""
    b = PlanBuilder(GPUS)
    bwd = []
    for i, g in enumerate(GPUS):
        b.add_compute(g, 1.0 + 0.5 * i, label="fwd mb0")
        bwd.append(b.add_compute(g, 2.0, label="bwd mb0"))
    flows = []
    for i, g in enumerate(GPUS):
        for ch in (0, 1):
            for k in range(2):
                flows.append(
                    b.add_flow(
                        g,
                        GPUS[(i + 1) % 4],
                        1 << 20,
                        [bwd[i]],
                        label=f"dp.all_reduce[0] ring ch{ch} part{k}",
                        category="dp",
                        channel=ch,
                    )
                )
    reds = [b.add_compute(g, 0.1, flows, stream=1, label="reduce", category="dp") for g in GPUS]
    for g, r in zip(GPUS, reds, strict=True):
        b.add_compute(g, 0.2, [r], label="opt step", category="compute")
    b.add_barrier(GPUS[0], reds, label="end")
    return b.build()


def test_write_run_leaves_a_self_describing_directory(tmp_path):
    plan = small_plan()
    times = critical_path_s(plan, 0.3)
    extra = pd.DataFrame({"id": np.nonzero(plan.kind == FLOW)[0], "ecn_marks": 7})
    paths = write_run(
        tmp_path / "run",
        scenario_resolved={"name": "tiny", "seed": 3},
        versions=versions_info(3),
        plan=plan,
        times=times,
        gpu_meta=META,
        flows_df=extra,
        extra_summary={"backend": "fixed"},
    )
    for p in (paths.scenario, paths.versions, paths.plan, paths.tasks, paths.flows, paths.trace, paths.summary):
        assert p.is_file() and p.stat().st_size > 0, p
    for p in (paths.breakdown_png, paths.timeline_png):
        assert p.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert not list(tmp_path.rglob("*.tmp"))

    summary = json.loads(paths.summary.read_text())
    assert summary["status"] == "ok" and summary["reason"] == "" and summary["backend"] == "fixed"
    assert summary["iteration_time_s"] == pytest.approx(times.makespan_s)
    bd = summary["breakdown"]
    for t in (
        "compute_s",
        "exposed_intra_node_comm_s",
        "exposed_inter_node_comm_s",
        "pipeline_bubble_s",
        "straggler_wait_s",
    ):
        assert t in bd["overall"] and t in bd["per_gpu_type"]["H100"] and t in bd["per_gpu"]["n1.g1"]
    assert sum(bd["overall"][t] for t in bd["terms"]) == pytest.approx(summary["iteration_time_s"])
    assert bd["per_gpu_type"]["A100"]["n_gpus"] == 2
    assert summary["counts"]["flows"] == plan.n_flows
    dp = summary["counts"]["traffic"]["dp"]
    assert dp["flows"] == 16 and dp["bytes"] == 16 << 20 and dp["intra_node_bytes"] == 8 << 20
    assert "trace.json" in summary["files"] and "write_errors" not in summary

    tasks = pd.read_csv(paths.tasks)
    assert len(tasks) == len(plan)
    assert {"id", "gpu", "gpu_type", "stream", "kind", "category", "label", "start_s", "finish_s", "duration_s"} <= set(
        tasks.columns
    )
    assert np.allclose(tasks["finish_s"], times.finish_s)
    flows = pd.read_csv(paths.flows)
    assert len(flows) == plan.n_flows
    assert np.allclose(flows["fct_s"], 0.3)
    assert set(flows["collective"]) == {"dp.all_reduce[0]"} and set(flows["channel"]) == {0, 1}
    assert (flows["ecn_marks"] == 7).all()
    assert flows["intra_node"].sum() == 8  # n0.g0->n0.g1 and n1.g0->n1.g1, 2 channels x 2 parts

    versions = json.loads(paths.versions.read_text())
    assert versions["seed"] == 3 and versions["ns3"] == "3.44.post0" and versions["python"]
    reloaded = load_plan(paths.plan)
    assert reloaded.labels == plan.labels and np.array_equal(reloaded.dep_idx, plan.dep_idx)
    np.testing.assert_array_equal(reloaded.channel, plan.channel)
    assert set(plan.channel[plan.kind == 1].tolist()) == {0, 1} and (plan.channel[plan.kind == 0] == -1).all()

    # A plan.npz written before the channel column existed: the channel comes from the labels' ch<c> word.
    with np.load(paths.plan) as z:
        old = {k: z[k] for k in z.files if k != "channel"}
    legacy = tmp_path / "legacy.npz"
    np.savez_compressed(legacy, **old)
    np.testing.assert_array_equal(load_plan(legacy).channel, plan.channel)


def test_chrome_trace_events_are_valid_and_slices_do_not_overlap_per_thread(tmp_path):
    plan = small_plan()
    times = critical_path_s(plan, 0.3)
    paths = write_run(tmp_path, scenario_resolved={}, versions={}, plan=plan, times=times, gpu_meta=META)
    trace = json.loads(paths.trace.read_text())
    events = trace["traceEvents"]
    slices = [e for e in events if e["ph"] == "X"]
    meta = [e for e in events if e["ph"] == "M"]
    nonzero = int(np.count_nonzero((plan.kind == FLOW) | (plan.duration_s > 0)))
    assert len(slices) == nonzero  # zero-time barrier left out
    for e in slices:
        assert isinstance(e["name"], str) and isinstance(e["pid"], int) and isinstance(e["tid"], int)
        assert e["ts"] >= 0 and e["dur"] >= 0
    names = {(e["pid"], e.get("tid")): e["args"]["name"] for e in meta if e["name"] in ("process_name", "thread_name")}
    assert names[(1, None)] == "n0.g0 (H100, node 0)"
    used_threads = {(e["pid"], e["tid"]) for e in slices}
    assert used_threads <= set(names)  # every thread is named
    by_thread = {}
    for e in slices:
        by_thread.setdefault((e["pid"], e["tid"]), []).append((e["ts"], e["ts"] + e["dur"]))
    for spans in by_thread.values():
        spans.sort()
        assert all(a[1] <= b[0] + 1e-9 for a, b in zip(spans, spans[1:], strict=False))
    lanes = {names[k] for k in by_thread if names[k].startswith("net")}
    assert {"net ch0", "net ch0 lane1", "net ch1", "net ch1 lane1"} <= lanes


def test_partial_run_leaves_its_tables_and_the_reason(tmp_path):
    plan = small_plan()
    full = critical_path_s(plan, 0.3)
    cut = 2.5  # interrupted at t = 2.5 s of simulated time
    done = full.finish_s <= cut
    times = TaskTimes(np.where(full.start_s <= cut, full.start_s, np.nan), np.where(done, full.finish_s, np.nan))
    paths = write_partial(
        tmp_path,
        "interrupted by user (SIGINT)",
        status="interrupted",
        scenario_resolved={"a": 1},
        plan=plan,
        times=times,
        gpu_meta=META,
    )
    summary = json.loads(paths.summary.read_text())
    assert summary["status"] == "interrupted" and "SIGINT" in summary["reason"]
    assert summary["iteration_time_s"] is None and summary["breakdown"] is None
    assert summary["counts"]["tasks_finished"] == int(done.sum()) < len(plan)
    assert summary["counts"]["simulated_time_reached_s"] == pytest.approx(full.finish_s[done].max())
    tasks = pd.read_csv(paths.tasks)
    assert len(tasks) == len(plan) and tasks["finish_s"].isna().sum() == len(plan) - done.sum()
    flows = pd.read_csv(paths.flows)
    assert len(flows) == plan.n_flows
    trace = json.loads(paths.trace.read_text())
    assert max(e["ts"] + e["dur"] for e in trace["traceEvents"] if e["ph"] == "X") <= cut * 1e6 + 1e-6
    assert not paths.versions.exists()


def test_failed_run_before_planning_still_writes_a_summary(tmp_path):
    paths = write_partial(tmp_path / "r", "PlanningError: model does not fit", versions={"seed": 1})
    summary = json.loads(paths.summary.read_text())
    assert summary["status"] == "failed" and summary["files"] == ["versions.json", "summary.json"]
    with pytest.raises(ValueError, match="status"):
        write_partial(tmp_path, "x", status="ok")


def test_atomic_write_keeps_the_old_file_when_writing_fails(tmp_path):
    target = tmp_path / "x.json"
    atomic.write_json(target, {"v": 1})

    def boom(tmp):
        tmp.write_text("half")
        raise RuntimeError("disk on fire")

    with pytest.raises(RuntimeError):
        atomic.write_with(target, boom)
    assert json.loads(target.read_text()) == {"v": 1}
    assert [p.name for p in tmp_path.iterdir()] == ["x.json"]
    atomic.write_json(target, {"nan": float("nan"), "arr": np.array([1.5, np.inf]), "n": np.int64(3)})
    assert json.loads(target.read_text()) == {"nan": None, "arr": [1.5, None], "n": 3}


def test_flows_extra_columns_positional_and_mismatch(tmp_path):
    from hetero_ns3.errors import SimulationError
    from hetero_ns3.results import flows_frame, resolve_gpu_meta

    plan = small_plan()
    meta = resolve_gpu_meta(plan.gpus, META)
    times = critical_path_s(plan, 0.1)
    df = flows_frame(plan, times, meta, pd.DataFrame({"path": ["p"] * plan.n_flows}))
    assert (df["path"] == "p").all()
    with pytest.raises(SimulationError, match="rows"):
        flows_frame(plan, times, meta, pd.DataFrame({"path": ["p"]}))
    with pytest.raises(SimulationError, match="not flows"):
        flows_frame(plan, times, meta, pd.DataFrame({"id": [0], "x": [1]}))


def test_format_summary_names_types_and_terms():
    plan = small_plan()
    s = summarize(plan, critical_path_s(plan, 0.3), META)
    text = format_summary(s)
    assert "iteration time" in text and "H100" in text and "A100" in text and "straggler" in text
    assert f"{s.iteration_time_s:.3f} s" in text


def test_recording_run_writes_partial_on_error_and_interrupt(tmp_path):
    from hetero_ns3.errors import SimulationError
    from hetero_ns3.results import recording_run

    plan = small_plan()
    full = critical_path_s(plan, 0.3)
    with pytest.raises(SimulationError), recording_run(tmp_path / "f", versions={"seed": 1}) as rec:
        rec.plan, rec.gpu_meta = plan, META
        rec.times = TaskTimes(full.start_s, np.where(full.finish_s < 2.0, full.finish_s, np.nan))
        raise SimulationError("ns-3 event queue empty with 12 tasks pending")
    summary = json.loads((tmp_path / "f" / "summary.json").read_text())
    assert summary["status"] == "failed" and "12 tasks pending" in summary["reason"]
    assert len(pd.read_csv(tmp_path / "f" / "tasks.csv")) == len(plan)

    with pytest.raises(KeyboardInterrupt), recording_run(tmp_path / "i") as rec:
        rec.plan = plan
        raise KeyboardInterrupt
    summary = json.loads((tmp_path / "i" / "summary.json").read_text())
    assert summary["status"] == "interrupted" and "flows.csv" in summary["files"]

    with recording_run(tmp_path / "ok", scenario_resolved={"x": 1}) as rec:
        rec.plan, rec.gpu_meta = plan, META
        rec.finish(full, extra_summary={"backend": "fixed"})
    summary = json.loads((tmp_path / "ok" / "summary.json").read_text())
    assert summary["status"] == "ok" and summary["backend"] == "fixed"


def test_trace_lanes_of_many_overlapping_flows_get_distinct_threads():
    from hetero_ns3.results import chrome_trace, resolve_gpu_meta

    b = PlanBuilder(["a", "b"])
    c = b.add_compute("a", 1.0, label="fwd")
    for k in range(150):
        b.add_flow("a", "b", 1000, [c], label=f"ep.a2a ch0 part{k}", category="ep", channel=0)
    for k in range(3):
        b.add_flow("a", "b", 1000, [c], label=f"ep.a2a ch1 part{k}", category="ep", channel=1)
    plan = b.build()
    trace = chrome_trace(plan, critical_path_s(plan, 0.5), resolve_gpu_meta(plan.gpus, None))
    slices = [e for e in trace["traceEvents"] if e["ph"] == "X" and e["cat"] == "ep"]
    names = {e["tid"]: e["args"]["name"] for e in trace["traceEvents"] if e["name"] == "thread_name"}
    assert len({e["tid"] for e in slices}) == 153  # all overlap: one lane each, no tid shared
    assert sum(n.startswith("net ch1") for n in names.values()) == 3


def test_load_run_round_trips_and_resummarizes(tmp_path):
    from hetero_ns3.results import load_run

    plan = small_plan()
    times = critical_path_s(plan, 0.3)
    write_run(
        tmp_path / "ok",
        scenario_resolved={"s": 1},
        versions={"seed": 2},
        plan=plan,
        times=times,
        gpu_meta=META,
        plots=False,
    )
    run = load_run(tmp_path / "ok")
    assert run.status == "ok" and run.scenario == {"s": 1} and run.versions == {"seed": 2}
    assert run.gpu_meta == META
    again = run.resummarize()
    written = run.summary["breakdown"]["per_gpu"]
    for g, bd in again.per_gpu.items():
        assert bd.as_dict() == pytest.approx({k: written[g][k] for k in bd.as_dict()}, rel=1e-12, abs=1e-15)

    cut = TaskTimes(times.start_s, np.where(times.finish_s < 2.0, times.finish_s, np.nan))
    write_partial(tmp_path / "part", "boom", plan=plan, times=cut, gpu_meta=META)
    part = load_run(tmp_path / "part")
    assert part.status == "failed" and np.isnan(part.times.finish_s).sum() == np.isnan(cut.finish_s).sum()
    assert part.gpu_meta == META
    from hetero_ns3.errors import ScenarioError

    with pytest.raises(ScenarioError, match="not a run directory"):
        load_run(tmp_path / "nothing")


def test_rewriting_a_directory_replaces_its_summary(tmp_path):
    plan = small_plan()
    times = critical_path_s(plan, 0.3)
    write_run(tmp_path, scenario_resolved={}, versions={}, plan=plan, times=times, gpu_meta=META, plots=False)
    assert json.loads((tmp_path / "summary.json").read_text())["status"] == "ok"
    write_partial(tmp_path, "second attempt failed", versions={"seed": 9})
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert summary["status"] == "failed" and summary["files"] == ["versions.json", "summary.json"]


def test_timeline_color_keys_split_passes_of_compute_only():
    from hetero_ns3.results.plots import _color_keys

    plan = small_plan()
    names, keys = _color_keys(plan, plan.category, plan.label)
    labels = np.asarray(plan.labels)[plan.label]
    got = {(lab, names[k]) for lab, k in zip(labels, keys, strict=True)}
    assert ("fwd mb0", "fwd") in got and ("bwd mb0", "bwd") in got and ("opt step", "opt") in got
    assert ("reduce", "dp") in got  # a communication kernel keeps its category


def test_runs_of_several_iterations_keep_the_iteration_of_each_task(tmp_path):
    from hetero_ns3.plan.iterations import repeat_plan
    from hetero_ns3.results import load_run

    rep = repeat_plan(small_plan(), 3)
    full = critical_path_s(rep.plan, 0.3)
    paths = write_run(
        tmp_path / "ok",
        scenario_resolved={},
        versions={},
        plan=rep.plan,
        times=full,
        gpu_meta=META,
        iteration=rep.iteration,
        plots=False,
    )
    summary = json.loads(paths.summary.read_text())
    assert summary["iterations"] == 3 and sum(summary["iteration_times_s"]) == pytest.approx(summary["makespan_s"])
    assert summary["iteration_time_s"] == pytest.approx(np.mean(summary["iteration_times_s"][1:]))
    run = load_run(paths.root)
    np.testing.assert_array_equal(run.iteration, rep.iteration)
    again = run.resummarize()
    assert again.iteration_time_s == pytest.approx(summary["iteration_time_s"], rel=1e-12)
    assert again.overall.as_dict() == pytest.approx(summary["breakdown"]["overall"], rel=1e-12, abs=1e-12)
    # Interrupted in the second iteration: the partial tables still say which iteration each task is.
    cut = float(np.median(full.finish_s[rep.iteration == 1]))
    times = TaskTimes(
        np.where(full.start_s <= cut, full.start_s, np.nan), np.where(full.finish_s <= cut, full.finish_s, np.nan)
    )
    part = write_partial(
        tmp_path / "cut",
        "interrupted",
        status="interrupted",
        plan=rep.plan,
        times=times,
        gpu_meta=META,
        iteration=rep.iteration,
    )
    tasks = pd.read_csv(part.tasks)
    assert tasks["iteration"].tolist() == rep.iteration.tolist()
    assert tasks.loc[tasks.iteration == 0, "finish_s"].notna().all() and tasks.finish_s.isna().any()


def test_timeline_colors_the_compilers_forward_backward_and_recompute_kernels_by_pass():
    """The compiler labels its kernels by step (``F3.c0.L7.qkv``, ``B3.c0.L7.recompute.qkv``), not with a
    pass word: the timeline used to color every forward and backward kernel alike ("compute")."""
    from pathlib import Path

    from hetero_ns3.pipeline import load_run_cluster, lower_scenario
    from hetero_ns3.results.categories import category_class
    from hetero_ns3.results.plots import _color_keys
    from hetero_ns3.scenario.loader import scenario_from_dict
    from hetero_ns3.topology import build_graph

    data = Path(__file__).resolve().parent.parent / "data"
    raw = {
        "model": {"name": "toy", "layers": 2, "hidden": 256, "heads": 4, "ffn_hidden": 1024, "vocab": 512,
                  "seq_len": 128},
        "parallelism": {"tp": 2, "pp": 2, "global_batch": 2, "micro_batch": 1, "recompute": "full"},
        "cluster": {"topology": str(data / "one-node-4gpu.toml")},
        "run": {"backend": "analytic", "reuse_isolated_collectives": "off"},
    }  # fmt: skip
    sc = scenario_from_dict(raw)
    cluster = load_run_cluster(sc)
    plan = lower_scenario(sc, build_graph(cluster), cluster)[1].plan
    names, keys = _color_keys(plan, plan.category, plan.label)
    compute = np.array([category_class(c) == "compute" for c in plan.categories])[plan.category]
    labels = np.asarray(plan.labels)[plan.label]
    got = {lab: names[k] for lab, k, c in zip(labels, keys, compute, strict=True) if c}
    assert {"fwd", "bwd", "recompute"} <= set(got.values()), sorted(set(got.values()))
    assert all(v == "fwd" for lab, v in got.items() if lab.startswith("F"))
    assert all(v == ("recompute" if ".recompute." in lab else "bwd") for lab, v in got.items() if lab.startswith("B"))


def test_timeline_merges_kernels_closer_than_its_resolution_and_keeps_the_covered_time():
    """``merge_spans``: intervals that overlap or are at most ``gap`` apart become one span; the union of the
    spans is the union of the kernels (nothing drawn where no kernel ran, beyond the gaps it bridged)."""
    from hetero_ns3.results.plots import merge_spans

    start = np.array([5.0, 0.0, 1.0, 2.05, 9.0, 2.5])
    finish = np.array([6.0, 1.0, 2.0, 3.0, 9.5, 2.6])  # 2.5-2.6 lies inside 2.05-3.0
    lo, hi = merge_spans(start, finish, gap=0.1)
    assert lo.tolist() == [0.0, 5.0, 9.0] and hi.tolist() == [3.0, 6.0, 9.5]
    lo, hi = merge_spans(start, finish, gap=0.0)  # touching kernels still join; 2.0 -> 2.05 stays a gap
    assert lo.tolist() == [0.0, 2.05, 5.0, 9.0] and hi.tolist() == [2.0, 3.0, 6.0, 9.5]
    rng = np.random.default_rng(3)
    s = rng.uniform(0, 100, 500)
    f = s + rng.uniform(0, 0.3, 500)
    lo, hi = merge_spans(s, f, gap=0.0)
    grid = np.linspace(0, 101, 20_001)
    covered = ((grid[:, None] >= s) & (grid[:, None] <= f)).any(axis=1)
    merged = ((grid[:, None] >= lo) & (grid[:, None] <= hi)).any(axis=1)
    assert np.array_equal(covered, merged)
    assert np.all(lo[1:] > hi[:-1])  # disjoint, in time order
    empty = merge_spans(np.zeros(0), np.zeros(0), 1.0)
    assert empty[0].size == 0 and empty[1].size == 0
