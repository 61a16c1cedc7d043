"""Two jobs sharing the network on the packet backend: per-job results, job ids on flows, and agreement with
the flow-level backend on the same plan (uncongested-ish: within 25%)."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest

from hetero_ns3.pipeline import run_scenario
from hetero_ns3.scenario import load_scenario

pytestmark = pytest.mark.ns3

TWO_JOBS = Path(__file__).resolve().parents[2] / "scenarios" / "two-jobs.toml"


@pytest.mark.slow
def test_two_jobs_run_on_the_packet_backend_with_per_job_results(capi, tmp_path: Path) -> None:
    sc = load_scenario(TWO_JOBS, ["run.job_baselines=false"])
    out = {b: run_scenario(sc, tmp_path / b, backend=b) for b in ("ns3", "analytic")}
    jobs = {b: json.loads((o.paths.root / "summary.json").read_text())["jobs"] for b, o in out.items()}
    assert [j["name"] for j in jobs["ns3"]] == ["a", "b"]
    for pkt, flow in zip(jobs["ns3"], jobs["analytic"], strict=True):
        assert pkt["iteration_time_s"] == pytest.approx(flow["iteration_time_s"], rel=0.25)
        assert pkt["nodes"] == flow["nodes"]
    flows = pd.read_csv(out["ns3"].paths.root / "flows.csv")
    assert set(flows["job"]) == {"a", "b"}
    assert flows.groupby("job").size().to_dict() == {"a": jobs["ns3"][0]["flows"], "b": jobs["ns3"][1]["flows"]}
