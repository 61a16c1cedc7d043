"""The self-describing run directory.

Layout (every file written atomically: temporary file in the same directory, then ``os.replace``)::

    scenario.resolved.json   the scenario after defaults and --set overrides
    versions.json            package, Python, libraries, ns-3 wheel, git sha, seed
    plan.npz                 the ExecutionPlan arrays (numpy), reloadable with load_plan()
    tasks.csv                one row per task (tables.tasks_frame), with its training iteration
    flows.csv                one row per flow (tables.flows_frame)
    tasks.parquet            the same tables as Parquet (typed columns; schema in docs/results.md)
    flows.parquet
    links.csv                multi-job runs: payload bytes per directed link and job (results.link_table)
    links.parquet
    trace.json               Chrome trace / Perfetto
    plots/breakdown.png      breakdown bars per GPU type
    plots/timeline.png       Gantt of the run (all its iterations)
    summary.json             status, reason, iteration time(s), breakdown, counts; written last

A complete run has ``summary.json`` with ``status: "ok"``. A failed or interrupted run
(:func:`write_partial`) has whatever could be written plus ``summary.json`` with ``status``
``"failed"`` or ``"interrupted"`` and the ``reason``.
"""

from __future__ import annotations

import contextlib
import datetime as _dt
import logging
import os
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from hetero_ns3.plan.dag import ExecutionPlan, TaskTimes
from hetero_ns3.results import atomic
from hetero_ns3.results.meta import GpuMeta, GpuMetaLike, resolve_gpu_meta
from hetero_ns3.results.summary import Summary, plan_counts, summarize
from hetero_ns3.results.tables import flow_chunks, task_chunks, write_parquet_chunks, write_table_files
from hetero_ns3.results.trace import write_chrome_trace

log = logging.getLogger(__name__)

STATUSES = ("ok", "failed", "interrupted")

TABLE_FORMATS = ("csv", "parquet")
"""The formats a run's tables (tasks, flows, links) can be written in (``run.tables``)."""


@dataclass(frozen=True)
class RunPaths:
    """Where each artefact of a run directory lives."""

    root: Path
    scenario: Path
    versions: Path
    plan: Path
    tasks: Path
    flows: Path
    tasks_parquet: Path
    flows_parquet: Path
    links: Path
    links_parquet: Path
    trace: Path
    summary: Path
    plots: Path
    breakdown_png: Path
    timeline_png: Path

    @classmethod
    def at(cls, out_dir: str | os.PathLike[str]) -> RunPaths:
        root = Path(out_dir)
        return cls(
            root=root,
            scenario=root / "scenario.resolved.json",
            versions=root / "versions.json",
            plan=root / "plan.npz",
            tasks=root / "tasks.csv",
            flows=root / "flows.csv",
            tasks_parquet=root / "tasks.parquet",
            flows_parquet=root / "flows.parquet",
            links=root / "links.csv",
            links_parquet=root / "links.parquet",
            trace=root / "trace.json",
            summary=root / "summary.json",
            plots=root / "plots",
            breakdown_png=root / "plots" / "breakdown.png",
            timeline_png=root / "plots" / "timeline.png",
        )


def check_table_formats(tables: Sequence[str]) -> tuple[str, ...]:
    """``tables`` as a tuple if it names one or more of :data:`TABLE_FORMATS`, each once; else ValueError."""
    out = tuple(tables)
    bad = [t for t in out if t not in TABLE_FORMATS]
    if not out or bad or len(set(out)) != len(out):
        raise ValueError(f"tables {list(out)!r} must name one or more of {list(TABLE_FORMATS)}, each once")
    return out


PLAN_ZIP_LEVEL = 1
"""Deflate level of ``plan.npz``: level 1 writes a 4 M-task plan in 1.5 s against ``numpy.savez_compressed``'s
9.0 s, 21.3 against 21.1 MB (docs/benchmarks.md, "Writing the tables with Arrow")."""


