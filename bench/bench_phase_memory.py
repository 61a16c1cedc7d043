"""Memory and CPU per phase of one scenario on the analytic backend: compile, lower, replay, summarize, write.

Prints, after each phase, the process's resident set (RSS now, peak so far, from /proc and getrusage)
and its CPU time so far, plus the plan's size (tasks, flows, dependencies, bytes of its arrays) and
tasks per category (``--classes``: per class too, a diagnostic with its own peak). No run directory is
written, and the replay makes the task times only, as ``hetero-ns3 validate`` does (``--flows-table``:
with the flows table, as ``hetero-ns3 run``). ``--digest``: SHA-256 of the task times and the summary.
One scenario per process, so that each peak is its own. Usage (docs/validation.md, "Where the memory went"):

    .venv/bin/python bench/bench_phase_memory.py hetero_ns3/data/validation/megatron/gpt-7.5b.toml
    .venv/bin/python bench/bench_phase_memory.py hetero_ns3/data/validation/h100/gpt3-175b.toml \\
        --set parallelism.global_batch=128
    .venv/bin/python bench/bench_phase_memory.py ... --stop lower   # compile and lower only
    .venv/bin/python bench/bench_phase_memory.py ... --lower-steps  # and each stage of the lowering

``--write DIR`` adds the "write" phase: the run directory's pieces one at a time (plan.npz, tasks and flows
tables, trace, plots), each with its own peak (``VmHWM`` reset through /proc/self/clear_refs before it) and
CPU. ``--whole-tables`` first writes the tables as one slice each (what ``write_run`` did before it wrote
in slices) into ``DIR/whole``, so both are measured in the same process on the same plan (docs/benchmarks.md,
"Writing the run directory")::

    .venv/bin/python bench/bench_phase_memory.py hetero_ns3/data/validation/megatron/gpt-7.5b.toml \\
        --set parallelism.global_batch=64 --write /tmp/w --whole-tables

``--previous-writer`` first writes the tables, in the same slices, with the writer ``write_table_files`` had
before session 13 (pandas' ``DataFrame.to_csv`` per slice; text columns converted value by value, non-strings
through ``json.dumps``, for the Parquet row groups) and the timeline with every kernel its own bar into
``DIR/previous``: the baselines of docs/benchmarks.md,
"Writing the tables with Arrow"::

    .venv/bin/python bench/bench_phase_memory.py \\
        hetero_ns3/data/validation/heldout/gpt3-5b-h100x64.toml --write /tmp/w --previous-writer \\
        --steps tasks,flows
"""

from __future__ import annotations

import argparse
import resource
import time

import numpy as np

PHASES = ("compile", "lower", "replay", "summarize", "write")


def _rss_gib() -> float:
    with open("/proc/self/status") as fh:
        for line in fh:
            if line.startswith("VmRSS"):
                return int(line.split()[1]) / 2**20
    return float("nan")


def _hwm_reset() -> None:
    """Reset the kernel's peak-RSS mark of this process (VmHWM), so that the next step's peak is its own."""
    with open("/proc/self/clear_refs", "w") as fh:
        fh.write("5")


def _hwm_gib() -> float:
    with open("/proc/self/status") as fh:
        for line in fh:
            if line.startswith("VmHWM"):
                return int(line.split()[1]) / 2**20
    return float("nan")


STEPS: set[str] | None = None  # --steps: the write steps to run (None: all)


def _step(name: str, fn) -> None:
    """Run one write step; print its CPU and its own peak RSS (VmHWM after a reset)."""
    if STEPS is not None and name.split(" ")[0] not in STEPS:
        return
    _hwm_reset()
    rss0, c0, w0 = _rss_gib(), _cpu_s(), time.perf_counter()
    fn()
    print(
        f"  {name:<22} cpu {_cpu_s() - c0:7.1f} s  wall {time.perf_counter() - w0:7.1f} s  "
        f"rss before {rss0:6.2f} GiB  step peak {_hwm_gib():6.2f} GiB (+{_hwm_gib() - rss0:5.2f})",
        flush=True,
    )


