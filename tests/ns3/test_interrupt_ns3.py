"""An interrupted packet-level run keeps what it computed: tasks and flows tables with the flows that had not
finished as NaN (the flows table used to be dropped: the backend's rows cover only the flows that started)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from hetero_ns3.pipeline import run_scenario
from hetero_ns3.scenario.loader import scenario_from_dict

pytestmark = pytest.mark.ns3
DATA = Path(__file__).resolve().parent.parent / "data"


def test_interrupted_packet_run_writes_the_partial_flows_table(capi, tmp_path) -> None:
    sc = scenario_from_dict(
        {
            "model": {"name": "gpt3-125m", "seq_len": 512},
            "parallelism": {"tp": 4, "pp": 2, "global_batch": 4, "micro_batch": 1},
            "cluster": {"topology": str(DATA / "two-node-h100.toml")},
            "run": {"backend": "ns3", "reuse_isolated_collectives": "off"},
        }
    )
    calls = []

    def ctrl_c(now_s: float, done: int, total: int) -> None:  # Ctrl-C arrives between two slices
        calls.append(done)
        if len(calls) == 3:
            raise KeyboardInterrupt

    out = tmp_path / "run"
    with pytest.raises(KeyboardInterrupt):
        run_scenario(sc, out, progress=ctrl_c)
    summary = json.loads((out / "summary.json").read_text())
    assert summary["status"] == "interrupted"
    assert 0 < summary["counts"]["tasks_finished"] < summary["counts"]["tasks"]
    flows = pd.read_parquet(out / "flows.parquet")
    assert len(flows) == summary["counts"]["flows"] and "flows.parquet" in summary["files"]
    unfinished = flows["finish_s"].isna()
    assert 0 < unfinished.sum() < len(flows)
    assert flows["src"].notna().all() and (flows["size_bytes"] > 0).all()  # the plan's columns for every flow
    started = flows["task"].notna()
    assert (flows.loc[started, "task"].to_numpy() == flows.loc[started, "id"].to_numpy()).all()
    assert np.isfinite(flows.loc[~unfinished, "ideal_fct_s"]).all()
    assert pd.read_csv(out / "flows.csv").shape[0] == len(flows)
