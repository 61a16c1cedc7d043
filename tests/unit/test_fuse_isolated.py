"""Isolated-collective reuse (``[run] reuse_isolated_collectives``, hetero_ns3/plan/fuse.py).

A fused plan must give the detailed plan's iteration time (both on the flow-level backend: the
isolated timing *is* that backend's answer for the call alone); groups that share links, whose ranks
run at different speeds, or whose calls may overlap in time must stay detailed.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np
import pytest

from hetero_ns3.errors import ScenarioError
from hetero_ns3.network.backend import get_backend
from hetero_ns3.pipeline import collective_env, gpu_meta, isolated_fuser, load_run_cluster, lower_plan, simulate
from hetero_ns3.plan.isolation import ORDER_BUDGET, _reaches, calls_ordered, isolated_groups, pair_links
from hetero_ns3.results import summarize
from hetero_ns3.scenario.loader import load_scenario, scenario_from_dict
from hetero_ns3.topology import build_graph
from hetero_ns3.workload.planner import plan_scenario

REPO = Path(__file__).resolve().parent.parent.parent
TWO_NODE = str(REPO / "tests" / "data" / "two-node-h100.toml")
TOY = {"name": "toy", "layers": 4, "hidden": 1024, "heads": 16, "ffn_hidden": 4096, "vocab": 512, "seq_len": 512}
#: Fused vs detailed iteration time on the flow level when every fused group is exact (module docstring
#: of plan/fuse.py): equal up to float summation order.
EXACT_REL = 1e-9


def _scenario(parallelism: dict, **extra: object):
    par = {"tp": 8, "pp": 1, "dp": 2, "global_batch": 4, "micro_batch": 1, "zero_stage": 0, **parallelism}
    raw = {"model": TOY, "parallelism": par, "cluster": {"topology": TWO_NODE}, **extra}
    raw["run"] = {"backend": "analytic", "reuse_isolated_collectives": "on"}
    return scenario_from_dict(raw)


def _both(sc):
    """(fused lowering, detailed lowering, fused makespan, detailed makespan) on the analytic backend."""
    cluster = load_run_cluster(sc)
    graph = build_graph(cluster)
    env = collective_env(sc, graph)
    engine = get_backend("analytic")
    wplan = plan_scenario(sc)
    fused = lower_plan(wplan, sc, env, cluster, fuser=isolated_fuser(engine, graph, sc, env))
    detailed = lower_plan(wplan, sc, env, cluster)
    t_f = simulate(engine, fused.plan, graph, sc).times.makespan_s
    t_d = simulate(engine, detailed.plan, graph, sc).times.makespan_s
    return fused, detailed, t_f, t_d


@pytest.mark.parametrize("zero_stage", [0, 1])
def test_fused_plan_gives_the_detailed_iteration_time(zero_stage: int) -> None:
    """TP-8 on each node's NVSwitch and DP-2 on its own rail: every group isolated, the TP groups fused
    (the DP groups span two nodes: kept detailed, see lower._even)."""
    fused, detailed, t_f, t_d = _both(_scenario({"zero_stage": zero_stage, "global_batch": 4 * (1 + zero_stage)}))
    assert fused.fused["isolated_groups"] == fused.fused["groups"] == 10
    assert fused.fused["excluded_groups"] == 8
    assert 0 < fused.fused["fused_calls"] < fused.n_collectives == detailed.n_collectives
    assert fused.fused["isolated_runs"] < fused.fused["fused_shapes"]  # memo shared between the two nodes
    assert len(fused.plan) * 10 < len(detailed.plan)
    assert t_f == pytest.approx(t_d, rel=EXACT_REL)
    assert fused.choices == detailed.choices


def test_tp_communication_is_still_tp_communication() -> None:
    """Fused tasks keep the call's category; the breakdown's terms stay those of the detailed plan."""
    sc = _scenario({})
    cluster = load_run_cluster(sc)
    fused, detailed, _, _ = _both(sc)
    fused_ids = [i for i, t in enumerate(fused.plan.labels) if t.endswith(" fused")]
    cats = {fused.plan.categories[c] for c in fused.plan.category[np.isin(fused.plan.label, fused_ids)].tolist()}
    assert cats == {"tp"}
    graph = build_graph(cluster)
    meta = gpu_meta(cluster, plan_scenario(sc))
    out = []
    for low in (fused, detailed):
        times = simulate(get_backend("analytic"), low.plan, graph, sc).times
        out.append(summarize(low.plan, times, meta).overall.as_dict())
    f, d = out
    assert d["exposed_intra_node_comm_s"] > 0
    # A fused task stands for its one-node call, flows included: intra-node communication (breakdown.py).
    for key in ("exposed_intra_node_comm_s", "exposed_inter_node_comm_s"):
        assert f[key] == pytest.approx(d[key], rel=1e-6), key
    for key in ("compute_s", "pipeline_bubble_s", "straggler_wait_s", "other_s"):
        assert f[key] == pytest.approx(d[key], rel=1e-6, abs=1e-9), key


def test_groups_sharing_links_are_not_fused() -> None:
    """TP-4 x DP-4 on two 8-GPU nodes: DP pairs inside a node use the TP groups' NVLink ports."""
    fused, detailed, t_f, t_d = _both(_scenario({"tp": 4, "dp": 4, "global_batch": 8}))
    assert fused.fused["isolated_groups"] == 0 and fused.fused["fused_calls"] == 0
    assert len(fused.plan) == len(detailed.plan) and t_f == t_d


