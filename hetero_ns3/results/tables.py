"""The ``tasks`` and ``flows`` tables of a run (pandas DataFrames, written as CSV).

Times in seconds, sizes in bytes. Unfinished tasks of an interrupted run have NaN times.
"""

from __future__ import annotations

import contextlib
import os
import re
from collections.abc import Iterable, Iterator, Sequence
from typing import Any

import numpy as np
import pandas as pd

from hetero_ns3.errors import SimulationError
from hetero_ns3.plan.dag import COMPUTE, FLOW, ExecutionPlan, TaskTimes
from hetero_ns3.results.categories import CLASS_NAMES, class_codes
from hetero_ns3.results.meta import GpuMeta

#: Rows per slice when tables are written in chunks (~0.5 GiB of pandas columns at most per slice).
CHUNK_ROWS = 1_000_000


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


class _TaskRows:
    """Builds the rows ``lo:hi`` of the tasks table from the plan arrays: the text columns index small
    per-GPU / per-label / per-category tables, so a slice costs only its own rows."""

    def __init__(
        self, plan: ExecutionPlan, times: TaskTimes | None, meta: Sequence[GpuMeta], iteration: np.ndarray | None
    ) -> None:
        self.plan = plan
        self.start, self.finish = _times_or_nan(plan, times)
        if iteration is None:
            iteration = np.zeros(len(plan), dtype=np.int32)
        elif np.shape(iteration) != (len(plan),):
            raise SimulationError(f"iteration index has shape {np.shape(iteration)}, the plan has {len(plan)} tasks")
        self.iteration = iteration
        self.names = np.asarray(plan.gpus, dtype=object)
        self.types = np.asarray([m.gpu_type for m in meta], dtype=object)
        self.nodes = np.asarray([m.node for m in meta], dtype=object)
        self.cats = np.asarray(plan.categories, dtype=object)
        self.classes = np.asarray(CLASS_NAMES, dtype=object)[class_codes(plan.categories)]
        self.labels = np.asarray(plan.labels, dtype=object)

    def frame(self, lo: int, hi: int) -> pd.DataFrame:
        p, sl = self.plan, slice(lo, hi)
        gpu, kind, cat = p.gpu[sl], p.kind[sl], p.category[sl]
        is_flow = kind == FLOW
        start, finish = self.start[sl], self.finish[sl]
        some = hi > lo
        return pd.DataFrame(
            {
                "id": np.arange(lo, hi),
                "iteration": np.asarray(self.iteration[sl], dtype=np.int64),
                "gpu": self.names[gpu] if some else [],
                "gpu_type": self.types[gpu] if some else [],
                "node": self.nodes[gpu] if some else [],
                "stream": p.stream[sl].astype(int),
                "kind": np.where(kind == COMPUTE, "compute", "flow"),
                "category": self.cats[cat] if some else [],
                "class": self.classes[cat] if some else [],
                "label": self.labels[p.label[sl]] if some else [],
                "start_s": start,
                "finish_s": finish,
                "duration_s": finish - start,
                "planned_duration_s": np.where(is_flow, np.nan, p.duration_s[sl]),
                "src": np.where(is_flow, self.names[gpu] if some else "", ""),
                "dst": np.where(is_flow, self.names[np.maximum(p.dst[sl], 0)] if some else "", ""),
                "size_bytes": p.size_bytes[sl].astype(np.int64),
            }
        )


def tasks_frame(
    plan: ExecutionPlan, times: TaskTimes | None, meta: Sequence[GpuMeta], iteration: np.ndarray | None = None
) -> pd.DataFrame:
    """One row per task: id, iteration, gpu, gpu_type, node, stream, kind, category, class, label,
    start_s, finish_s, duration_s (measured), planned_duration_s, and for flows src, dst, size_bytes.

    ``iteration`` is the training iteration of each task (0-based; all 0 if None)."""
    return _TaskRows(plan, times, meta, iteration).frame(0, len(plan))


def task_chunks(
    plan: ExecutionPlan,
    times: TaskTimes | None,
    meta: Sequence[GpuMeta],
    iteration: np.ndarray | None = None,
    chunk_rows: int | None = None,
) -> Iterator[pd.DataFrame]:
    """:func:`tasks_frame` in slices of at most ``chunk_rows`` rows (default :data:`CHUNK_ROWS`; at least
    one, maybe empty, slice)."""
    rows = _TaskRows(plan, times, meta, iteration)
    n, step = len(plan), max(1, chunk_rows or CHUNK_ROWS)
    for lo in range(0, max(n, 1), step):
        yield rows.frame(lo, min(n, lo + step))


