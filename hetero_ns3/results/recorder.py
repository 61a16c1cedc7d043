"""Keep what a run has produced so far, so that a failure or Ctrl-C still leaves a run directory.

Usage (the CLI's ``run`` command)::

    with recording_run(out_dir, scenario_resolved=doc, versions=versions_info(seed)) as rec:
        rec.plan, rec.gpu_meta = plan, gpu_meta
        times = backend.run(plan, progress=lambda partial: setattr(rec, "times", partial))
        paths = rec.finish(times, flows_df=backend_flows)

An exception inside the block writes :func:`~hetero_ns3.results.rundir.write_partial` with status
``failed`` (``interrupted`` for KeyboardInterrupt, SIGINT or SIGTERM: see :mod:`hetero_ns3.signals`) and
the reason, then propagates unchanged. On entry the files of a previous run in ``out_dir`` are removed
(:func:`~hetero_ns3.results.rundir.clear_run_dir`), ``summary.json`` first.
"""

from __future__ import annotations

import contextlib
import logging
import os
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from hetero_ns3.plan.dag import ExecutionPlan, TaskTimes
from hetero_ns3.results.meta import GpuMetaLike
from hetero_ns3.results.rundir import (
    TABLE_FORMATS,
    RunPaths,
    check_table_formats,
    clear_run_dir,
    write_partial,
    write_run,
)
from hetero_ns3.signals import interrupt_reason

log = logging.getLogger(__name__)


@dataclass
class RunRecorder:
    """Mutable holder of a run's artefacts as they appear (plan, then times, then per-flow extras)."""

    out_dir: str | os.PathLike[str]
    scenario_resolved: Mapping[str, Any] | None = None
    versions: Mapping[str, Any] | None = None
    plan: ExecutionPlan | None = None
    gpu_meta: Mapping[str, GpuMetaLike] | None = None
    times: TaskTimes | None = None
    """Latest (possibly partial, NaN for unfinished tasks) task times."""
    flows_df: pd.DataFrame | None = None
    iteration: np.ndarray | None = None
    """Training iteration of each task of ``plan`` (None: a one-iteration run)."""
    extra_summary: dict[str, Any] = field(default_factory=dict)
    links_df: pd.DataFrame | None = None
    """Per-link bytes by job (multi-job runs), written with the complete run."""
    paths: RunPaths | None = None
    """Set once the complete run directory is written."""
    tables: tuple[str, ...] = TABLE_FORMATS
    """Formats of the tables (``run.tables``)."""
    trace: bool = True
    """Write ``trace.json`` (``run.trace``)."""

    def finish(
        self, times: TaskTimes, flows_df: pd.DataFrame | None = None, extra_summary: Mapping[str, Any] | None = None
    ) -> RunPaths:
        """Write the complete run directory (status ``ok``)."""
        if self.plan is None:
            raise ValueError("RunRecorder.finish: set .plan before finishing the run")
        self.times = times
        if flows_df is not None:
            self.flows_df = flows_df
        self.extra_summary.update(extra_summary or {})
        self.paths = write_run(
            self.out_dir,
            scenario_resolved=self.scenario_resolved or {},
            versions=self.versions or {},
            plan=self.plan,
            times=times,
            gpu_meta=self.gpu_meta,
            flows_df=self.flows_df,
            iteration=self.iteration,
            extra_summary=self.extra_summary,
            links_df=self.links_df,
            tables=self.tables,
            trace=self.trace,
        )
        return self.paths

    def write_partial(self, reason: str, status: str = "failed") -> RunPaths:
        """Write what is there now with ``status`` and ``reason``."""
        return write_partial(
            self.out_dir,
            reason,
            status=status,
            scenario_resolved=self.scenario_resolved,
            versions=self.versions,
            plan=self.plan,
            times=self.times,
            gpu_meta=self.gpu_meta,
            flows_df=self.flows_df,
            extra_summary=self.extra_summary,
            iteration=self.iteration,
            tables=self.tables,
            trace=self.trace,
        )


@contextlib.contextmanager
def recording_run(
    out_dir: str | os.PathLike[str],
    *,
    scenario_resolved: Mapping[str, Any] | None = None,
    versions: Mapping[str, Any] | None = None,
    tables: Sequence[str] = TABLE_FORMATS,
    trace: bool = True,
) -> Iterator[RunRecorder]:
    """Yield a :class:`RunRecorder`; on an exception write the partial run directory, then re-raise.
    ``tables`` and ``trace``: which table formats and whether ``trace.json`` are written (``run.tables``,
    ``run.trace``)."""
    rec = RunRecorder(
        out_dir,
        scenario_resolved=scenario_resolved,
        versions=versions,
        tables=check_table_formats(tables),
        trace=trace,
    )
    clear_run_dir(out_dir)  # before any work: no previous run's summary.json may look current
    try:
        yield rec
    except BaseException as err:
        if rec.paths is None:  # the complete directory was not written
            interrupted = isinstance(err, KeyboardInterrupt)
            reason = interrupt_reason(err) if interrupted else f"{type(err).__name__}: {err}"
            try:
                rec.write_partial(reason, status="interrupted" if interrupted else "failed")
            except Exception as werr:  # noqa: BLE001 - never mask the run's own error
                log.error("could not write the partial run directory %s: %s", out_dir, werr)
        raise
