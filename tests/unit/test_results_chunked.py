"""Tables written in slices: the same CSV bytes and Parquet content as the whole table, CSV text that reads back
as pandas' own CSV of the table does, atomic files."""

from __future__ import annotations

import io

import numpy as np
import pandas as pd
import pyarrow.parquet as pq
import pytest

from hetero_ns3.errors import SimulationError
from hetero_ns3.plan.dag import FLOW, TaskTimes, critical_path_s
from hetero_ns3.results import tables
from hetero_ns3.results.meta import resolve_gpu_meta
from hetero_ns3.results.tables import flow_chunks, flows_frame, task_chunks, tasks_frame, write_table_files
from tests.unit.test_results_rundir import META, small_plan


def _csv(df: pd.DataFrame) -> bytes:
    buf = io.StringIO()
    df.to_csv(buf, index=False)
    return buf.getvalue().encode()


def _one_slice_csv(tmp_path, df: pd.DataFrame) -> bytes:
    """The CSV bytes of ``df`` written as one slice."""
    assert write_table_files(iter([df]), tmp_path / "one.csv", None) is None
    data = (tmp_path / "one.csv").read_bytes()
    (tmp_path / "one.csv").unlink()
    return data


def _reads_back_as_pandas_csv(data: bytes, df: pd.DataFrame) -> None:
    """``data`` parses (pandas' reader, its defaults) to the frame that pandas' own CSV of ``df`` parses to:
    same columns, dtypes and values (floats exactly)."""
    ours = pd.read_csv(io.BytesIO(data))
    theirs = pd.read_csv(io.BytesIO(_csv(df)))
    pd.testing.assert_frame_equal(ours, theirs, check_exact=True)