def save_plan(path: str | os.PathLike[str], plan: ExecutionPlan) -> Path:
    """Write the plan's arrays to ``path`` (.npz: a zip of ``.npy`` members, deflated at :data:`PLAN_ZIP_LEVEL`,
    what ``numpy.load`` reads; atomic)."""
    import zipfile

    arrays = {
        "gpus": np.asarray(plan.gpus, dtype=str),
        "labels": np.asarray(plan.labels, dtype=str),
        "categories": np.asarray(plan.categories, dtype=str),
        **{k: getattr(plan, k) for k in ("kind", "gpu", "dst", "size_bytes", "duration_s", "stream", "priority")},
        "dep_ptr": plan.dep_ptr,
        "dep_idx": plan.dep_idx,
        "label": plan.label,
        "category": plan.category,
        "channel": plan.channel,
    }

    def _w(tmp: Path) -> None:
        with zipfile.ZipFile(tmp, "w", compression=zipfile.ZIP_DEFLATED, compresslevel=PLAN_ZIP_LEVEL) as zf:
            for name, arr in arrays.items():
                with zf.open(f"{name}.npy", "w", force_zip64=True) as fh:
                    np.lib.format.write_array(fh, np.asanyarray(arr), allow_pickle=False)

    return atomic.write_with(path, _w)


def channels_from_labels(labels: np.ndarray, label: np.ndarray) -> np.ndarray:
    """The channel column of a ``plan.npz`` saved before it existed: the ``ch<c>`` word of each task's
    label (how those versions read it), -1 without one."""
    per_label = [next((int(w[2:]) for w in str(t).split() if w[:2] == "ch" and w[2:].isdigit()), -1) for t in labels]
    return np.asarray(per_label or [-1], dtype=np.int16)[label]


def load_plan(path: str | os.PathLike[str]) -> ExecutionPlan:
    """Read a plan written by :func:`save_plan` (validated)."""
    with np.load(path, allow_pickle=False) as z:
        channel = z["channel"] if "channel" in z.files else channels_from_labels(z["labels"], z["label"])
        plan = ExecutionPlan(
            channel=channel,
            gpus=tuple(z["gpus"].tolist()),
            labels=tuple(z["labels"].tolist()),
            categories=tuple(z["categories"].tolist()),
            **{
                k: z[k]
                for k in (
                    "kind",
                    "gpu",
                    "dst",
                    "size_bytes",
                    "duration_s",
                    "stream",
                    "priority",
                    "dep_ptr",
                    "dep_idx",
                    "label",
                    "category",
                )
            },
        )
    plan.validate()
    return plan


def _write_csv(path: Path, df: pd.DataFrame) -> None:
    atomic.write_with(path, lambda tmp: df.to_csv(tmp, index=False))


def _write_parquet(path: Path, df: pd.DataFrame) -> None:
    from hetero_ns3.results.tables import write_parquet

    write_parquet(path, df)


def _write_table(
    what: str,
    chunks: Callable[[], Iterable[pd.DataFrame]],
    csv_path: Path,
    pq_path: Path,
    tables: Sequence[str],
) -> tuple[list[str], BaseException | None]:
    """Write one table (``what``: tasks or flows) in the formats ``tables``; return the files written and the
    Parquet failure (None: none).

    With CSV asked for, both files come from one pass over the slices; a CSV failure raises, a Parquet one is
    returned. Parquet alone: a Parquet failure is returned and the table is written as CSV instead, so no
    computed row is lost."""
    want_pq = "parquet" in tables
    if "csv" in tables:
        err = write_table_files(chunks(), csv_path, pq_path if want_pq else None)
        return [f"{what}.csv"] + ([f"{what}.parquet"] if want_pq and err is None else []), err
    err = write_parquet_chunks(chunks(), pq_path)
    if err is None:
        return [f"{what}.parquet"], None
    log.warning("could not write %s.parquet (%s); writing %s.csv instead", what, err, what)
    write_table_files(chunks(), csv_path, None)
    return [f"{what}.csv"], err