_MARK: list[float] = []  # CPU time at the last mark of --lower-steps


def _lower_steps() -> None:
    """Wrap the lowering's stages (op table, op graph, per-op state, fuser preparation, plan build) so that
    each prints its CPU and its own peak RSS, and so does the stretch between two of them (the emission)."""
    import hetero_ns3.plan.lower as lw
    from hetero_ns3.plan.builder import PlanBuilder
    from hetero_ns3.plan.fuse import Fuser

    def mark(name: str) -> None:
        rss = _rss_gib()
        print(
            f"  {name:<22} cpu {_cpu_s() - _MARK[0]:7.1f} s  peak {_hwm_gib():6.2f} GiB  after {rss:6.2f} GiB",
            flush=True,
        )
        _hwm_reset()
        _MARK[0] = _cpu_s()

    def wrap(owner, attr: str, name: str) -> None:
        fn = getattr(owner, attr)

        def wrapped(*a, **k):
            mark(f"(before {name})")
            out = fn(*a, **k)
            mark(name)
            return out

        setattr(owner, attr, wrapped)

    _MARK.append(_cpu_s())
    wrap(lw, "op_table", "op_table")
    wrap(lw, "op_graph", "op_graph")
    wrap(lw._Lowering, "__init__", "per-op state")
    wrap(Fuser, "prepare", "fuser.prepare")
    wrap(PlanBuilder, "build", "builder.build")


def _previous_writer(chunks, csv_path, parquet_path) -> None:
    """The tables' writer before session 13 (the baseline): pandas' CSV per slice, and per slice an Arrow
    table whose text columns are converted value by value (non-strings through ``json.dumps``)."""
    import json

    import pandas as pd
    import pyarrow as pa
    import pyarrow.parquet as pq

    writer = None
    with open(csv_path, "w", newline="", encoding="utf-8") as fh:
        for i, df in enumerate(chunks):
            df.to_csv(fh, header=i == 0, index=False)
            out = df.copy(deep=False)
            for col in out.columns:
                if out[col].dtype == object or isinstance(out[col].dtype, pd.CategoricalDtype):
                    vals = out[col].tolist()
                    if not all(v is None or isinstance(v, str) for v in vals):
                        vals = [v if v is None or isinstance(v, str) else json.dumps(v, default=str) for v in vals]
                    out[col] = pd.Series(vals, index=out.index, dtype="string")
            table = pa.Table.from_pandas(out, preserve_index=False)
            if writer is None:
                fields = [f.with_type(pa.string()) if f.type == pa.large_string() else f for f in table.schema]
                writer = pq.ParquetWriter(parquet_path, pa.schema(fields))
            writer.write_table(table.cast(writer.schema))
    if writer is not None:
        writer.close()


