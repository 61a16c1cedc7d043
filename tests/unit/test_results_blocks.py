"""The summary's passes over all tasks run in blocks (bounded temporaries on plans of 10^8 tasks): any
block size gives the summary of one block over the whole plan, figure for figure."""

from __future__ import annotations

import numpy as np
import pytest

from hetero_ns3.plan.dag import critical_path_s
from hetero_ns3.results import breakdown, summary
from hetero_ns3.results.breakdown import last_finishing_dependency
from hetero_ns3.results.meta import GpuMeta
from hetero_ns3.results.summary import summarize, summary_columns
from tests.unit.test_analytic_backend import random_plan
from tests.unit.test_results_rundir import META, small_plan


def _plans():
    yield small_plan(), META
    plan = random_plan(8, 700, seed=3)  # many flows, ties in finish times on an infinitely fast network
    yield plan, {g: GpuMeta("H100", i // 4) for i, g in enumerate(plan.gpus)}


@pytest.mark.parametrize("block", [1, 3, 64])
def test_any_block_size_gives_the_same_summary(monkeypatch, block):
    for plan, meta in _plans():
        times = critical_path_s(plan, 0.25)
        whole = summarize(plan, times, meta).to_dict()
        assert whole["counts"]["traffic"]  # flows were counted
        monkeypatch.setattr(breakdown, "_BLOCK", block)
        monkeypatch.setattr(summary, "_BLOCK", block)
        assert summarize(plan, times, meta).to_dict() == whole
        monkeypatch.undo()


def test_last_finishing_dependency_is_int32_task_ids():
    plan = small_plan()
    pred = last_finishing_dependency(plan, critical_path_s(plan, 0.25).finish_s)
    assert pred.dtype == np.int32 and pred.min() == -1 and pred.max() < len(plan)


def test_summary_columns_free_three_columns_and_change_no_figure():
    for plan, meta in _plans():
        times = critical_path_s(plan, 0.25)
        slim = summary_columns(plan)
        for name in ("duration_s", "priority", "channel"):
            col = getattr(slim, name)
            assert col.shape == (len(plan),) and col.strides == (0,) and not col.flags.writeable
        assert summarize(slim, times, meta).to_dict() == summarize(plan, times, meta).to_dict()
