"""Per-link bytes by job (``Backend.link_load``, ``results.link_table``): conservation against the flow-level
backend's own link counters, the even split of packet spraying, and the contention figures of a
two-job run (issue 18)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from hetero_ns3.network.analytic.backend import AnalyticBackend
from hetero_ns3.network.config import NetworkConfig, RoutingConfig
from hetero_ns3.network.link_load import sprayed_link_bytes
from hetero_ns3.network.ns3.backend import Ns3Backend
from hetero_ns3.plan.builder import PlanBuilder
from hetero_ns3.results.link_table import LINK_COLUMNS, job_link_figures, link_table
from hetero_ns3.topology.simple import leaf_spine
from tests.unit.test_multijob import _run

SIZE = 1_000_000


def _cross_leaf_plan(n: int = 8):
    """``n`` flows from hosts under leaf0 to hosts under leaf1 (two jobs: even and odd flows)."""
    hosts = tuple(f"h{i}" for i in range(8))
    b = PlanBuilder(hosts)
    for i in range(n):
        b.add_flow(hosts[i % 4], hosts[4 + (i * 3) % 4], SIZE, label=f"dp ch{i}", category="dp")
    plan = b.build()
    group = np.arange(len(plan)) % 2
    return plan, group


def test_routed_bytes_by_job_add_up_to_the_flow_level_link_counters() -> None:
    g = leaf_spine(2, 4, 4, 100e9, 1e-6)
    plan, group = _cross_leaf_plan()
    backend = AnalyticBackend()
    run = backend.run(plan, g, NetworkConfig(), seed=7)
    by_job = backend.link_load(plan, g, NetworkConfig(), seed=7, group=group, n_groups=2)
    np.testing.assert_array_equal(by_job.sum(axis=0), run.raw.link_bytes)
    # Every flow crosses exactly 4 links (host-leaf-spine-leaf-host): 4 x bytes per job in total.
    np.testing.assert_allclose(by_job.sum(axis=(1, 2)), [4 * 4 * SIZE, 4 * 4 * SIZE])


def test_spraying_splits_each_flow_evenly_over_the_spines() -> None:
    g = leaf_spine(2, 4, 4, 100e9, 1e-6)
    plan, group = _cross_leaf_plan(n=1)
    by_job = sprayed_link_bytes(g, plan, group, 2)
    up = [i for i, lk in enumerate(g.links) if lk.a == "leaf0" and lk.b.startswith("spine")]
    assert len(up) == 4
    np.testing.assert_allclose(by_job[0, up, 0], SIZE / 4)
    assert by_job[1].sum() == 0
    # Conservation: each of the four tiers carries the flow's bytes once.
    assert by_job.sum() == pytest.approx(4 * SIZE)
    # The packet backend reads the split from the switches' spraying setting.
    spray = NetworkConfig(routing=RoutingConfig(packet_spray=True))
    np.testing.assert_allclose(Ns3Backend().link_load(plan, g, spray, seed=0, group=group, n_groups=2), by_job)


def test_link_table_rows_and_job_figures() -> None:
    g = leaf_spine(2, 4, 4, 100e9, 1e-6)
    plan, group = _cross_leaf_plan()
    by_job = AnalyticBackend().link_load(plan, g, NetworkConfig(), seed=7, group=group, n_groups=2)
    t = link_table(g, by_job, ["a", "b"], span_s=1e-3)
    assert list(t.columns) == list(LINK_COLUMNS)
    assert len(t) == int((by_job > 0).sum())
    row = t.iloc[0]
    assert row["utilisation"] == pytest.approx(row["bytes"] * 8 / (100e9 * 1e-3))
    assert set(t.loc[t["fabric"], "from"]) <= {"leaf0", "leaf1", "spine0", "spine1", "spine2", "spine3"}
    fig = job_link_figures(t, "a")
    assert fig["fabric_bytes"] == pytest.approx(2 * 4 * SIZE)  # leaf->spine and spine->leaf per flow
    assert 0.0 <= fig["shared_fabric_fraction"] <= 1.0
    with pytest.raises(ValueError, match="shape"):
        link_table(g, by_job[:1], ["a", "b"], 1e-3)


def test_spread_jobs_share_fabric_links_and_packed_ones_do_not(tmp_path: Path) -> None:
    packed, spread = _run(tmp_path, "packed"), _run(tmp_path, "spread")
    for j in packed["jobs"]:
        assert j["links"]["fabric_bytes"] == 0.0  # each job under its own leaf
        assert j["links"]["shared_fabric_fraction"] == 0.0
    for j in spread["jobs"]:
        assert j["links"]["fabric_bytes"] > 0
        assert j["links"]["shared_fabric_fraction"] > 0.05
        assert j["links"]["busiest_link_utilisation"] > 0
    t = pd.read_csv(tmp_path / "spread" / "links.csv")
    assert set(t["job"]) == {"a", "b"}
    assert (t.loc[t["fabric"], "jobs_on_link"] >= 1).all()
    assert json.dumps(spread["jobs"][0]["links"])  # JSON-serialisable


def test_study_rows_carry_per_job_contention_columns(tmp_path: Path) -> None:
    from hetero_ns3.pipeline import run_scenario
    from hetero_ns3.scenario import load_scenario
    from hetero_ns3.studies.spec import expand, load_study_file
    from hetero_ns3.studies.table import JOB_COLUMNS, point_row, study_frame, write_table

    repo = Path(__file__).resolve().parents[2]
    study = load_study_file(repo / "scenarios" / "studies" / "job-contention" / "study.toml")
    point = expand(study)[0]
    run_scenario(load_scenario(repo / "scenarios" / "two-jobs.toml"), tmp_path / "runs" / point.point_id)
    row = point_row(study, point, tmp_path)
    for job in ("a", "b"):
        assert row[f"job.{job}.slowdown"] > 1.05  # spread (the file's placement), with baselines
        assert 0 < row[f"job.{job}.shared_fabric_fraction"] <= 1
        assert 0 < row[f"job.{job}.fabric_peak_utilisation"] <= 1
    # ... and they reach study.parquet (study_frame kept only the ``term[type]`` extras: no job column at all)
    table = pd.read_parquet(write_table(study_frame(study, expand(study), tmp_path), tmp_path / "study.parquet"))
    cols = [f"job.{job}.{key}" for job in ("a", "b") for key in JOB_COLUMNS]
    assert set(cols) <= set(table.columns)
    first = table[table["point_id"] == point.point_id].iloc[0]
    assert [first[c] for c in cols] == [row[c] for c in cols]
    assert table[cols].dtypes.eq("float64").all() and table.loc[table["status"] == "missing", cols].isna().all().all()
