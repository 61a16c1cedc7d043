"""Tuning file, schedule files and call validation: typed errors naming the field."""

from __future__ import annotations

import tomllib

import pytest

from hetero_ns3.collectives import CollectiveCall, CollectiveEnv, get_algorithm, load_tuning, plan_collective
from hetero_ns3.collectives.schedules import schedule_from_dict
from hetero_ns3.collectives.tuning import default_tuning_path, tuning_from_dict
from hetero_ns3.errors import PlanningError, ScenarioError
from hetero_ns3.plan.builder import PlanBuilder
from hetero_ns3.topology import star


def test_tuning_constants_match_nccl_tables():
    t = load_tuning()
    assert t.base_latency_s["ring"]["Simple"] == pytest.approx(8.4e-6)
    assert t.base_latency_s["ring"]["LL"] == pytest.approx(6.6e-6)  # NCCL v2.30.7 baseLat
    assert t.hw_latency("network", "ring", "Simple") == pytest.approx(14.0e-6)  # v2.30.7 hwLat
    assert t.hw_latency("nvlink", "ring", "LL") == pytest.approx(0.6e-6)
    assert t.hw_latency("nvlink", "tree", "LL128") == pytest.approx(1.25e-6)
    assert t.bandwidth["ring_ll"] == 0.5
    assert t.ll_max_busbw_Bps is not None and t.ll_max_busbw_Bps.one_node["Hopper"] == pytest.approx(141e9)
    assert t.wire_factor["LL"] == 2.0
    assert "tuning.cc" in default_tuning_path().read_text()


def _data():
    with open(default_tuning_path(), "rb") as f:
        return tomllib.load(f)


def test_tuning_errors_name_the_field():
    d = _data()
    d["links"]["network"]["efficiency"] = -1
    with pytest.raises(ScenarioError, match=r"links\.network\.efficiency"):
        tuning_from_dict(d)
    d = _data()
    d["channels"]["max"] = 0
    with pytest.raises(ScenarioError, match=r"channels\.max \(0\)"):
        tuning_from_dict(d)
    d = _data()
    del d["hw_latency_us"]["pcie"]["ring"]["LL128"]
    with pytest.raises(ScenarioError, match=r"hw_latency_us\.pcie\.ring\.LL128"):
        tuning_from_dict(d)


def test_schedule_errors():
    ok = {"schedule": {"name": "x", "ranks": 3, "rings": [[0, 2, 1]]}}
    assert schedule_from_dict(ok).rings == [[0, 2, 1]]
    with pytest.raises(ScenarioError, match=r"rings\[0\].*permutation"):
        schedule_from_dict({"schedule": {"name": "x", "ranks": 3, "rings": [[0, 1, 1]]}})
    with pytest.raises(ScenarioError, match=r"ops"):
        schedule_from_dict({"schedule": {"name": "x", "ranks": 3, "rings": [[0, 1, 2]], "ops": ["all_to_all"]}})
    with pytest.raises(ScenarioError, match=r"kind"):
        schedule_from_dict({"schedule": {"name": "x", "kind": "tree", "ranks": 3, "rings": [[0, 1, 2]]}})


def test_call_validation():
    with pytest.raises(ScenarioError, match=r"call\.op \('allreduse'\)"):
        CollectiveCall("allreduse", ("h0", "h1"), 1)
    assert CollectiveCall("All-Reduce", ("h0", "h1"), 1).op == "all_reduce"
    with pytest.raises(ScenarioError, match=r"call\.group"):
        CollectiveCall("all_reduce", ("h0", "h0"), 1)
    with pytest.raises(ScenarioError, match=r"call\.root \(5\)"):
        CollectiveCall("broadcast", ("h0", "h1"), 1, root=5)
    with pytest.raises(ScenarioError, match=r"call\.protocol"):
        CollectiveCall("all_reduce", ("h0", "h1"), 1, protocol="LL64")
    with pytest.raises(ScenarioError, match=r"call\.pair_bytes"):
        CollectiveCall("all_to_all_v", ("h0", "h1"), 0, pair_bytes=((0, 1),))


def test_planning_errors():
    env = CollectiveEnv.from_graph(star(4))
    b = PlanBuilder(env.gpus)
    with pytest.raises(PlanningError, match="h9"):
        plan_collective(b, CollectiveCall("all_reduce", ("h0", "h9"), 1024), env)
    with pytest.raises(PlanningError, match="does not implement"):
        plan_collective(b, CollectiveCall("all_gather", env.gpus, 1024, algo="tree"), env)
    with pytest.raises(PlanningError, match="written for 8 ranks"):
        plan_collective(b, CollectiveCall("all_reduce", env.gpus, 1024, algo="ring_interleaved_8"), env)
    with pytest.raises(ScenarioError, match="not a known algorithm.*ring"):
        get_algorithm("rnig")