def _shared(parallelism: dict):
    sc = _scenario(parallelism)
    return _both(dataclasses.replace(sc, run=dataclasses.replace(sc.run, reuse_isolated_collectives="shared")))


def test_shared_mode_fuses_groups_whose_links_others_use() -> None:
    """``shared``: the TP-4 groups of the layout above are fused although DP pairs use their NVLink ports; the
    DP calls (gradients, at the end of the step) never overlap them in time, so the result is the detailed one."""
    fused, detailed, t_f, t_d = _shared({"tp": 4, "dp": 4, "global_batch": 8})
    assert fused.fused["isolated_groups"] == 0 and fused.fused["shared_groups"] == 4
    assert fused.fused["fused_calls"] > 0 and len(fused.plan) * 4 < len(detailed.plan)
    assert t_f == pytest.approx(t_d, rel=EXACT_REL)
    assert fused.choices == detailed.choices


def test_shared_mode_drops_contention_with_other_traffic() -> None:
    """TP-4 x PP-2 x DP-2: each node's pipeline sends cross the TP groups' NVLink ports while TP calls run.
    Fused calls are timed alone, so that contention is gone: the step is a little shorter than the detailed
    one (-0.087 % when written), never longer here."""
    fused, detailed, t_f, t_d = _shared({"tp": 4, "pp": 2, "dp": 2, "global_batch": 8})
    assert fused.fused["shared_groups"] == 4 and fused.fused["fused_calls"] > 0
    assert t_d * (1 - 5e-3) < t_f < t_d


def test_switch_sharing_counts_only_where_the_backend_has_switch_state() -> None:
    """Two TP-4 groups of one node use disjoint NVLink ports of one NVSwitch: isolated for the flow level,
    not for a backend whose switch buffers are shared between ports (the packet level)."""
    graph = build_graph(load_run_cluster(_scenario({})))
    env = collective_env(_scenario({}), graph)
    a = [f"n0.g{i}" for i in range(4)]
    b = [f"n0.g{i}" for i in range(4, 8)]
    links = {
        "a": pair_links(env, [(x, y) for x in a for y in a if x != y]),
        "b": pair_links(env, [(x, y) for x in b for y in b if x != y]),
    }
    assert isolated_groups(env, links, switches=False) == {"a", "b"}
    assert isolated_groups(env, links, switches=True) == set()
    links["c"] = pair_links(env, [("n0.g0", "n0.g4")])  # a pair across the two groups: shares both
    assert isolated_groups(env, links, switches=False) == set()


