"""Several jobs on one cluster ([[jobs]]): plan merging, placement policies, contention and its slowdowns."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from hetero_ns3.errors import PlanningError, ScenarioError
from hetero_ns3.pipeline import run_scenario
from hetero_ns3.plan.builder import PlanBuilder
from hetero_ns3.plan.dag import critical_path_s
from hetero_ns3.plan.merge import delay_start, merge_plans
from hetero_ns3.scenario import load_scenario, scenario_from_dict

TWO_JOBS = Path(__file__).resolve().parents[2] / "scenarios" / "two-jobs.toml"


def _toy_plan(gpus: tuple[str, ...], dur: float):
    b = PlanBuilder(gpus)
    tasks = {g: b.add_compute(g, dur, label="fwd", category="compute") for g in gpus}
    f = b.add_flow(gpus[0], gpus[1], 1000, deps=[tasks[gpus[0]]], label="dp ch1", category="dp")
    b.add_compute(gpus[1], 2 * dur, deps=[f], label="bwd", category="compute")
    return b.build()


def test_merge_keeps_each_plan_and_delay_shifts_its_critical_path() -> None:
    p, q = _toy_plan(("a0", "a1"), 1e-3), _toy_plan(("b0", "b1", "b2"), 2e-3)
    merged, first = merge_plans([p, delay_start(q, 5e-3)])
    assert merged.gpus == ("a0", "a1", "b0", "b1", "b2") and list(first) == [0, len(p)]
    cp = critical_path_s(merged, 0.0).finish_s
    np.testing.assert_allclose(cp[: len(p)], critical_path_s(p, 0.0).finish_s)
    np.testing.assert_allclose(cp[len(p) + 3 :], critical_path_s(q, 0.0).finish_s + 5e-3)
    assert merged.categories.count("dp") == 1 and merged.labels[merged.label[len(p) + 3]] == q.labels[q.label[0]]
    with pytest.raises(PlanningError, match="share GPUs"):
        merge_plans([p, p])


def _run(tmp_path: Path, policy: str, backend: str = "analytic") -> dict:
    raw_over = [f"run.backend={backend}"]
    text = TWO_JOBS.read_text().replace('policy = "spread"', f'policy = "{policy}"')
    path = tmp_path / f"{policy}.toml"
    path.write_text(text)
    sc = load_scenario(path, raw_over)
    out = run_scenario(sc, tmp_path / policy)
    return json.loads((out.paths.root / "summary.json").read_text())


def test_spread_jobs_contend_on_the_spines_and_packed_ones_do_not(tmp_path: Path) -> None:
    packed, spread = _run(tmp_path, "packed"), _run(tmp_path, "spread")
    # 4 nodes per leaf: packed jobs each stay under one leaf (no shared link): alone == shared exactly.
    assert [j["nodes"] for j in packed["jobs"]] == [[0, 1], [2, 3]]
    for j in packed["jobs"]:
        assert j["slowdown"] == pytest.approx(1.0, abs=1e-9)
    # Spread jobs cross the 2:1 oversubscribed spines together: both slow down, by more than 5%.
    assert [j["nodes"] for j in spread["jobs"]] == [[0, 8], [1, 9]]
    for j in spread["jobs"]:
        assert j["slowdown"] > 1.05
        assert j["iteration_time_s"] > j["alone_iteration_time_s"]
    # Job b starts 10 us later: its tasks (and nothing of job a) wait for that.
    assert spread["jobs"][1]["start_s"] == pytest.approx(10e-6)


def test_job_errors_name_the_job_field() -> None:
    base = {"cluster": {"topology": "h100-leafspine-2to1"}}
    job = {"model": {"name": "gpt3-125m"}, "parallelism": {"tp": 8, "dp": 2, "global_batch": 4}}
    with pytest.raises(ScenarioError, match=r"jobs\[0\].parallelism.dp"):
        scenario_from_dict({**base, "jobs": [{**job, "parallelism": {"tp": 4, "global_batch": 4}}]})
    with pytest.raises(ScenarioError, match=r"\[model\] and \[\[jobs\]\]"):
        scenario_from_dict({**base, "model": {"name": "gpt3-125m"}, "jobs": [job]})
    with pytest.raises(ScenarioError, match=r"jobs\[1\].placement.nodes \(0\) is already used"):
        sc = scenario_from_dict(
            {**base, "jobs": [{**job, "placement": {"nodes": [0, 1]}}, {**job, "placement": {"nodes": [0, 2]}}]}
        )
        run_scenario(sc, "/nonexistent-should-not-be-written", backend="analytic")
    with pytest.raises(ScenarioError, match=r"jobs\[0\] \(job0\): parallelism.tp \(8\) must divide model.heads"):
        sc = scenario_from_dict({**base, "jobs": [job]})
        from hetero_ns3.jobs import lower_jobs
        from hetero_ns3.pipeline import load_run_cluster
        from hetero_ns3.topology import build_graph

        cl = load_run_cluster(sc)
        lower_jobs(sc, build_graph(cl), cl)


@pytest.mark.parametrize("mode", ["on", "shared"])
def test_forced_reuse_is_refused_with_jobs_naming_the_mode(mode: str, tmp_path: Path) -> None:
    """Isolation is decided per job and jobs share the network: ``on`` and ``shared`` are refused before anything
    is written, the message naming the field, the value and the fix."""
    sc = load_scenario(TWO_JOBS, ["run.backend=analytic", f"run.reuse_isolated_collectives={mode}"])
    with pytest.raises(ScenarioError) as e:
        run_scenario(sc, tmp_path / "out")
    msg = str(e.value)
    assert f"run.reuse_isolated_collectives ({mode!r})" in msg and "[[jobs]]" in msg and "= 'off'" in msg
    assert not (tmp_path / "out").exists()