def _write_partial_table(
    errors: dict[str, str],
    files: list[str],
    what: str,
    chunks: Callable[[], Iterable[pd.DataFrame]],
    csv_path: Path,
    pq_path: Path,
    tables: Sequence[str] = TABLE_FORMATS,
) -> None:
    """Write one table of a partial run (:func:`_write_table`), recording failures.

    Building the table's slices fails before any file is written (recorded under ``what``); a CSV failure
    is recorded under ``<what>.csv`` and its Parquet is then not kept either."""
    holder: dict[str, Any] = {}

    def _write() -> None:
        holder["files"], holder["pq"] = _write_table(what, chunks, csv_path, pq_path, tables)

    try:
        gen = iter(chunks())
        first = next(gen)
    except Exception as err:  # noqa: BLE001 - the slices cannot be built: no file of this table
        log.warning("could not write %s: %s", what, err)
        errors[what] = f"{type(err).__name__}: {err}"
        return
    del gen, first
    if not _try(errors, f"{what}.csv", _write):
        errors.setdefault(f"{what}.parquet", "not written: the CSV failed")
        return
    files.extend(holder["files"])
    pq_err = holder["pq"]
    if pq_err is not None:
        log.warning("could not write %s.parquet: %s", what, pq_err)
        errors[f"{what}.parquet"] = f"{type(pq_err).__name__}: {pq_err}"


def _now() -> str:
    return _dt.datetime.now(_dt.UTC).isoformat(timespec="seconds")


def _try(errors: dict[str, str], what: str, fn: Callable[[], Any]) -> bool:
    """Run one artefact writer; record (not raise) its failure. Used where a run must leave what it can."""
    try:
        fn()
        return True
    except Exception as err:  # noqa: BLE001 - a failing artefact must not lose the others
        log.warning("could not write %s: %s", what, err)
        errors[what] = f"{type(err).__name__}: {err}"
        return False


def _start_writing(paths: RunPaths) -> None:
    """Create the directory and drop an older ``summary.json``: until the new one is written last, the
    directory reads as incomplete instead of pairing an old summary with new tables."""
    paths.root.mkdir(parents=True, exist_ok=True)
    paths.summary.unlink(missing_ok=True)


def clear_run_dir(out_dir: str | os.PathLike[str]) -> list[str]:
    """Remove a previous run's files from ``out_dir`` (only the names a run writes); return what went.

    ``summary.json`` goes first, with one atomic unlink: from then on the directory reads as incomplete,
    so an interruption part-way through clearing never leaves an old summary next to new tables. Files
    that are not a run's (and directories other than ``plots/``) are left alone.
    """
    paths = RunPaths.at(out_dir)
    if not paths.root.is_dir():
        return []
    removed = []
    order = [paths.summary, paths.scenario, paths.versions, paths.plan, paths.tasks, paths.flows, paths.trace]
    order += [paths.tasks_parquet, paths.flows_parquet, paths.links, paths.links_parquet]
    order += [paths.breakdown_png, paths.timeline_png]
    for p in order:
        if p.is_file() or p.is_symlink():
            p.unlink(missing_ok=True)
            removed.append(str(p.relative_to(paths.root)))
    for d in (paths.root, paths.plots):
        if d.is_dir():
            for tmp in d.glob(".*.tmp"):  # left by an atomic write that was killed
                tmp.unlink(missing_ok=True)
    with contextlib.suppress(OSError):
        paths.plots.rmdir()  # only if empty
    if removed:
        log.info("cleared the previous run in %s (%s)", paths.root, ", ".join(removed))
    return removed


def _gpu_table(plan: ExecutionPlan, meta: Sequence[GpuMeta]) -> dict[str, dict[str, Any]]:
    """GPU name -> {gpu_type, node, slowdown}, in plan order (lets a reader rebuild ``gpu_meta``)."""
    return {
        g: {"gpu_type": m.gpu_type, "node": m.node, "slowdown": m.slowdown}
        for g, m in zip(plan.gpus, meta, strict=True)
    }


def _summary_doc(
    status: str,
    reason: str,
    summary: Summary | None,
    counts: dict[str, Any],
    files: list[str],
    errors: dict[str, str],
    extra: Mapping[str, Any] | None,
    gpus: dict[str, dict[str, Any]] | None = None,
) -> dict[str, Any]:
    doc: dict[str, Any] = dict(extra or {})
    core: dict[str, Any] = {"status": status, "reason": reason, "written_at": _now()}
    if summary is not None:
        core.update(summary.to_dict())
    else:
        core.update({"iteration_time_s": None, "breakdown": None, "counts": counts})
    if gpus is not None:
        core["gpus"] = gpus
    core["files"] = files
    if errors:
        core["write_errors"] = errors
    doc.update(core)
    return doc


