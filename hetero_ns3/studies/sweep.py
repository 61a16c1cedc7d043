"""Run a study: expand, skip finished points (``resume``), run the rest on an executor, write the table.

Output directory::

    study.json        the study (source, axes) and its points (id, coordinates), written first
    runs/<point-id>/  one ordinary run directory per point, plus point.json
    study.parquet     one row per point (hetero_ns3.studies.table), written last (also when interrupted)
"""

from __future__ import annotations

import signal
import sys
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from hetero_ns3.results import atomic
from hetero_ns3.studies.executors import Executor
from hetero_ns3.studies.point import POINT_FILE, PointResult, PointTask, point_dir_complete
from hetero_ns3.studies.spec import Point, Study, expand
from hetero_ns3.studies.table import TABLE_FILE, study_frame, write_table

MANIFEST_FILE = "study.json"


class SweepTerminated(KeyboardInterrupt):
    """The sweep's process got SIGTERM (raised in the main thread by the handler)."""


@dataclass
class SweepOutcome:
    points: list[Point]
    skipped: list[str] = field(default_factory=list)
    results: dict[str, PointResult] = field(default_factory=dict)
    table: Path | None = None
    wall_s: float = 0.0

    @property
    def failed(self) -> list[str]:
        return [pid for pid, r in self.results.items() if r.status != "ok"]


def manifest(study: Study, points: list[Point]) -> dict[str, Any]:
    return {
        "name": study.name,
        "description": study.description,
        "source": study.source,
        "kind": study.kind,
        "axes": list(study.axis_keys),
        "points": [{"point_id": p.point_id, "index": p.index, "coords": [[k, v] for k, v in p.coords]} for p in points],
    }


def plan_sweep(study: Study, out_dir: Path, resume: bool) -> tuple[list[Point], list[PointTask], list[str]]:
    """Points, the tasks still to run, and the ids skipped because their run directory is complete."""
    points = expand(study)
    tasks, skipped = [], []
    for p in points:
        run_dir = out_dir / "runs" / p.point_id
        if resume and point_dir_complete(run_dir, p.point_id):
            skipped.append(p.point_id)
            continue
        tasks.append(PointTask(study.kind, p.point_id, p.coords, p.raw, str(study.base_dir), str(run_dir)))
    return points, tasks, skipped


def _on_sigterm(signum: int, frame: Any) -> None:
    raise SweepTerminated(f"signal {signum}")


def run_sweep(
    study: Study,
    out_dir: str | Path,
    executor: Executor,
    *,
    resume: bool = False,
    on_result: Callable[[Point, PointResult, int, int], None] | None = None,
    progress: bool = True,
) -> SweepOutcome:
    """Run every point not already complete; the study table is written at the end, also when stopped."""
    out = Path(out_dir)
    t0 = time.perf_counter()
    points, tasks, skipped = plan_sweep(study, out, resume)
    out.mkdir(parents=True, exist_ok=True)
    atomic.write_json(out / MANIFEST_FILE, manifest(study, points))
    outcome = SweepOutcome(points, skipped)
    by_id = {p.point_id: p for p in points}
    in_main = _is_main_thread()
    old = signal.signal(signal.SIGTERM, _on_sigterm) if in_main else None
    bar = None
    if progress and tasks:
        from tqdm import tqdm

        tqdm.monitor_interval = 0
        bar = tqdm(
            total=len(tasks),
            desc=f"sweep {study.name}",
            unit="point",
            file=sys.stderr,
            dynamic_ncols=True,
            disable=None,
        )
    try:
        for res in executor.run(tasks):
            outcome.results[res.point_id] = res
            if res.status != "ok":
                _record_lost(out / "runs" / res.point_id, res, by_id[res.point_id])
            if bar is not None:
                bar.update(1)
            if on_result is not None:
                on_result(by_id[res.point_id], res, len(outcome.results), len(tasks))
    finally:
        if bar is not None:
            bar.close()
        try:
            executor.close()
        finally:
            if in_main:
                signal.signal(signal.SIGTERM, old)
            outcome.table = write_table(study_frame(study, points, out), out / TABLE_FILE)
            outcome.wall_s = time.perf_counter() - t0
    return outcome


def _record_lost(run_dir: Path, res: PointResult, point: Point) -> None:
    """A point whose worker died wrote no point.json: record the failure in its run directory."""
    pj = run_dir / POINT_FILE
    if pj.is_file():
        return
    run_dir.mkdir(parents=True, exist_ok=True)
    doc = {**asdict(res), "kind": "", "coords": [[k, v] for k, v in point.coords]}
    atomic.write_json(pj, doc)


def _is_main_thread() -> bool:
    import threading

    return threading.current_thread() is threading.main_thread()