#: Columns of the flows table that come from the plan and the task times (a backend may repeat them).
_PLAN_FLOW_COLUMNS = frozenset({"src", "dst", "size_bytes", "start_s", "finish_s", "fct_s", "category", "label"})


class _FlowRows:
    """Builds the flows table for a slice of the flow ids (see :func:`flows_frame`)."""

    def __init__(
        self, plan: ExecutionPlan, times: TaskTimes | None, meta: Sequence[GpuMeta], extra: pd.DataFrame | None
    ) -> None:
        self.plan = plan
        self.start, self.finish = _times_or_nan(plan, times)
        self.ids = np.nonzero(plan.kind == FLOW)[0]
        self.names = np.asarray(plan.gpus, dtype=object)
        self.nodes = np.asarray([m.node for m in meta], dtype=object)
        self.labels = np.asarray(plan.labels, dtype=object)
        self.cats = np.asarray(plan.categories, dtype=object)
        self.coll = np.asarray([collective_of(x) for x in plan.labels], dtype=object)
        self.extra = None if extra is None or extra.empty else extra
        self.pos: np.ndarray | None = None  # extra's row of each task id (-1: none)
        self.task_from_id = False  # the backend's `task` column is rebuilt from `id` (no NaN for unstarted flows)
        if self.extra is None:
            return
        if "id" not in self.extra.columns and "task" in self.extra.columns and len(self.extra) != self.ids.size:
            # a backend that keys its rows by `task` and has rows only for flows that started (an interrupted
            # packet-level run): match on that id, so the partial flows table is written, not dropped; the
            # plan's own columns (endpoints, sizes, times, labels) stay, also for the flows without a row
            keep = [c for c in self.extra.columns if c not in _PLAN_FLOW_COLUMNS and c != "task"]
            self.extra = self.extra[keep].assign(id=self.extra["task"].to_numpy(dtype=np.int64))
            self.task_from_id = True  # a flow's task is its id: integer for every row, started or not
        if "id" in self.extra.columns:
            eid = np.asarray(self.extra["id"])
            bad = (eid < 0) | (eid >= len(plan))
            bad[~bad] = plan.kind[eid[~bad]] != FLOW
            if bad.any():
                raise SimulationError(
                    f"per-flow extra columns name ids that are not flows: {sorted(set(eid[bad].tolist()))[:5]}"
                )
            self.pos = np.full(len(plan), -1, dtype=np.int64)
            self.pos[eid] = np.arange(eid.size)
        elif len(self.extra) != self.ids.size:
            raise SimulationError(
                f"per-flow extra table has {len(self.extra)} rows, the plan has {self.ids.size} flows"
            )

    def chunkable(self) -> bool:
        """Whether slices concatenate to the whole table: every flow has one extra row, or there is none."""
        if self.pos is None or self.extra is None:
            return True
        return len(self.extra) == self.ids.size and bool((self.pos[self.ids] >= 0).all())

    def frame(self, lo: int, hi: int) -> pd.DataFrame:
        p, ids = self.plan, self.ids[lo:hi]
        some = ids.size > 0
        none = np.zeros(0, dtype=object)  # text columns of an empty table stay text (not float64)
        lab, src, dst = p.label[ids], p.gpu[ids], p.dst[ids]
        start, finish = self.start[ids], self.finish[ids]
        df = pd.DataFrame(
            {
                "id": ids,
                "src": self.names[src] if some else none,
                "dst": self.names[dst] if some else none,
                "src_node": self.nodes[src] if some else none,
                "dst_node": self.nodes[dst] if some else none,
                "intra_node": (self.nodes[src] == self.nodes[dst]) if some else np.zeros(0, dtype=bool),
                "size_bytes": p.size_bytes[ids],
                "priority": p.priority[ids].astype(int),
                "start_s": start,
                "finish_s": finish,
                "fct_s": finish - start,
                "category": list(self.cats[p.category[ids]]) if some else none,
                "collective": self.coll[lab] if some else none,
                "channel": flow_channels(p, ids),
                "label": self.labels[lab] if some else none,
            }
        )
        extra = self.extra
        if extra is None:
            return df
        if self.pos is not None:
            rows = self.pos[ids] if (lo, hi) != (0, self.ids.size) else np.arange(len(extra))
            part = extra.iloc[rows[rows >= 0]] if rows.size != len(extra) else extra
            cols = [c for c in extra.columns if c != "id"]
            base = df.drop(columns=[c for c in cols if c in df.columns])
            out = base.merge(part, on="id", how="left")
            if self.task_from_id:
                out.insert(len(base.columns), "task", out["id"].to_numpy())
            return out
        part = extra.iloc[lo:hi].reset_index(drop=True)
        return pd.concat([df.drop(columns=[c for c in part.columns if c in df.columns]), part], axis=1)


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
    rows = _FlowRows(plan, times, meta, extra)
    return rows.frame(0, rows.ids.size)


