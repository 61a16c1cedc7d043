"""The study table (``study.parquet``): one row per point, built from the points' run directories.

Columns (Arrow types; units in the names, SI):

=========================  ========  =====================================================================
``point_id``               string    12-hex hash of the resolved scenario (the run directory's name)
``index``                  int64     position of the point in the expansion
*axis keys*                (varies)  one column per swept key, named by its dotted key (``network.cc.kind``);
                                     int64 / float64 / bool / string (lists and tables as JSON text)
``status``                 string    ``ok``, ``failed``, ``interrupted`` or ``missing`` (never ran)
``error``                  string    the failure, empty when ok
``backend``                string    ``analytic`` or ``ns3``
``run_dir``                string    the run directory, relative to the study output directory
``wall_s``                 float64   wall time of the point in its worker (varies run to run)
``host``                   string    the worker's host name
training points:
``iteration_time_s``       float64   (steady-state) iteration time
``mfu``                    float64   model FLOPs utilisation, 0..1
``tokens_per_s``           float64   global_batch x seq_len / iteration time
``<term>``                 float64   breakdown term, mean over GPUs (``compute_s``, ``exposed_intra_node_comm_s``,
                                     ``exposed_inter_node_comm_s``, ``pipeline_bubble_s``, ``straggler_wait_s``,
                                     ``other_s``)
``<term>[<gpu type>]``     float64   the same term, mean over the GPUs of one type (``compute_s[H100-SXM]``)
``job.<name>.<key>``       float64   multi-job points: per job ``iteration_time_s``, ``slowdown``, ``mfu``,
                                     ``shared_fabric_fraction``, ``fabric_peak_utilisation`` (docs/multijob.md)
collective points:
``time_s``, ``algbw_GBps``, ``busbw_GBps``, ``predicted_s`` (float64), ``size_bytes``, ``ranks``,
``channels`` (int64), ``op``, ``algo``, ``protocol`` (string)
=========================  ========  =====================================================================
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import pandas as pd

from hetero_ns3.results import atomic
from hetero_ns3.results.breakdown import TERMS
from hetero_ns3.studies.spec import Point, Study

BASE_COLUMNS: dict[str, str] = {
    "point_id": "string",
    "index": "int64",
    "status": "string",
    "error": "string",
    "backend": "string",
    "run_dir": "string",
    "wall_s": "float64",
    "host": "string",
}
TRAINING_COLUMNS: dict[str, str] = {
    "iteration_time_s": "float64",
    "mfu": "float64",
    "tokens_per_s": "float64",
    **{t: "float64" for t in TERMS},
}
COLLECTIVE_COLUMNS: dict[str, str] = {
    "op": "string",
    "size_bytes": "int64",
    "ranks": "int64",
    "time_s": "float64",
    "algbw_GBps": "float64",
    "busbw_GBps": "float64",
    "predicted_s": "float64",
    "algo": "string",
    "protocol": "string",
    "channels": "int64",
}
TABLE_FILE = "study.parquet"


def _json(path: Path) -> dict[str, Any] | None:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None


def _tokens_per_s(resolved: Mapping[str, Any] | None, it_s: float | None) -> float:
    try:
        tokens = resolved["parallelism"]["global_batch"] * resolved["model"]["seq_len"]  # type: ignore[index]
    except (KeyError, TypeError):
        return math.nan
    return float(tokens) / it_s if it_s else math.nan


#: Per-job figures of multi-job points, as ``job.<name>.<key>`` columns (float64; NaN when absent).
JOB_COLUMNS = ("iteration_time_s", "slowdown", "mfu", "shared_fabric_fraction", "fabric_peak_utilisation")


def point_row(study: Study, point: Point, out_dir: Path) -> dict[str, Any]:
    """The table row of one point, read from its run directory (``status = missing`` if it never ran)."""
    run_dir = out_dir / "runs" / point.point_id
    summary = _json(run_dir / "summary.json") or {}
    pt = _json(run_dir / "point.json") or {}
    status = pt.get("status") or ("missing" if not summary else str(summary.get("status", "failed")))
    if status == "ok" and summary.get("status") != "ok":
        status = str(summary.get("status", "failed"))
    row: dict[str, Any] = {"point_id": point.point_id, "index": point.index}
    row.update({k: v for k, v in point.coords})
    run_info = summary.get("run", {}) if isinstance(summary.get("run"), Mapping) else {}
    settings = dict(point.settings)
    row.update(
        status=status,
        error=str(pt.get("error") or (summary.get("reason") if status != "ok" else "") or ""),
        backend=str(run_info.get("backend") or settings.get("run.backend") or ""),
        run_dir=f"runs/{point.point_id}",
        wall_s=float(pt["wall_s"]) if "wall_s" in pt else math.nan,
        host=str(pt.get("host", "")),
    )
    if study.kind == "collective":
        cols = summary.get("collective") or {}
        for key in COLLECTIVE_COLUMNS:
            row[key] = cols.get(key)
        return row
    it_s = summary.get("iteration_time_s")
    row["iteration_time_s"] = float(it_s) if it_s is not None else math.nan
    row["mfu"] = float(run_info.get("mfu", math.nan))
    row["tokens_per_s"] = _tokens_per_s(_json(run_dir / "scenario.resolved.json"), it_s)
    bd = summary.get("breakdown") or {}
    overall = bd.get("overall") or {}
    for term in TERMS:
        row[term] = float(overall.get(term, math.nan))
    for gtype, terms in sorted((bd.get("per_gpu_type") or {}).items()):
        for term in TERMS:
            row[f"{term}[{gtype}]"] = float(terms.get(term, math.nan))
    for job in summary.get("jobs") or ():
        name, links = job.get("name"), job.get("links") or {}
        for key in JOB_COLUMNS:
            value = job.get(key, links.get(key))
            row[f"job.{name}.{key}"] = float(value) if value is not None else math.nan
    return row


def _coord_series(values: Sequence[Any]) -> pd.Series:
    vals = list(values)
    present = [v for v in vals if v is not None]
    if present and all(isinstance(v, bool) for v in present) and len(present) == len(vals):
        return pd.Series(vals, dtype="bool")
    if present and all(isinstance(v, int) and not isinstance(v, bool) for v in present) and len(present) == len(vals):
        return pd.Series(vals, dtype="int64")
    if present and all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in present):
        return pd.Series([math.nan if v is None else float(v) for v in vals], dtype="float64")
    return pd.Series(
        [None if v is None else (v if isinstance(v, str) else json.dumps(v, sort_keys=True)) for v in vals],
        dtype="string",
    )


def study_frame(study: Study, points: Sequence[Point], out_dir: Path) -> pd.DataFrame:
    """The study table as a DataFrame with the documented dtypes."""
    rows = [point_row(study, p, out_dir) for p in points]
    kind_cols = COLLECTIVE_COLUMNS if study.kind == "collective" else TRAINING_COLUMNS
    keys = list(study.axis_keys)
    # per-GPU-type breakdown columns (``term[type]``; an axis key may hold brackets too: ``jobs[0].x``) and
    # per-job columns of multi-job points (``job.<name>.<key>``)
    extra = sorted({k for r in rows for k in r if ("[" in k or k.startswith("job.")) and k not in keys})
    data: dict[str, pd.Series] = {}
    for col, dtype in BASE_COLUMNS.items():
        if col == "index":
            data[col] = pd.Series([r[col] for r in rows], dtype="int64")
        elif dtype == "float64":
            data[col] = pd.Series([r.get(col) for r in rows], dtype="float64")
        else:
            data[col] = pd.Series([r.get(col) for r in rows], dtype="string")
        if col == "index":
            for k in keys:
                data[k] = _coord_series([r.get(k) for r in rows])
    for col, dtype in {**kind_cols, **{c: "float64" for c in extra}}.items():
        vals = [r.get(col) for r in rows]
        if dtype == "float64":
            data[col] = pd.Series([math.nan if v is None else v for v in vals], dtype="float64")
        elif dtype == "int64":
            data[col] = pd.Series(vals, dtype="Int64")
        else:
            data[col] = pd.Series(vals, dtype="string")
    return pd.DataFrame(data)


def write_table(df: pd.DataFrame, path: Path) -> Path:
    """Write the study table as Parquet (atomic)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    table = pa.Table.from_pandas(df, preserve_index=False)
    schema = pa.schema([f.with_type(pa.string()) if f.type == pa.large_string() else f for f in table.schema])
    table = table.cast(schema)
    return atomic.write_with(path, lambda tmp: pq.write_table(table, tmp))