def _write_phase(out: str, plan, times, meta, flows_df, whole: bool, previous: bool = False) -> None:
    """The pieces of ``write_run`` one by one (same functions, same order)."""
    from pathlib import Path

    from hetero_ns3.results import atomic, rundir, tables
    from hetero_ns3.results.plots import plot_timeline
    from hetero_ns3.results.trace import chrome_trace, write_chrome_trace

    paths = rundir.RunPaths.at(out)
    paths.root.mkdir(parents=True, exist_ok=True)
    _step("plan.npz", lambda: rundir.save_plan(paths.plan, plan))
    if whole:
        w = rundir.RunPaths.at(Path(out) / "whole")
        n = len(plan) + 1
        _step(
            "tasks (one slice)",
            lambda: tables.write_table_files(tables.task_chunks(plan, times, meta, None, n), w.tasks, w.tasks_parquet),
        )
        _step(
            "flows (one slice)",
            lambda: tables.write_table_files(
                tables.flow_chunks(plan, times, meta, flows_df, n), w.flows, w.flows_parquet
            ),
        )
    if previous:
        w = rundir.RunPaths.at(Path(out) / "previous")
        w.root.mkdir(parents=True, exist_ok=True)

        def npz_before() -> None:  # numpy's own writer at its default deflate level (before session 13)
            arrays = {n: getattr(plan, n) for n in ("kind", "gpu", "dst", "size_bytes", "duration_s", "stream")}
            arrays |= {n: getattr(plan, n) for n in ("priority", "dep_ptr", "dep_idx", "label", "category", "channel")}
            names = {n: np.asarray(getattr(plan, n), dtype=str) for n in ("gpus", "labels", "categories")}
            np.savez_compressed(w.plan, **names, **arrays)

        _step("plan.npz (previous: numpy.savez_compressed)", npz_before)
        _step(
            "tasks (previous writer)",
            lambda: _previous_writer(tables.task_chunks(plan, times, meta), w.tasks, w.tasks_parquet),
        )
        _step(
            "flows (previous writer)",
            lambda: _previous_writer(tables.flow_chunks(plan, times, meta, flows_df), w.flows, w.flows_parquet),
        )
    _step(
        f"tasks ({tables.CHUNK_ROWS} rows/slice)",
        lambda: tables.write_table_files(tables.task_chunks(plan, times, meta), paths.tasks, paths.tasks_parquet),
    )
    _step(
        f"flows ({tables.CHUNK_ROWS} rows/slice)",
        lambda: tables.write_table_files(
            tables.flow_chunks(plan, times, meta, flows_df), paths.flows, paths.flows_parquet
        ),
    )
    if previous:  # the trace as one dict per slice through json.dumps (before session 14)
        _step(
            "trace.json (previous: dicts + json.dumps)",
            lambda: atomic.write_json(w.trace, chrome_trace(plan, times, meta, 1_000_000), compact=True),
        )
    _step("trace.json", lambda: write_chrome_trace(paths.trace, plan, times, meta, 1_000_000))
    if previous:
        from hetero_ns3.results import plots

        merge = plots.merge_spans
        plots.merge_spans = lambda s, f, gap: (s, f)  # every kernel its own bar, as before session 13
        try:
            _step(
                "plots/timeline.png (previous: every kernel)",
                lambda: atomic.write_with(
                    Path(out) / "previous" / "timeline.png", lambda t: plot_timeline(plan, times, meta, t, 32)
                ),
            )
        finally:
            plots.merge_spans = merge
    _step(
        "plots/timeline.png",
        lambda: atomic.write_with(paths.timeline_png, lambda t: plot_timeline(plan, times, meta, t, 32)),
    )


def _task_classes(plan) -> None:
    """Tasks per class (compute kernels, fused collective tasks, other communication kernels, barriers,
    flows per category), and the compute kernels that continue a chain: their only dependency is the
    previous kernel of their (GPU, stream), of the same category, and nothing else depends on that one
    (what ``[run] merge_compute_chains`` folds; docs/validation.md, "Where the memory went")."""
    from hetero_ns3.plan.dag import COMPUTE, FLOW, FUSED_LABEL_SUFFIX

    n = len(plan)
    fused_label = np.array([t.endswith(FUSED_LABEL_SUFFIX) for t in plan.labels], dtype=bool)
    fused = fused_label[plan.label] if fused_label.any() else np.zeros(n, dtype=bool)
    comp = plan.kind == COMPUTE
    barrier = comp & (plan.stream < 0)
    kernel = comp & ~barrier & ~fused
    compute_cat = plan.categories.index("compute") if "compute" in plan.categories else -1
    ndeps = np.diff(plan.dep_ptr)
    outdeg = np.bincount(plan.dep_idx, minlength=n)
    one = np.flatnonzero(kernel & (ndeps == 1))
    j = plan.dep_idx[plan.dep_ptr[one]]
    link = (
        kernel[j]
        & (plan.gpu[j] == plan.gpu[one])
        & (plan.stream[j] == plan.stream[one])
        & (plan.category[j] == plan.category[one])
        & (outdeg[j] == 1)
    )
    rows = {
        "compute kernels": kernel & (plan.category == compute_cat),
        "comm kernels (reductions, latencies)": kernel & (plan.category != compute_cat),
        "fused collective tasks": fused,
        "barriers": barrier,
    }
    for c, name in enumerate(plan.categories):
        rows[f"flows {name}"] = (plan.kind == FLOW) & (plan.category == c)
    for name, sel in rows.items():
        k = int(np.count_nonzero(sel))
        if k:
            print(f"  {name:<38} {k:>12} ({100.0 * k / max(1, n):5.1f}%)")
    print(
        f"  {'kernels continuing a one-stream chain':<38} {int(link.sum()):>12} ({100.0 * link.sum() / max(1, n):5.1f}%)"
    )


