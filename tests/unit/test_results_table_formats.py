"""Which files a run directory holds (``run.tables``, ``run.trace``): one table format or both, the trace or not,
load_run reading either, and a Parquet-only table that cannot be written falling back to CSV."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from hetero_ns3.plan.dag import TaskTimes, critical_path_s
from hetero_ns3.results import write_partial, write_run
from tests.unit.test_results_rundir import META, small_plan


def _write(out, plan, times, **kw):
    return write_run(out, scenario_resolved={"s": 1}, versions={"seed": 1}, plan=plan, times=times, gpu_meta=META,
                     plots=False, **kw)  # fmt: skip


@pytest.mark.parametrize("tables", [("parquet",), ("csv",)])
def test_a_run_can_write_its_tables_in_one_format_and_no_trace(tmp_path, tables):
    """run.tables / run.trace: only the asked files exist, summary.json lists exactly them, and load_run reads
    the same tables (same times, same iterations) from whichever format is there."""
    from hetero_ns3.results import load_run

    plan = small_plan()
    times = critical_path_s(plan, 0.3)
    both = _write(tmp_path / "both", plan, times)
    one = _write(tmp_path / "one", plan, times, tables=tables, trace=False)
    fmt = tables[0]
    other = "csv" if fmt == "parquet" else "parquet"
    present = {p.name for p in one.root.iterdir()}
    assert {f"tasks.{fmt}", f"flows.{fmt}"} <= present
    assert not {f"tasks.{other}", f"flows.{other}", "trace.json"} & present
    summary = json.loads(one.summary.read_text())
    assert set(summary["files"]) == present and "write_errors" not in summary
    a, b = load_run(both.root), load_run(one.root)
    np.testing.assert_array_equal(a.times.finish_s, b.times.finish_s)
    np.testing.assert_array_equal(a.iteration, b.iteration)
    assert len(b.flows) == plan.n_flows and list(b.flows.columns) == list(a.flows.columns)
    np.testing.assert_allclose(b.flows["fct_s"], a.flows["fct_s"])

    cut = TaskTimes(times.start_s, np.where(times.finish_s < 2.0, times.finish_s, np.nan))
    part = write_partial(tmp_path / "part", "boom", plan=plan, times=cut, gpu_meta=META, tables=tables, trace=False)
    got = {p.name for p in part.root.iterdir()}
    assert f"tasks.{fmt}" in got and not {f"tasks.{other}", "trace.json"} & got
    assert np.isnan(load_run(part.root).times.finish_s).sum() == np.isnan(cut.finish_s).sum()


def test_a_parquet_only_table_whose_parquet_write_fails_is_written_as_csv(tmp_path, monkeypatch):
    """Nothing computed is lost: with run.tables = ["parquet"], a flows.parquet the writer cannot finish (a
    full disk, say) falls back to flows.csv, the failure named in write_errors, no temporary file left."""
    import pyarrow.parquet as pq

    real = pq.ParquetWriter
    made = []

    class FailingSecond(real):  # tasks.parquet is written first, flows.parquet second
        def write_table(self, table, *a, **k):
            if len(made) == 2:
                raise OSError(28, "No space left on device")
            return super().write_table(table, *a, **k)

    def writer(*a, **k):
        made.append(1)
        return FailingSecond(*a, **k)

    monkeypatch.setattr(pq, "ParquetWriter", writer)
    plan = small_plan()
    paths = _write(tmp_path / "r", plan, critical_path_s(plan, 0.3), tables=("parquet",))
    summary = json.loads(paths.summary.read_text())
    assert "flows.csv" in summary["files"] and "flows.parquet" not in summary["files"]
    assert "No space left" in summary["write_errors"]["flows.parquet"]
    assert paths.flows.is_file() and not paths.flows_parquet.exists() and not list(tmp_path.rglob("*.tmp*"))
    assert paths.tasks_parquet.is_file() and not paths.tasks.exists()
    assert len(pd.read_csv(paths.flows)) == plan.n_flows


@pytest.mark.parametrize("bad", [(), ("csv", "csv"), ("json",)])
def test_table_formats_outside_csv_and_parquet_are_refused(tmp_path, bad):
    plan = small_plan()
    with pytest.raises(ValueError, match="one or more of"):
        _write(tmp_path, plan, critical_path_s(plan, 0.3), tables=bad)