def flow_chunks(
    plan: ExecutionPlan,
    times: TaskTimes | None,
    meta: Sequence[GpuMeta],
    extra: pd.DataFrame | None = None,
    chunk_rows: int | None = None,
) -> Iterator[pd.DataFrame]:
    """:func:`flows_frame` in slices of at most ``chunk_rows`` flows (one slice, the whole table, when
    ``extra`` does not hold exactly one row per flow)."""
    rows = _FlowRows(plan, times, meta, extra)
    n = rows.ids.size
    step = max(1, chunk_rows or CHUNK_ROWS) if rows.chunkable() else max(n, 1)
    for lo in range(0, max(n, 1), step):
        yield rows.frame(lo, min(n, lo + step))


def _text_values(col: pd.Series) -> pd.Series:
    """An object / categorical column as pandas ``string``: strings kept, None and NaN missing, other values
    (a backend's per-flow lists, integer node ids) as their JSON text. Each distinct value is converted once
    (the columns repeat a few GPU, node and label names over millions of rows); a column of unhashable
    values (lists) is converted value by value."""
    import json

    import pyarrow as pa

    def text(v: Any) -> str:
        return v if isinstance(v, str) else json.dumps(v, default=str)

    try:
        codes, uniques = pd.factorize(col, use_na_sentinel=True)
    except TypeError:  # unhashable values
        vals = [None if v is None else text(v) for v in col.tolist()]
        return pd.Series(vals, index=col.index, dtype="string")
    names = pa.array([text(v) for v in uniques], type=pa.string())
    arr = names.take(pa.array(codes, mask=codes < 0))
    return pd.Series(pd.arrays.ArrowStringArray(arr), index=col.index, dtype="string")


def _arrow_table(df: pd.DataFrame, schema=None):
    """``df`` as an Arrow table: numbers keep their dtypes, text columns are Arrow ``string`` (object columns
    holding non-strings, a backend's per-flow lists say, as JSON text); cast to ``schema`` when given."""
    import pyarrow as pa

    out = df.copy(deep=False)
    for col in out.columns:
        if out[col].dtype == object or isinstance(out[col].dtype, pd.CategoricalDtype):
            out[col] = _text_values(out[col])
    table = pa.Table.from_pandas(out, preserve_index=False)
    if schema is None:
        schema = pa.schema([f.with_type(pa.string()) if f.type == pa.large_string() else f for f in table.schema])
    return table.cast(schema)


_NEEDS_QUOTES = r'[",\r\n]'
"""A CSV field with one of these characters is quoted (RFC 4180)."""