def _digests(times, summary) -> None:
    """SHA-256 of the start and finish arrays' bytes and of the summary's JSON: equal digests before and
    after a change show that it left every task time and the breakdown bit for bit as they were."""
    import hashlib
    import json

    def sha(data) -> str:  # bytes or a buffer (an array's memory, hashed in place: no copy to raise the peak)
        return hashlib.sha256(data).hexdigest()[:16]

    text = json.dumps(summary.to_dict(), sort_keys=True).encode()
    print(
        f"  digest start {sha(np.ascontiguousarray(times.start_s).data)}  "
        f"finish {sha(np.ascontiguousarray(times.finish_s).data)}  summary {sha(text)}  "
        f"step {summary.iteration_time_s!r}",
        flush=True,
    )


def _plan_digest(plan) -> None:
    """SHA-256 over every array of the plan (name, dtype and bytes) and its label, category and GPU names:
    equal digests before and after a change show that the lowering made the same plan, bit for bit."""
    import hashlib

    h = hashlib.sha256()
    for name, v in sorted(vars(plan).items()):
        if isinstance(v, np.ndarray):
            h.update(f"{name}:{v.dtype.str}:{v.shape}".encode())
            h.update(np.ascontiguousarray(v).data)
        elif isinstance(v, (tuple, list)):
            h.update(f"{name}:{chr(31).join(map(str, v))}".encode())
    print(f"  plan digest {h.hexdigest()[:16]}", flush=True)


def _peak_gib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20