def test_ranks_of_different_speeds_are_not_fused() -> None:
    """A straggler in a TP group: the fused start barrier would wait for it (+3.9 % here), so its group
    stays detailed and the result is the detailed one."""
    sc = _scenario({}, faults={"gpus": [{"gpu": "n0.g3", "factor": 1.5}]})
    fused, _, t_f, t_d = _both(sc)
    assert fused.fused["excluded_groups"] >= 1
    assert 0 < fused.fused["fused_calls"] < fused.n_collectives
    assert t_f == pytest.approx(t_d, rel=EXACT_REL)


@pytest.mark.parametrize(
    ("extra", "model"),
    [
        ({"recompute": "selective", "global_batch": 4}, TOY),
        ({"vpp": 2, "schedule": "interleaved", "global_batch": 8}, {**TOY, "layers": 8}),
    ],
    ids=["1f1b", "interleaved"],
)
def test_tp_groups_are_fused_across_a_pipeline(extra: dict, model: dict) -> None:
    """TP-8 with sequence parallelism, one pipeline stage per node (the 128-GPU GPT-3 benchmark's layout):
    the backward's reduce-scatter follows the input all-gather on the TP communicator, so each node's TP
    calls are ordered and fused; the PP sends go over the NICs and stay detailed; same iteration time.

    Interleaved (PP 2, VP 2, 8 micro-batches): between a rank's last TP call of a forward and its next one, of a
    backward, the search through every dependency wanders through the other stage's passes beyond its budget; the
    search along the rank's own dependencies finds the previous call in a few steps (before session 30 these TP
    groups stayed detailed)."""
    fused, detailed, t_f, t_d = _both(_scenario({"pp": 2, "dp": 1, "sequence_parallel": True, **extra}, model=model))
    # 10 groups, all isolated: the two nodes' TP groups and 8 PP pairs (two nodes each: kept detailed)
    assert fused.fused["isolated_groups"] == fused.fused["groups"] == 10
    assert fused.fused["excluded_groups"] == 8
    assert fused.fused["fused_calls"] > 0
    assert len(fused.plan) * 5 < len(detailed.plan)
    assert t_f == pytest.approx(t_d, rel=EXACT_REL)


def _csr(deps: list[list[int]]) -> tuple[list[int], list[int]]:
    """The op table's dependency columns (``dep_ptr``, ``dep_pos``) of per-op dependency lists."""
    ptr = [0]
    for d in deps:
        ptr.append(ptr[-1] + len(d))
    return ptr, [x for d in deps for x in d]


def test_call_order_search_along_the_rank() -> None:
    """calls_ordered on a hand-built op table: two calls over ranks 0 and 1 (X = ops 0, 1; Y = ops 2, 3). Y's member
    on rank 0 depends on a long chain of rank-2 ops (listed last, so searched first by the depth-first search) and
    on op 4, which follows X's member; the chain outlasts the depth-first budget, the rank's own search finds X."""
    chain = ORDER_BUDGET + 10
    first_chain = 5
    deps: list[list[int]] = [[], [], [4, first_chain], [1], [0]]  # ops 0-4
    ranks = [0, 1, 0, 1, 0]
    for i in range(chain):  # ops 5 ..: rank 2, each on the next, the last on nothing
        deps.append([first_chain + i + 1] if i + 1 < chain else [])
        ranks.append(2)
    ptr, pos = _csr(deps)
    assert calls_ordered(ranks, ptr, pos, [[0, 1], [2, 3]])
    deps_cut = [list(d) for d in deps]
    deps_cut[4] = []  # op 4 no longer follows X on rank 0: Y may start before X there
    assert not calls_ordered(ranks, *_csr(deps_cut), [[0, 1], [2, 3]])
    assert not calls_ordered(ranks, ptr, pos, [[0], [2, 3]])  # a rank of Y with no member in X
    assert not _reaches(ptr, pos, 2, 0)  # the depth-first search alone gives up