def write_run(
    out_dir: str | os.PathLike[str],
    *,
    scenario_resolved: Mapping[str, Any],
    versions: Mapping[str, Any],
    plan: ExecutionPlan,
    times: TaskTimes,
    gpu_meta: Mapping[str, GpuMetaLike] | None,
    flows_df: pd.DataFrame | None = None,
    iteration: np.ndarray | None = None,
    status: str = "ok",
    reason: str = "",
    extra_summary: Mapping[str, Any] | None = None,
    links_df: pd.DataFrame | None = None,
    trace_max_events: int = 1_000_000,
    timeline_max_gpus: int = 32,
    plots: bool = True,
    tables: Sequence[str] = TABLE_FORMATS,
    trace: bool = True,
) -> RunPaths:
    """Write the whole run directory of a finished run and return its paths.

    The summary is computed first (raises SimulationError on unfinished tasks: use
    :func:`write_partial` then). Tables and JSON raise on I/O errors; a failing trace or plot is
    recorded under ``write_errors`` in ``summary.json`` instead. ``summary.json`` is written last.
    ``plots=False`` skips ``plots/`` (matplotlib costs about a second per run on first use).
    ``iteration`` (one index per task) marks a run of several training iterations. ``links_df`` (the
    ``links`` table of :mod:`hetero_ns3.results.link_table`) is written as ``links.csv`` / ``links.parquet``.
    ``tables``: the formats of the tables (a subset of :data:`TABLE_FORMATS`, ``run.tables``); ``trace=False``
    skips ``trace.json`` (``run.trace``).
    """
    tables = check_table_formats(tables)
    if status not in STATUSES:
        raise ValueError(f"status {status!r} is not one of {STATUSES}")
    paths = RunPaths.at(out_dir)
    meta = resolve_gpu_meta(plan.gpus, gpu_meta)
    summary = summarize(plan, times, gpu_meta, iteration)
    _start_writing(paths)
    atomic.write_json(paths.scenario, dict(scenario_resolved))
    atomic.write_json(paths.versions, dict(versions))
    save_plan(paths.plan, plan)
    files = ["scenario.resolved.json", "versions.json", "plan.npz"]
    errors: dict[str, str] = {}
    for what, chunks, csv_path, pq_path in (
        ("tasks", partial(task_chunks, plan, times, meta, iteration), paths.tasks, paths.tasks_parquet),
        ("flows", partial(flow_chunks, plan, times, meta, flows_df), paths.flows, paths.flows_parquet),
    ):
        written, err = _write_table(what, chunks, csv_path, pq_path, tables)
        files.extend(written)
        if err is not None:
            log.warning("could not write %s.parquet: %s", what, err)
            errors[f"{what}.parquet"] = f"{type(err).__name__}: {err}"
    if links_df is not None:
        if "csv" in tables:
            _write_csv(paths.links, links_df)
            files.append("links.csv")
        if "parquet" in tables:
            if _try(errors, "links.parquet", partial(_write_parquet, paths.links_parquet, links_df)):
                files.append("links.parquet")
            elif "csv" not in tables:
                _write_csv(paths.links, links_df)
                files.append("links.csv")
    if trace and _try(
        errors,
        "trace.json",
        lambda: write_chrome_trace(paths.trace, plan, times, meta, trace_max_events),
    ):
        files.append("trace.json")
    if plots:
        from hetero_ns3.results.plots import plot_breakdown, plot_timeline  # matplotlib: ~0.5 s, only when plotting

        summary_ends = np.cumsum(summary.iteration_times_s) + float(np.min(times.start_s)) if len(plan) else None

        if _try(
            errors,
            "plots/breakdown.png",
            lambda: atomic.write_with(paths.breakdown_png, lambda t: plot_breakdown(summary, t)),
        ):
            files.append("plots/breakdown.png")
        if _try(
            errors,
            "plots/timeline.png",
            lambda: atomic.write_with(
                paths.timeline_png,
                lambda t: plot_timeline(plan, times, meta, t, timeline_max_gpus, iteration_ends=summary_ends),
            ),
        ):
            files.append("plots/timeline.png")
    files.append("summary.json")
    doc = _summary_doc(status, reason, summary, {}, files, errors, extra_summary, _gpu_table(plan, meta))
    atomic.write_json(paths.summary, doc)
    return paths


