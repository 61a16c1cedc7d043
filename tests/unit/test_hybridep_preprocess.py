"""HybridEP's metadata preprocessing (``parallelism.moe_flex_backend = "hybridep"``; docs/workload.md, "MoE token
exchange"): each MoE layer's forward dispatch all-gathers the expert-parallel group's routing maps (one byte
per token and expert) and runs one layout kernel over them; the combine and the backward reuse the layout.
Checked against counts and sizes by hand, the DeepEP programs (the default) as the reference, and the
iteration's growth against the sum of the added calls' own times (blocking, on every rank's critical path)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from hetero_ns3.collectives import CollectiveCall, plan_collective
from hetero_ns3.errors import ScenarioError
from hetero_ns3.network.analytic import simulate_plan
from hetero_ns3.network.analytic.times_only import replay_times
from hetero_ns3.pipeline import collective_env, load_run_cluster, lower_scenario
from hetero_ns3.plan.builder import PlanBuilder
from hetero_ns3.scenario.loader import scenario_from_dict
from hetero_ns3.topology import build_graph

FOUR_GPU = Path(__file__).resolve().parent.parent / "data" / "one-node-4gpu.toml"
LAYERS, SEQ, EP, EXPERTS = 2, 1024, 4, 60  # Qwen1.5-MoE-A2.7B: 60 routed experts
GLOBAL_BATCH = 8
MICRO_BATCHES = GLOBAL_BATCH // EP  # per rank: the EP group is the data-parallel group here


def _scenario(backend: str | None, recompute: str = "none"):
    par = {"tp": 1, "pp": 1, "ep": EP, "global_batch": GLOBAL_BATCH, "micro_batch": 1, "moe_dispatcher": "flex"}
    if backend is not None:
        par["moe_flex_backend"] = backend
    if recompute != "none":
        par |= {"recompute": "selective", "recompute_modules": [recompute]}
    return scenario_from_dict(
        {
            "model": {"name": "qwen1.5-moe-a2.7b", "layers": LAYERS, "seq_len": SEQ},
            "parallelism": par,
            "cluster": {"topology": str(FOUR_GPU)},
            "compute": {"host_sync_gap": "0s"},  # no host gaps: the exchange's own time alone
        }
    )


def _compiled(sc):
    cluster = load_run_cluster(sc, "analytic")
    graph = build_graph(cluster)
    wplan, low = lower_scenario(sc, graph, cluster)
    return wplan, low, graph


def _ops(wplan):
    return [op for prog in wplan.workload.programs for op in prog.ops]


def test_hybridep_gathers_routing_maps_once_per_forward_dispatch() -> None:
    """One all-gather of ``ep x tokens x experts`` bytes on the EP group and one layout kernel per rank, MoE
    layer and micro-batch, in the forward only, right before the dispatch; nothing else differs from DeepEP."""
    deep, _, _ = _compiled(_scenario(None))
    hyb, _, _ = _compiled(_scenario("hybridep"))
    maps = [op for op in _ops(hyb) if op.name.endswith("moe.dispatch.map")]
    preps = [op for op in _ops(hyb) if op.name.endswith("moe.dispatch.prep")]
    ranks = sum(len(p.ranks) for p in hyb.workload.programs)
    assert len(maps) == len(preps) == ranks * LAYERS * MICRO_BATCHES
    assert {op.collective for op in maps} == {"all_gather"} and {op.dim for op in maps} == {"ep"}
    assert {op.bytes for op in maps} == {float(EP * SEQ * EXPERTS)}
    assert all(len(op.groups[0]) == EP for op in maps)
    assert {op.phase for op in maps + preps} == {"F"}
    # the layout kernel reads the gathered map and writes the slot map (4 B per token of the group) and the
    # local experts' map (a byte per token and expert)
    assert {op.bytes for op in preps} == {float(EP * SEQ * EXPERTS + 4 * EP * SEQ + SEQ * EXPERTS)}
    for prog in hyb.workload.programs:
        for i, op in enumerate(prog.ops):
            if op.name.endswith("moe.dispatch.map"):
                assert prog.ops[i - 1].name.endswith("moe.route") and prog.ops[i + 1].name.endswith("moe.dispatch.prep")
                assert prog.ops[i + 2].name.endswith("moe.dispatch.a2a")
    added = ("moe.dispatch.map", "moe.dispatch.prep")
    kept = [(op.name, op.bytes, op.duration) for op in _ops(hyb) if not op.name.endswith(added)]
    assert kept == [(op.name, op.bytes, op.duration) for op in _ops(deep)]
    explicit, _, _ = _compiled(_scenario("deepep"))
    assert [(op.name, op.bytes) for op in _ops(explicit)] == [(op.name, op.bytes) for op in _ops(deep)]


def test_recomputed_moe_layer_gathers_again() -> None:
    """Recomputing the MoE layer (``recompute_modules = ["moe"]``) re-runs its forward dispatch, preprocessing
    included: twice the gathers of the plain run."""
    hyb, _, _ = _compiled(_scenario("hybridep", recompute="moe"))
    maps = [op for op in _ops(hyb) if op.name.endswith("moe.dispatch.map")]
    ranks = sum(len(p.ranks) for p in hyb.workload.programs)
    assert len(maps) == 2 * ranks * LAYERS * MICRO_BATCHES
    assert sum(op.name.endswith("recompute.moe.dispatch.map") for op in maps) == ranks * LAYERS * MICRO_BATCHES


def test_iteration_grows_by_the_added_calls() -> None:
    """On one node with PP 1 and no data parallelism every EP call is blocking and on every rank's critical
    path, so the iteration grows by exactly (gather + layout kernel) per MoE layer and micro-batch."""
    sc = _scenario("hybridep")
    deep, deep_low, graph = _compiled(_scenario(None))
    hyb, hyb_low, _ = _compiled(sc)
    t_deep = float(np.max(replay_times(graph, deep_low.plan).times.finish_s))
    t_hyb = float(np.max(replay_times(graph, hyb_low.plan).times.finish_s))
    prep = next(op for op in _ops(hyb) if op.name.endswith("moe.dispatch.prep")).duration
    group = next(op for op in _ops(hyb) if op.name.endswith("moe.dispatch.map")).groups[0]
    builder = PlanBuilder(list(group))
    plan_collective(builder, CollectiveCall("all_gather", tuple(group), EP * SEQ * EXPERTS), collective_env(sc, graph))
    gather = simulate_plan(graph, builder.build(), seed=1).times.makespan_s
    assert prep > 0 and gather > 0
    assert t_hyb - t_deep == pytest.approx(LAYERS * MICRO_BATCHES * (gather + prep), rel=1e-6)


def test_unknown_backend_is_refused() -> None:
    with pytest.raises(ScenarioError, match="moe_flex_backend"):
        _scenario("nixl")