def test_calls_that_may_overlap_are_not_fused() -> None:
    """The demo's DP buckets have their own rails but do not wait for each other: not fused."""
    sc = load_scenario(REPO / "scenarios" / "demo.toml", ["run.backend=analytic", "run.reuse_isolated_collectives=on"])
    cluster = load_run_cluster(sc)
    graph = build_graph(cluster)
    env = collective_env(sc, graph)
    low = lower_plan(plan_scenario(sc), sc, env, cluster, fuser=isolated_fuser(get_backend("analytic"), graph, sc, env))
    assert low.fused["isolated_groups"] == low.fused["excluded_groups"] > 0
    assert low.fused["fused_calls"] == 0


@pytest.mark.parametrize("value", ["maybe", "ON", 1])
def test_bad_mode_names_field_value_and_fix(value: object) -> None:
    with pytest.raises(ScenarioError) as e:
        scenario_from_dict({"run": {"reuse_isolated_collectives": value}})
    msg = str(e.value)
    assert "run.reuse_isolated_collectives" in msg and repr(value) in msg and "'on'" in msg


def test_link_faults_are_refused_with_reuse_on() -> None:
    sc = _scenario({}, faults={"links": [{"a": "n0.g0", "b": "n0.nvsw", "rate_factor": 0.5}]})
    graph = build_graph(load_run_cluster(sc))
    with pytest.raises(ScenarioError, match="reuse_isolated_collectives"):
        isolated_fuser(get_backend("analytic"), graph, sc, collective_env(sc, graph))


def test_auto_mode_fuses_on_both_backends_without_faults() -> None:
    """The default ``auto``: on for the analytic backend (exact there) and the packet level (within 0.5% on
    the 128-GPU iterations), off with link faults and for [[jobs]]; ``on`` and ``off`` are what they say."""
    from hetero_ns3.pipeline import reuse_active

    base = {"model": TOY, "parallelism": {"tp": 8, "dp": 2, "global_batch": 4}, "cluster": {"topology": TWO_NODE}}
    sc = scenario_from_dict(base)
    assert sc.run.reuse_isolated_collectives == "auto"
    assert reuse_active(sc, "analytic") and reuse_active(sc, "ns3")
    faults = {"links": [{"a": "n0.g0", "b": "n0.nvsw", "rate_factor": 0.5}]}
    for backend in ("analytic", "ns3"):
        assert not reuse_active(scenario_from_dict({**base, "faults": faults}), backend)
    for mode, want in (("on", True), ("shared", True), ("off", False)):
        sc_m = scenario_from_dict({**base, "run": {"reuse_isolated_collectives": mode}})
        assert reuse_active(sc_m, "analytic") is want and reuse_active(sc_m, "ns3") is want
    # the default lowering builds a fuser on either backend; with "off" on neither
    graph = build_graph(load_run_cluster(sc))
    env = collective_env(sc, graph)
    off = scenario_from_dict({**base, "run": {"reuse_isolated_collectives": "off"}})
    for backend in ("analytic", "ns3"):
        assert isolated_fuser(get_backend(backend), graph, sc, env) is not None
        assert isolated_fuser(get_backend(backend), graph, off, env) is None


def test_size_estimate_counts_fused_calls() -> None:
    """limits.workload_tasks with the predicate the run path passes: close to the fused plan."""
    from hetero_ns3.limits import fusable_groups, workload_tasks

    sc = _scenario({"global_batch": 8})
    fused, _, _, _ = _both(sc)
    env = collective_env(sc, build_graph(load_run_cluster(sc)))
    workload = plan_scenario(sc).workload
    est = workload_tasks(workload, fusable_groups(workload, env.node_of))
    assert 0.5 < est / len(fused.plan) < 2.0
    assert est < workload_tasks(workload) / 10
