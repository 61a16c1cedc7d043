"""One point of a study, run in a worker: what ``hetero-ns3 run`` does (or one collective call),
into an ordinary run directory, plus ``point.json`` (the point's coordinates, status, error, wall time).

:func:`run_point` is the function every executor (process pool, Dask) calls; it never raises for a
failing point: the error is recorded in the run directory and returned.
"""

from __future__ import annotations

import json
import os
import socket
import time
import traceback
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from hetero_ns3.results import atomic

POINT_FILE = "point.json"


def run_training(scenario: Any, out_dir: Path) -> Any:
    """The single place studies call the run pipeline (``hetero-ns3 run``'s function)."""
    from hetero_ns3.pipeline import run_scenario

    return run_scenario(scenario, out_dir, progress=None)


def load_point_scenario(kind: str, raw: Mapping[str, Any], base_dir: Path | str) -> dict[str, Any]:
    """Validate a point's scenario table; return its resolved plain form (what the point id hashes)."""
    if kind == "collective":
        from hetero_ns3.studies.collective_point import load_collective

        return load_collective(raw, base_dir).resolved()
    from hetero_ns3.scenario import scenario_from_dict

    return scenario_from_dict(raw, source="<study point>", base_dir=Path(base_dir)).resolved()


@dataclass(frozen=True)
class PointTask:
    """Everything a worker needs to run one point (plain, picklable)."""

    kind: str
    point_id: str
    coords: tuple[tuple[str, Any], ...]
    raw: Mapping[str, Any]
    base_dir: str
    out_dir: str


@dataclass(frozen=True)
class PointResult:
    point_id: str
    status: str
    """``ok`` or ``failed`` (``interrupted`` when the worker was stopped)."""
    error: str
    wall_s: float
    host: str
    pid: int


def point_dir_complete(run_dir: Path, point_id: str) -> bool:
    """A finished point: ``point.json`` of this point with status ok, and ``summary.json`` status ok."""
    try:
        pt = json.loads((run_dir / POINT_FILE).read_text(encoding="utf-8"))
        summary = json.loads((run_dir / "summary.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return False
    return pt.get("point_id") == point_id and pt.get("status") == "ok" and summary.get("status") == "ok"


def _run(task: PointTask, out: Path) -> None:
    if task.kind == "collective":
        from hetero_ns3.studies.collective_point import load_collective, run_collective

        run_collective(load_collective(task.raw, task.base_dir), out)
        return
    from hetero_ns3.scenario import scenario_from_dict

    scenario = scenario_from_dict(task.raw, source=f"<study point {task.point_id}>", base_dir=Path(task.base_dir))
    run_training(scenario, out)


def run_point(task: PointTask) -> PointResult:
    """Run one point into ``task.out_dir``; record (not raise) a failure."""
    out = Path(task.out_dir)
    out.mkdir(parents=True, exist_ok=True)
    (out / POINT_FILE).unlink(missing_ok=True)
    t0 = time.perf_counter()
    status, error = "ok", ""
    try:
        _run(task, out)
    except KeyboardInterrupt:
        status, error = "interrupted", "interrupted"
    except Exception as err:  # noqa: BLE001 - a failing point is data, the sweep goes on
        status, error = "failed", f"{type(err).__name__}: {err}"
        if not (out / "summary.json").is_file():
            from hetero_ns3.results import write_partial

            write_partial(out, error, extra_summary={"traceback": traceback.format_exc(limit=8)})
    result = PointResult(task.point_id, status, error, time.perf_counter() - t0, socket.gethostname(), os.getpid())
    doc = {**asdict(result), "kind": task.kind, "coords": [[k, v] for k, v in task.coords]}
    atomic.write_json(out / POINT_FILE, doc)
    if status == "interrupted":
        raise KeyboardInterrupt
    return result
