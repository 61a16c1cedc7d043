"""The ``tasks`` and ``flows`` tables of a run (pandas DataFrames, written as CSV).

Times in seconds, sizes in bytes. Unfinished tasks of an interrupted run have NaN times.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd

from hetero_ns3.errors import SimulationError
from hetero_ns3.plan.dag import COMPUTE, FLOW, ExecutionPlan, TaskTimes
from hetero_ns3.results.categories import CLASS_NAMES, class_codes
from hetero_ns3.results.meta import GpuMeta


def collective_of(label: str) -> str:
    """The collective a flow belongs to: the first word of its label (``dp.all_reduce[3] ring ch1`` ->
    ``dp.all_reduce[3]``)."""
    return label.split(maxsplit=1)[0] if label.strip() else ""


def flow_channels(plan: ExecutionPlan, ids: np.ndarray) -> np.ndarray:
    """int64: the channel of the flows ``ids`` (``ExecutionPlan.channel``; 0 for a flow of no collective)."""
    return np.maximum(plan.channel[ids], 0).astype(np.int64)


def _times_or_nan(plan: ExecutionPlan, times: TaskTimes | None) -> tuple[np.ndarray, np.ndarray]:
    n = len(plan)
    if times is None:
        return np.full(n, np.nan), np.full(n, np.nan)
    if times.start_s.shape != (n,) or times.finish_s.shape != (n,):
        raise SimulationError(f"task times have shape {times.start_s.shape}, the plan has {n} tasks")
    return np.asarray(times.start_s, dtype=float), np.asarray(times.finish_s, dtype=float)


def tasks_frame(
    plan: ExecutionPlan, times: TaskTimes | None, meta: Sequence[GpuMeta], iteration: np.ndarray | None = None
) -> pd.DataFrame:
    """One row per task: id, iteration, gpu, gpu_type, node, stream, kind, category, class, label,
    start_s, finish_s, duration_s (measured), planned_duration_s, and for flows src, dst, size_bytes.

    ``iteration`` is the training iteration of each task (0-based; all 0 if None)."""
    start, finish = _times_or_nan(plan, times)
    if iteration is None:
        iteration = np.zeros(len(plan), dtype=np.int32)
    elif np.shape(iteration) != (len(plan),):
        raise SimulationError(f"iteration index has shape {np.shape(iteration)}, the plan has {len(plan)} tasks")
    names = np.asarray(plan.gpus, dtype=object)
    is_flow = plan.kind == FLOW
    types = np.asarray([m.gpu_type for m in meta], dtype=object)
    nodes = np.asarray([m.node for m in meta], dtype=object)
    cats = np.asarray(plan.categories, dtype=object)
    return pd.DataFrame(
        {
            "id": np.arange(len(plan)),
            "iteration": np.asarray(iteration, dtype=np.int64),
            "gpu": names[plan.gpu] if len(plan) else [],
            "gpu_type": types[plan.gpu] if len(plan) else [],
            "node": nodes[plan.gpu] if len(plan) else [],
            "stream": plan.stream.astype(int),
            "kind": np.where(plan.kind == COMPUTE, "compute", "flow"),
            "category": cats[plan.category] if len(plan) else [],
            "class": np.asarray(CLASS_NAMES, dtype=object)[class_codes(plan.categories)[plan.category]]
            if len(plan)
            else [],
            "label": np.asarray(plan.labels, dtype=object)[plan.label] if len(plan) else [],
            "start_s": start,
            "finish_s": finish,
            "duration_s": finish - start,
            "planned_duration_s": np.where(is_flow, np.nan, plan.duration_s),
            "src": np.where(is_flow, names[plan.gpu] if len(plan) else "", ""),
            "dst": np.where(is_flow, names[np.maximum(plan.dst, 0)] if len(plan) else "", ""),
            "size_bytes": plan.size_bytes.astype(np.int64),
        }
    )


def flows_frame(
    plan: ExecutionPlan,
    times: TaskTimes | None,
    meta: Sequence[GpuMeta],
    extra: pd.DataFrame | None = None,
) -> pd.DataFrame:
    """One row per flow: id (task id), src, dst, src_node, dst_node, intra_node, size_bytes, priority,
    start_s, finish_s, fct_s, category, collective, channel, label.

    ``extra`` holds a backend's own per-flow columns (e.g. ``pfc_pauses``, ``ecn_marks``, ``path``):
    matched on an ``id`` column if it has one, else row by row in task-id order; its columns
    replace derived ones of the same name.
    """
    start, finish = _times_or_nan(plan, times)
    ids = np.nonzero(plan.kind == FLOW)[0]
    names = np.asarray(plan.gpus, dtype=object)
    nodes = np.asarray([m.node for m in meta], dtype=object)
    lab = plan.label[ids]
    labels = np.asarray(plan.labels, dtype=object)[lab] if ids.size else []
    per_label_coll = np.asarray([collective_of(x) for x in plan.labels], dtype=object)
    src, dst = plan.gpu[ids], plan.dst[ids]
    df = pd.DataFrame(
        {
            "id": ids,
            "src": names[src] if ids.size else [],
            "dst": names[dst] if ids.size else [],
            "src_node": nodes[src] if ids.size else [],
            "dst_node": nodes[dst] if ids.size else [],
            "intra_node": (nodes[src] == nodes[dst]) if ids.size else np.zeros(0, dtype=bool),
            "size_bytes": plan.size_bytes[ids],
            "priority": plan.priority[ids].astype(int),
            "start_s": start[ids],
            "finish_s": finish[ids],
            "fct_s": finish[ids] - start[ids],
            "category": [plan.categories[c] for c in plan.category[ids]],
            "collective": per_label_coll[lab] if ids.size else [],
            "channel": flow_channels(plan, ids),
            "label": labels,
        }
    )
    if extra is None or extra.empty:
        return df
    if "id" in extra.columns:
        unknown = set(extra["id"].tolist()) - set(ids.tolist())
        if unknown:
            raise SimulationError(f"per-flow extra columns name ids that are not flows: {sorted(unknown)[:5]}")
        cols = [c for c in extra.columns if c != "id"]
        merged = df.drop(columns=[c for c in cols if c in df.columns]).merge(extra, on="id", how="left")
        return merged
    if len(extra) != len(df):
        raise SimulationError(f"per-flow extra table has {len(extra)} rows, the plan has {len(df)} flows")
    extra = extra.reset_index(drop=True)
    return pd.concat([df.drop(columns=[c for c in extra.columns if c in df.columns]), extra], axis=1)


def write_parquet(path, df: pd.DataFrame) -> None:
    """Write a table as Parquet (atomic): numbers keep their dtypes, text columns are Arrow ``string``.

    Object columns holding non-strings (a backend's per-flow lists, say) are written as JSON text.
    """
    import json

    import pyarrow as pa
    import pyarrow.parquet as pq

    from hetero_ns3.results import atomic

    out = df.copy()
    for col in out.columns:
        if out[col].dtype == object or isinstance(out[col].dtype, pd.CategoricalDtype):
            vals = out[col].tolist()
            if not all(v is None or isinstance(v, str) for v in vals):
                vals = [v if v is None or isinstance(v, str) else json.dumps(v, default=str) for v in vals]
            out[col] = pd.Series(vals, index=out.index, dtype="string")
    table = pa.Table.from_pandas(out, preserve_index=False)
    schema = pa.schema([f.with_type(pa.string()) if f.type == pa.large_string() else f for f in table.schema])
    atomic.write_with(path, lambda tmp: pq.write_table(table.cast(schema), tmp))