def _cpu_s() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def _report(phase: str, t0: float, extra: str = "") -> None:
    print(
        f"{phase:<10} rss {_rss_gib():6.2f} GiB  peak {_peak_gib():6.2f} GiB  cpu {_cpu_s():7.1f} s  "
        f"wall {time.perf_counter() - t0:7.1f} s  {extra}",
        flush=True,
    )


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("scenario")
    ap.add_argument("--set", action="append", default=[], metavar="SECTION.KEY=VALUE")
    ap.add_argument("--stop", choices=PHASES, default="write", help="last phase to run")
    ap.add_argument("--write", metavar="DIR", help="write the run directory's pieces into DIR (phase 'write')")
    ap.add_argument("--whole-tables", action="store_true", help="also write the tables as one slice (baseline)")
    ap.add_argument(
        "--previous-writer",
        action="store_true",
        help="also write the tables with the writer before session 13 (pandas CSV; baseline) into DIR/previous",
    )
    ap.add_argument(
        "--classes",
        action="store_true",
        help="print tasks per class after lowering (a diagnostic whose temporaries raise the peak; off by default)",
    )
    ap.add_argument(
        "--flows-table",
        action="store_true",
        help="replay as `hetero-ns3 run` does, with the flows table (default without --write: as validate, times only)",
    )
    ap.add_argument(
        "--digest",
        action="store_true",
        help="print SHA-256 digests of every plan array, of the task start and finish times and of summary.json's "
        "content (exactness checks)",
    )
    ap.add_argument(
        "--steps", help="comma list of write steps to run: plan.npz,tasks,flows,trace.json,plots/timeline.png"
    )
    ap.add_argument(
        "--lower-steps",
        action="store_true",
        help="print CPU and peak RSS of each stage of the lowering (op table, op graph, per-op state, emission, build)",
    )
    args = ap.parse_args(argv)
    global STEPS
    STEPS = set(args.steps.split(",")) if args.steps else None

    from hetero_ns3 import pipeline
    from hetero_ns3.network.analytic.backend import AnalyticBackend
    from hetero_ns3.network.backend import get_backend
    from hetero_ns3.plan.dag import FLOW
    from hetero_ns3.results import summarize
    from hetero_ns3.results.summary import summary_columns
    from hetero_ns3.scenario.loader import load_scenario
    from hetero_ns3.topology import build_graph
    from hetero_ns3.workload.planner import plan_scenario

    t0 = time.perf_counter()
    sc = load_scenario(args.scenario, args.set)
    cluster = pipeline.load_run_cluster(sc)
    graph = build_graph(cluster)
    wplan = plan_scenario(sc)
    _report("compile", t0, f"ops {wplan.workload.n_ops}")
    if args.stop == "compile":
        return
    env = pipeline.collective_env(sc, graph)
    if args.lower_steps:
        _hwm_reset()
        _lower_steps()
    # As the run: isolated calls fused when [run] reuse_isolated_collectives = "on" (timed on the analytic backend).
    fuser = pipeline.isolated_fuser(get_backend("analytic"), graph, sc, env)
    low = pipeline.lower_plan(wplan, sc, env, cluster, fuser=fuser)
    plan = low.plan
    arrays = sum(v.nbytes for v in vars(plan).values() if isinstance(v, np.ndarray))
    _report(
        "lower",
        t0,
        f"tasks {len(plan)} flows {plan.n_flows} deps {plan.dep_idx.size} arrays {arrays / 2**30:.2f} GiB "
        f"({arrays / max(1, len(plan)):.0f} B/task)",
    )
    for c, name in enumerate(plan.categories):
        sel = plan.category == c
        print(f"  {name:<10} tasks {int(sel.sum()):>12}  flows {int((sel & (plan.kind == FLOW)).sum()):>12}")
    if args.digest:
        _plan_digest(plan)
    if args.classes:  # (its temporaries, ~35 bytes per task, would otherwise set the run's peak)
        _task_classes(plan)
    if args.stop == "lower":
        return
    # As validation.simulate_scenario: keep what the summary needs of the workload, drop the rest.
    gmeta = pipeline.gpu_meta(cluster, wplan, sc.faults)
    model_flops, peak_flops, compute_only = wplan.model_flops, wplan.peak_flops, wplan.compute_time
    del wplan, low
    run = sc.run
    backend = AnalyticBackend()
    if args.write or args.flows_table:  # the run path: task times and the flows table
        res = backend.run(plan, graph, sc.network, seed=run.seed, faults=sc.faults, stall_limit_s=run.stall_limit)
        times, flows_df, done = res.times, res.flows, res.completed
    else:  # as validate: task times only; route, drop the columns neither the loop nor the summary reads, replay
        job = backend.prepare_times(plan, graph, sc.network, seed=run.seed, faults=sc.faults)
        plan = summary_columns(plan)
        times, flows_df, done = job.run().times, None, True
        del job
    _report("replay", t0, f"makespan {times.makespan_s:.6f} s completed {done}")
    res = None
    if args.stop == "replay":
        return
    summary = summarize(plan, times, gmeta, None)
    t = summary.iteration_time_s
    mfu = 100.0 * model_flops / (t * peak_flops) if t else 0.0
    _report("summarize", t0, f"step {t:.6f} s  MFU {mfu:.2f}%  compute-only {compute_only:.6f} s")
    if args.digest:
        _digests(times, summary)
    if args.stop == "summarize" or not args.write:
        return
    from hetero_ns3.results.meta import resolve_gpu_meta

    _write_phase(
        args.write, plan, times, resolve_gpu_meta(plan.gpus, gmeta), flows_df, args.whole_tables, args.previous_writer
    )
    _report("write", t0)


if __name__ == "__main__":
    main()