def write_partial(
    out_dir: str | os.PathLike[str],
    reason: str,
    *,
    status: str = "failed",
    scenario_resolved: Mapping[str, Any] | None = None,
    versions: Mapping[str, Any] | None = None,
    plan: ExecutionPlan | None = None,
    times: TaskTimes | None = None,
    gpu_meta: Mapping[str, GpuMetaLike] | None = None,
    flows_df: pd.DataFrame | None = None,
    extra_summary: Mapping[str, Any] | None = None,
    trace_max_events: int = 1_000_000,
    iteration: np.ndarray | None = None,
    tables: Sequence[str] = TABLE_FORMATS,
    trace: bool = True,
) -> RunPaths:
    """Write what an interrupted or failed run has, plus ``summary.json`` with the status and reason.

    ``times`` may hold NaN for tasks that did not finish (or be None: tables then carry NaN times).
    Never raises for an artefact that cannot be written (it is listed in ``write_errors``) except
    for ``summary.json`` itself. If every task finished, the breakdown is computed as usual.
    """
    if status not in ("failed", "interrupted"):
        raise ValueError(f"partial status {status!r} must be 'failed' or 'interrupted'")
    tables = check_table_formats(tables)
    paths = RunPaths.at(out_dir)
    _start_writing(paths)
    errors: dict[str, str] = {}
    files: list[str] = []
    if scenario_resolved is not None and _try(
        errors, "scenario.resolved.json", lambda: atomic.write_json(paths.scenario, dict(scenario_resolved))
    ):
        files.append("scenario.resolved.json")
    if versions is not None and _try(
        errors, "versions.json", lambda: atomic.write_json(paths.versions, dict(versions))
    ):
        files.append("versions.json")
    counts: dict[str, Any] = {}
    summary: Summary | None = None
    meta = None
    if plan is not None:
        try:
            meta = resolve_gpu_meta(plan.gpus, gpu_meta)
        except Exception as err:  # noqa: BLE001
            errors["gpu_meta"] = f"{type(err).__name__}: {err}"
            meta = resolve_gpu_meta(plan.gpus, None)
        counts = plan_counts(plan, times, meta)
        if _try(errors, "plan.npz", lambda: save_plan(paths.plan, plan)):
            files.append("plan.npz")
        for what, chunks, csv_path, pq_path in (
            ("tasks", partial(task_chunks, plan, times, meta, iteration), paths.tasks, paths.tasks_parquet),
            ("flows", partial(flow_chunks, plan, times, meta, flows_df), paths.flows, paths.flows_parquet),
        ):
            _write_partial_table(errors, files, what, chunks, csv_path, pq_path, tables)
        if times is not None:
            fin = np.asarray(times.finish_s, dtype=float)
            counts["simulated_time_reached_s"] = float(np.nanmax(fin)) if np.isfinite(fin).any() else 0.0
            if trace and _try(
                errors,
                "trace.json",
                lambda: write_chrome_trace(paths.trace, plan, times, meta, trace_max_events),
            ):
                files.append("trace.json")
            if np.isfinite(fin).all() and np.isfinite(np.asarray(times.start_s, dtype=float)).all():
                try:
                    summary = summarize(plan, times, gpu_meta, iteration)
                except Exception as err:  # noqa: BLE001
                    errors["breakdown"] = f"{type(err).__name__}: {err}"
    files.append("summary.json")
    gpus = _gpu_table(plan, meta) if plan is not None and meta is not None else None
    doc = _summary_doc(status, reason, summary, counts, files, errors, extra_summary, gpus)
    if summary is not None:
        doc["counts"].update(counts)
    atomic.write_json(paths.summary, doc)
    return paths
