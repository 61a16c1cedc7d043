"""Read a run directory back (for notebooks, comparisons and re-analysis)."""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from hetero_ns3.errors import ScenarioError
from hetero_ns3.plan.dag import ExecutionPlan, TaskTimes
from hetero_ns3.results.meta import GpuMeta
from hetero_ns3.results.rundir import RunPaths, load_plan
from hetero_ns3.results.summary import Summary, summarize


@dataclass(frozen=True)
class RunData:
    """What a run directory holds; missing artefacts (partial runs) are None."""

    paths: RunPaths
    summary: dict[str, Any]
    versions: dict[str, Any] | None
    scenario: dict[str, Any] | None
    plan: ExecutionPlan | None
    tasks: pd.DataFrame | None
    flows: pd.DataFrame | None

    @property
    def status(self) -> str:
        return str(self.summary.get("status", ""))

    @property
    def times(self) -> TaskTimes | None:
        """Task times from ``tasks.csv`` (or ``tasks.parquet``) (NaN for unfinished tasks), indexed by task id."""
        if self.tasks is None:
            return None
        t = self.tasks.sort_values("id")
        return TaskTimes(t["start_s"].to_numpy(dtype=float), t["finish_s"].to_numpy(dtype=float))

    @property
    def iteration(self) -> np.ndarray | None:
        """Training iteration of each task, from ``tasks.csv`` (or ``.parquet``) (None if the table has no such column)."""
        if self.tasks is None or "iteration" not in self.tasks.columns:
            return None
        return self.tasks.sort_values("id")["iteration"].to_numpy(dtype=np.int64)

    @property
    def gpu_meta(self) -> dict[str, GpuMeta] | None:
        """GPU name -> GpuMeta, from ``summary.json``'s ``gpus`` table."""
        gpus = self.summary.get("gpus")
        if not gpus:
            return None
        return {g: GpuMeta(str(v["gpu_type"]), v["node"], float(v.get("slowdown", 1.0))) for g, v in gpus.items()}

    def resummarize(self) -> Summary:
        """Recompute the breakdown from the stored plan and task times (e.g. after changing the rules)."""
        times = self.times
        if self.plan is None or times is None:
            raise ScenarioError(f"{self.paths.root}: the run directory has no plan.npz or tasks.csv to summarize")
        return summarize(self.plan, times, self.gpu_meta, self.iteration)


def _json(path: Path) -> dict[str, Any] | None:
    return json.loads(path.read_text(encoding="utf-8")) if path.is_file() else None


def _read_table(csv_path: Path, parquet_path: Path) -> pd.DataFrame | None:
    """A run's table from its CSV file, or from its Parquet file where only that was written (``run.tables``);
    None if neither exists."""
    if csv_path.is_file():
        return pd.read_csv(csv_path, keep_default_na=False, na_values=[""])
    if parquet_path.is_file():
        return pd.read_parquet(parquet_path)
    return None


def load_run(out_dir: str | os.PathLike[str]) -> RunData:
    """Load a run directory written by ``write_run`` or ``write_partial``."""
    paths = RunPaths.at(out_dir)
    summary = _json(paths.summary)
    if summary is None:
        raise ScenarioError(
            f"{paths.root} ({paths.summary.name} missing) is not a run directory; give one that hetero-ns3 run wrote"
        )
    tasks = _read_table(paths.tasks, paths.tasks_parquet)
    flows = _read_table(paths.flows, paths.flows_parquet)
    for df in (tasks, flows):
        if df is not None:
            for col in ("start_s", "finish_s"):
                df[col] = pd.to_numeric(df[col], errors="coerce").astype(np.float64)
    return RunData(
        paths=paths,
        summary=summary,
        versions=_json(paths.versions),
        scenario=_json(paths.scenario),
        plan=load_plan(paths.plan) if paths.plan.is_file() else None,
        tasks=tasks,
        flows=flows,
    )