def _partial_times(plan):
    t = critical_path_s(plan, 0.3)
    start, finish = t.start_s.copy(), t.finish_s.copy()
    finish[len(plan) // 2 :] = np.nan  # an interrupted run: later tasks unfinished
    start[len(plan) - 2 :] = np.nan
    return TaskTimes(start, finish)


@pytest.mark.parametrize("rows", [1, 3, 7, 10_000])
@pytest.mark.parametrize("partial", [False, True])
def test_task_slices_write_the_bytes_of_the_whole_table(tmp_path, rows, partial):
    plan = small_plan()
    times = _partial_times(plan) if partial else critical_path_s(plan, 0.3)
    meta = resolve_gpu_meta(plan.gpus, META)
    it = np.arange(len(plan)) % 2
    whole = tasks_frame(plan, times, meta, it)
    chunks = list(task_chunks(plan, times, meta, it, chunk_rows=rows))
    assert len(chunks) == -(-len(plan) // rows)
    err = write_table_files(iter(chunks), tmp_path / "t.csv", tmp_path / "t.parquet")
    assert err is None
    assert (tmp_path / "t.csv").read_bytes() == _one_slice_csv(tmp_path, whole)
    _reads_back_as_pandas_csv((tmp_path / "t.csv").read_bytes(), whole)
    back = pd.read_parquet(tmp_path / "t.parquet")
    pd.testing.assert_frame_equal(back, pd.read_parquet(_whole_parquet(tmp_path, whole)))
    assert pq.ParquetFile(tmp_path / "t.parquet").num_row_groups == len(chunks)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["t.csv", "t.parquet", "whole.parquet"]


def _whole_parquet(tmp_path, df):
    tables.write_parquet(tmp_path / "whole.parquet", df)
    return tmp_path / "whole.parquet"


@pytest.mark.parametrize("shape", ["none", "by_id_shuffled", "positional"])
def test_flow_slices_match_flows_frame_with_backend_columns(tmp_path, shape):
    plan = small_plan()
    times = critical_path_s(plan, 0.3)
    meta = resolve_gpu_meta(plan.gpus, META)
    ids = np.nonzero(plan.kind == FLOW)[0]
    extra = None
    if shape == "by_id_shuffled":
        rng = np.random.default_rng(0)
        order = rng.permutation(ids.size)
        extra = pd.DataFrame({"id": ids[order], "ecn_marks": order * 3, "label": [f"x{i}" for i in order]})
    elif shape == "positional":
        extra = pd.DataFrame({"pfc_pauses": np.arange(ids.size), "path": [[1, i] for i in range(ids.size)]})
    whole = flows_frame(plan, times, meta, extra)
    chunks = list(flow_chunks(plan, times, meta, extra, chunk_rows=5))
    assert len(chunks) == -(-ids.size // 5)
    assert write_table_files(iter(chunks), tmp_path / "f.csv", tmp_path / "f.parquet") is None
    assert (tmp_path / "f.csv").read_bytes() == _one_slice_csv(tmp_path, whole)
    _reads_back_as_pandas_csv((tmp_path / "f.csv").read_bytes(), whole)
    pd.testing.assert_frame_equal(
        pd.read_parquet(tmp_path / "f.parquet"), pd.read_parquet(_whole_parquet(tmp_path, whole))
    )


def test_flow_extra_missing_a_flow_is_written_whole(tmp_path):
    plan = small_plan()
    times = critical_path_s(plan, 0.3)
    meta = resolve_gpu_meta(plan.gpus, META)
    ids = np.nonzero(plan.kind == FLOW)[0]
    extra = pd.DataFrame({"id": ids[1:], "ecn_marks": 1})  # one flow without a row: NaN, float column
    chunks = list(flow_chunks(plan, times, meta, extra, chunk_rows=2))
    assert len(chunks) == 1
    pd.testing.assert_frame_equal(chunks[0], flows_frame(plan, times, meta, extra))
    with pytest.raises(SimulationError, match="not flows"):
        next(flow_chunks(plan, times, meta, pd.DataFrame({"id": [0], "x": 1})))


def test_parquet_failure_keeps_the_csv_and_leaves_no_temporary_file(tmp_path, monkeypatch):
    plan = small_plan()
    meta = resolve_gpu_meta(plan.gpus, META)
    real = tables._arrow_table
    calls = []

    def failing(df, schema=None):
        calls.append(1)
        if len(calls) == 2:
            raise OSError("disk full")
        return real(df, schema)

    monkeypatch.setattr(tables, "_arrow_table", failing)
    chunks = task_chunks(plan, None, meta, chunk_rows=4)
    err = write_table_files(chunks, tmp_path / "t.csv", tmp_path / "t.parquet")
    assert isinstance(err, OSError) and "disk full" in str(err)
    _reads_back_as_pandas_csv((tmp_path / "t.csv").read_bytes(), tasks_frame(plan, None, meta))
    assert [p.name for p in tmp_path.iterdir()] == ["t.csv"]


def test_csv_text_quotes_only_where_needed_and_keeps_floats_floats(tmp_path):
    df = pd.DataFrame(
        {
            "id": np.arange(4),
            "label": ["a b", "c", "", None],
            "t_s": [0.0, 1.0, 2.0, np.nan],  # integral values: still read back as float64
            "x_s": [2.5e-06, 1e20, -3.0, 0.30000000000000004],
            "intra_node": [True, False, True, False],
            "node": np.array([0, 1, 1, 0], dtype=object),  # non-text objects: their JSON text
        }
    )
    data = _one_slice_csv(tmp_path, df)
    assert data.decode().splitlines()[:3] == [
        "id,label,t_s,x_s,intra_node,node",
        "0,a b,0.0,0.0000025,True,0",
        "1,c,1.0,1e+20,False,1",
    ]
    _reads_back_as_pandas_csv(data, df)
    odd = df.assign(label=['say "hi", then', "two\nlines", "c", None])  # a slice with a field needing quotes
    data = _one_slice_csv(tmp_path, odd)
    assert data.decode().splitlines()[1].startswith('0,"say ""hi"", then","0.0"')
    _reads_back_as_pandas_csv(data, odd)
    slices = [odd.iloc[:1], odd.iloc[1:]]  # quoted and unquoted slices in one file
    assert write_table_files(iter([df.iloc[:2], odd.iloc[2:]]), tmp_path / "m.csv", None) is None
    _reads_back_as_pandas_csv((tmp_path / "m.csv").read_bytes(), pd.concat([df.iloc[:2], odd.iloc[2:]]))
    assert write_table_files(iter(slices), tmp_path / "q.csv", None) is None
    _reads_back_as_pandas_csv((tmp_path / "q.csv").read_bytes(), odd)


def test_csv_failure_mid_table_leaves_neither_file(tmp_path):
    plan = small_plan()
    meta = resolve_gpu_meta(plan.gpus, META)
    (tmp_path / "t.csv").write_text("old\n")

    def broken():
        yield from task_chunks(plan, None, meta, chunk_rows=3)
        raise MemoryError("slice")

    with pytest.raises(MemoryError):
        write_table_files(broken(), tmp_path / "t.csv", tmp_path / "t.parquet")
    assert [p.name for p in tmp_path.iterdir()] == ["t.csv"]
    assert (tmp_path / "t.csv").read_text() == "old\n"  # the old file, untouched


def test_truncated_trace_keeps_the_earliest_slices_with_their_own_fields():
    from hetero_ns3.results.trace import chrome_trace

    plan = small_plan()
    times = critical_path_s(plan, 0.3)
    meta = resolve_gpu_meta(plan.gpus, META)
    full = [e for e in chrome_trace(plan, times, meta)["traceEvents"] if e["ph"] == "X"]
    doc = chrome_trace(plan, times, meta, max_events=5)
    cut = [e for e in doc["traceEvents"] if e["ph"] == "X"]
    assert doc["otherData"]["truncated"] and len(cut) == 5 < len(full)
    ids = [e["args"]["id"] for e in cut]
    assert ids == sorted(ids)
    shown = {e["args"]["id"] for e in full}
    earliest = sorted(shown, key=lambda i: (times.start_s[i], i))[:5]
    assert set(ids) == set(earliest)
    for e in cut:
        i = e["args"]["id"]
        assert e["ts"] == pytest.approx(times.start_s[i] * 1e6)
        assert e["pid"] == plan.gpu[i] + 1 and e["name"] == plan.labels[plan.label[i]]
        if plan.kind[i] == FLOW:
            assert e["args"]["bytes"] == plan.size_bytes[i] and e["args"]["dst"] == plan.gpus[plan.dst[i]]


def test_a_partial_backend_table_keyed_by_task_keeps_every_flow(tmp_path):
    """An interrupted packet-level run has backend rows (keyed by `task`, no `id`) only for the flows that
    started: the table is written with every flow (NaN where the backend has nothing), not refused."""
    plan = small_plan()
    times = _partial_times(plan)
    meta = resolve_gpu_meta(plan.gpus, META)
    ids = np.nonzero(plan.kind == FLOW)[0]
    started = ids[:-1]
    extra = pd.DataFrame(
        {"task": started, "src": "x", "size_bytes": 1, "ideal_fct_s": 0.5, "retransmits": np.arange(started.size)}
    )
    df = flows_frame(plan, times, meta, extra)
    assert list(df["id"]) == list(ids)
    assert list(df["src"]) == list(np.asarray(plan.gpus)[plan.gpu[ids]])  # the plan's, also for the unstarted
    assert list(df["size_bytes"]) == list(plan.size_bytes[ids])
    assert list(df["task"]) == list(ids) and df["task"].dtype == np.int64  # an integer for the unstarted too
    assert (df["ideal_fct_s"][:-1] == 0.5).all() and np.isnan(df["ideal_fct_s"].iloc[-1])
    chunks = list(flow_chunks(plan, times, meta, extra, chunk_rows=2))
    pd.testing.assert_frame_equal(pd.concat(chunks, ignore_index=True), df)
    # a complete table keyed by row order is unchanged (the backend's columns as given)
    full = pd.DataFrame({"task": ids, "src": "x", "ideal_fct_s": 0.5})
    assert (flows_frame(plan, times, meta, full)["src"] == "x").all()


@pytest.mark.parametrize("max_events", [1_000_000, 5, 0])
def test_trace_text_is_the_compact_json_of_the_trace_document(tmp_path, max_events):
    """``write_chrome_trace`` formats the slices straight to text: its bytes are ``json.dumps`` of
    ``chrome_trace``'s dict (compact, with the newline ``atomic.write_json`` adds), in chunks smaller than the
    trace too, and with labels that need escaping."""
    import json

    from hetero_ns3.plan.builder import PlanBuilder
    from hetero_ns3.results import trace

    plan = small_plan()
    for p in (plan, None):
        if p is None:  # a label with a quote, a backslash and a non-ASCII character
            b = PlanBuilder(["g0", "g1"])
            a = b.add_compute("g0", 1.0, label='fwd "mb0" \\ µ')
            b.add_flow("g0", "g1", 4096, [a], label="p2p \u00e9", category="pp", channel=0)
            p = b.build()
        times = critical_path_s(p, 0.3)
        meta = resolve_gpu_meta(p.gpus, None)
        want = json.dumps(trace.chrome_trace(p, times, meta, max_events), separators=(",", ":")) + "\n"
        for chunk in (trace.TRACE_CHUNK, 3):
            old, trace.TRACE_CHUNK = trace.TRACE_CHUNK, chunk
            try:
                path = trace.write_chrome_trace(tmp_path / "trace.json", p, times, meta, max_events)
            finally:
                trace.TRACE_CHUNK = old
            assert path.read_text(encoding="utf-8") == want
        doc = json.loads(want)
        assert doc["otherData"]["slices"] == sum(e["ph"] == "X" for e in doc["traceEvents"]) <= max_events