def _csv_table(table):
    """The Arrow table of one slice as the CSV shows it: floats as their shortest round-trip decimal text
    with a decimal point or an exponent (``0.0``, ``2.5e-06``: read back as floats, also where a column holds
    integral values only), booleans as ``True`` / ``False``, missing values empty; integers and strings as they
    are. Returns the table and whether a string needs quoting (then the slice is written with every string
    quoted)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    cols, quote = [], False
    for col in table.columns:
        t = col.type
        if pa.types.is_floating(t):
            txt = pc.cast(col, pa.string())
            whole = pc.and_(pc.is_finite(col), pc.equal(pc.floor(col), col))  # written without a point ...
            if pc.any(whole).as_py():
                whole = pc.and_(whole, pc.invert(pc.match_substring(txt, "e")))  # ... unless with an exponent
                txt = pc.if_else(whole, pc.binary_join_element_wise(txt, ".0", ""), txt)
            col = txt
        elif pa.types.is_boolean(t):
            col = pc.if_else(col, "True", "False")
        elif pa.types.is_string(t) or pa.types.is_large_string(t):
            # distinct values only: the columns repeat a few names and labels over many rows
            quote = quote or bool(pc.any(pc.match_substring_regex(pc.unique(col), _NEEDS_QUOTES)).as_py())
        cols.append(col)
    return pa.table(cols, names=table.column_names), quote


def _csv_field(text: str) -> str:
    """``text`` as one CSV field: quoted (inner quotes doubled) where it needs it."""
    return '"' + text.replace('"', '""') + '"' if re.search(_NEEDS_QUOTES, text) else text


def _write_csv_slice(fh, table, header: bool) -> None:
    """Append one slice to an open binary CSV file (Arrow's CSV writer, the header line our own; fields are
    quoted only in a slice that has a string needing it)."""
    import pyarrow.csv as pcsv

    text, quote = _csv_table(table)
    if header:
        fh.write((",".join(_csv_field(n) for n in text.column_names) + "\n").encode("utf-8"))
    pcsv.write_csv(text, fh, pcsv.WriteOptions(include_header=False, quoting_style="needed" if quote else "none"))


def write_parquet(path, df: pd.DataFrame) -> None:
    """Write a table as Parquet (atomic): numbers keep their dtypes, text columns are Arrow ``string``.

    Object columns holding non-strings (a backend's per-flow lists, say) are written as JSON text.
    """
    import pyarrow.parquet as pq

    from hetero_ns3.results import atomic

    table = _arrow_table(df)
    atomic.write_with(path, lambda tmp: pq.write_table(table, tmp))


class _ParquetSink:
    """A Parquet file written one row group per chunk into an atomic temporary file. A failure is kept
    (``error``), the temporary file removed, and later chunks ignored: the CSV beside it goes on."""

    def __init__(self, path: os.PathLike[str] | str) -> None:
        from hetero_ns3.results import atomic

        self._cm = atomic.atomic_path(path)
        self._tmp = self._cm.__enter__()
        self._writer: Any = None
        self.error: BaseException | None = None

    def write(self, table: Any, err: BaseException | None = None) -> None:
        """Append one slice (its Arrow table, cast to the first slice's schema); ``err``: the slice could not
        be converted (the file is then dropped)."""
        if self.error is not None:
            return
        if err is not None:
            self.abort(err)
            return
        try:
            import pyarrow.parquet as pq

            if self._writer is None:
                self._writer = pq.ParquetWriter(self._tmp, table.schema)
            else:
                table = table.cast(self._writer.schema)
            self._writer.write_table(table)
        except Exception as e:  # noqa: BLE001 - recorded; the caller reports it
            self.abort(e)

    def abort(self, err: BaseException) -> None:
        if self.error is None:
            self.error = err
            with contextlib.suppress(Exception):
                if self._writer is not None:
                    self._writer.close()
            self._cm.__exit__(type(err), err, err.__traceback__)

    def close(self) -> None:
        if self.error is not None:
            return
        try:
            if self._writer is not None:
                self._writer.close()
        except Exception as err:  # noqa: BLE001
            self.abort(err)
            return
        self._cm.__exit__(None, None, None)


def write_parquet_chunks(chunks: Iterable[pd.DataFrame], parquet_path: os.PathLike[str] | str) -> BaseException | None:
    """Write a table given in slices as Parquet only (one row group per slice, atomic); return the failure
    (None: written). Nothing is left at ``parquet_path`` on failure. Peak memory is one slice."""
    sink = _ParquetSink(parquet_path)
    try:
        for df in chunks:
            table, err = None, None
            try:
                table = _arrow_table(df)
            except Exception as e:  # noqa: BLE001 - returned to the caller
                err = e
            sink.write(table, err)
            if sink.error is not None:
                break
    except BaseException as err:
        sink.abort(err)
        raise
    sink.close()
    return sink.error


def write_table_files(
    chunks: Iterable[pd.DataFrame], csv_path: os.PathLike[str] | str, parquet_path: os.PathLike[str] | str | None
) -> BaseException | None:
    """Write a table given in slices as CSV (one header; the text of :func:`_csv_table`) and as Parquet (one
    row group per slice), both atomically, in one pass over the slices. Each slice is converted to Arrow once
    and both files are written from it; a slice Arrow cannot convert goes to the CSV as ``DataFrame.to_csv``
    writes it, and the Parquet file is dropped.

    A CSV failure raises (nothing is left at ``csv_path``); a Parquet failure is returned (None: written),
    the CSV is still completed. Peak memory is one slice, not the table.
    """
    from hetero_ns3.results import atomic

    sink = _ParquetSink(parquet_path) if parquet_path is not None else None
    try:
        with atomic.atomic_path(csv_path) as tmp, open(tmp, "wb") as fh:
            for i, df in enumerate(chunks):
                table, err = None, None
                try:
                    table = _arrow_table(df)
                except Exception as e:  # noqa: BLE001 - the Parquet file records it; the CSV goes on
                    err = e
                if table is None:
                    fh.write(df.to_csv(index=False, header=i == 0, lineterminator="\n").encode("utf-8"))
                else:
                    _write_csv_slice(fh, table, i == 0)
                if sink is not None:
                    sink.write(table, err)
    except BaseException as err:
        if sink is not None:
            sink.abort(err)
        raise
    if sink is None:
        return None
    sink.close()
    return sink.error
