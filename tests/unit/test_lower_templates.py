"""Template reuse in plan lowering gives the same plan, array for array, as emitting every call.

``CallTemplates`` (hetero_ns3/collectives/templates.py) replays repeated collective calls from a
recorded block of tasks. These tests compare plans built with and without it: every field of the
:class:`~hetero_ns3.plan.dag.ExecutionPlan` (dtypes too), labels, categories and the dependency CSR.
"""

from __future__ import annotations

import dataclasses
import random
from pathlib import Path

import numpy as np
import pytest

from hetero_ns3.collectives import CollectiveCall, CollectiveEnv, plan_collective
from hetero_ns3.collectives.templates import CallTemplates
from hetero_ns3.collectives.testbeds import rail_cluster
from hetero_ns3.errors import PlanningError
from hetero_ns3.pipeline import load_run_cluster, lower_scenario
from hetero_ns3.plan.builder import PlanBuilder
from hetero_ns3.plan.dag import COMM_STREAM, ExecutionPlan
from hetero_ns3.scenario.loader import load_scenario, scenario_from_dict
from hetero_ns3.topology import build_graph

DATA = Path(__file__).resolve().parent.parent / "data"
REPO = Path(__file__).resolve().parent.parent.parent
TOY = {"name": "toy", "layers": 8, "hidden": 2048, "heads": 16, "ffn_hidden": 8192, "vocab": 512, "seq_len": 1024}


def assert_same_plan(a: ExecutionPlan, b: ExecutionPlan) -> None:
    """Every field equal; arrays also in dtype and shape."""
    for f in dataclasses.fields(ExecutionPlan):
        x, y = getattr(a, f.name), getattr(b, f.name)
        if isinstance(x, np.ndarray):
            assert x.dtype == y.dtype and x.shape == y.shape, f.name
            assert np.array_equal(x, y), f"ExecutionPlan.{f.name} differs"
        else:
            assert x == y, f"ExecutionPlan.{f.name} differs"


def _lower_both(sc):
    cluster = load_run_cluster(sc)
    graph = build_graph(cluster)
    return tuple(lower_scenario(sc, graph, cluster, reuse=flag)[1] for flag in (False, True))


def _toy(topology: str, parallelism: dict, model: dict | None = None, **sections):
    raw = {"model": model or TOY, "parallelism": parallelism, "cluster": {"topology": topology}}
    raw.update(sections)
    return scenario_from_dict(raw)


MOE_EP = {"tp": 2, "pp": 1, "ep": 4, "global_batch": 8, "micro_batch": 1, "sequence_parallel": True}
MOE_MODEL = {"name": "mixtral-8x7b", "layers": 2, "seq_len": 256}
MLA_MODEL = {"name": "deepseek-v3", "layers": 4, "dense_layers": 1, "seq_len": 256, "hidden": 1024, "heads": 8,
             "q_lora_rank": 256, "kv_lora_rank": 128, "ffn_hidden": 2048, "moe_ffn": 256, "shared_ffn": 256,
             "experts": 16, "top_k": 4, "router_groups": 4, "router_group_topk": 2, "vocab": 32000}  # fmt: skip

SCENARIOS = {
    # Mixed H100 + A100 nodes, TP 4 x PP 2 x DP 2, ZeRO-1 (the README demo).
    "demo_mixed_zero1": lambda: load_scenario(REPO / "scenarios" / "demo.toml"),
    # Same, with a slowed GPU type and sequence parallelism + selective recompute.
    "demo_slowdown_sp": lambda: load_scenario(
        REPO / "scenarios" / "demo.toml",
        [
            'faults.gpus=[{gpu_type = "A100-SXM-80GB", factor = 1.7}]',
            "parallelism.sequence_parallel=true",
            'parallelism.recompute="selective"',
        ],
    ),
    # Collective overrides and priorities per dimension, DP all-reduce (no ZeRO).
    "overrides_priorities": lambda: _toy(
        str(DATA / "two-node-h100.toml"),
        {"tp": 8, "pp": 1, "global_batch": 4, "micro_batch": 1, "zero_stage": 0},
        collectives={
            "dp": {"algo": "ring", "protocol": "Simple", "channels": 2, "priority": 5},
            "tp": {"protocol": "LL128"},
        },
    ),
    # Tree all-reduce for DP, TP without sequence parallelism (all-reduces), pipeline sends.
    "tree_pp_sends": lambda: _toy(
        str(DATA / "two-node-h100.toml"),
        {"tp": 4, "pp": 2, "global_batch": 8, "micro_batch": 1, "zero_stage": 0},
        collectives={"dp": {"algo": "tree"}},
    ),
    # Coarse granularity (as the GPT-3 benchmark) on one 4-GPU node, PP 4 with 1F1B.
    "coarse_pp4": lambda: _toy(
        str(DATA / "one-node-4gpu.toml"),
        {"tp": 1, "pp": 4, "global_batch": 8, "micro_batch": 1, "schedule": "1f1b"},
        collectives={"max_channels": 2, "max_slices": 1},
    ),
    # Context parallelism: the KV ring (async all-gathers over CP pairs) and the Ulysses all-to-alls.
    "cp_ring": lambda: _toy(
        str(DATA / "two-node-h100.toml"),
        {
            "tp": 2,
            "pp": 2,
            "cp": 2,
            "global_batch": 8,
            "micro_batch": 1,
            "sequence_parallel": True,
            "order": "tp-dp-pp",
        },
    ),
    "cp_a2a": lambda: _toy(
        str(DATA / "two-node-h100.toml"),
        {"tp": 2, "pp": 1, "cp": 4, "cp_comm_type": "a2a", "global_batch": 4, "micro_batch": 1, "order": "tp-dp-pp"},
    ),
    # Mixture of experts: expert-parallel all-to-all and expert-data-parallel reductions.
    "moe_ep": lambda: _toy("mixed-2node", MOE_EP, model=MOE_MODEL),
    # The same with DeepEP / HybridEP's deduplicating exchange.
    "moe_ep_flex": lambda: _toy("mixed-2node", {**MOE_EP, "moe_dispatcher": "flex"}, model=MOE_MODEL),
    # HybridEP's routing-map gathers, with the host model: issue costs, the routing step's synchronisation and
    # each rank's gap after it.
    "moe_ep_host": lambda: _toy(
        "mixed-2node",
        {**MOE_EP, "moe_dispatcher": "flex", "moe_flex_backend": "hybridep"},
        model=MOE_MODEL,
        compute={"host_op": "20us", "host_launch": "5us", "host_sync_gap": "300us"},
    ),
    # MoE parallel folding: EP 8 over the TP 2 x DP 8 ranks (expert tensor parallelism 1), with EP overlap.
    "moe_ep_folded": lambda: _toy(
        "mixed-2node",
        {**MOE_EP, "ep": 8, "etp": 1, "overlap_moe_expert_parallel_comm": True},
        model=MOE_MODEL,
        compute={"host_op": "20us", "host_launch": "5us", "host_sync_gap": "300us"},
    ),
    # DeepSeek-V3's features, shrunk: multi-latent attention under TP 2 with SP and its up-projections recomputed, a
    # dense first layer, the multi-token prediction module on the last of two stages, the flex dispatcher.
    "mla_mtp": lambda: _toy(
        "mixed-2node",
        {
            "tp": 2,
            "pp": 2,
            "ep": 2,
            "global_batch": 8,
            "micro_batch": 1,
            "sequence_parallel": True,
            "recompute": "selective",
            "recompute_modules": ["mla_up_proj"],
            "moe_dispatcher": "flex",
        },
        model=MLA_MODEL,
        compute={"host_sync_gap": "300us"},
    ),  # fmt: skip
    # Expert-parallel overlap (forward and backward of two micro-batches layer by layer, the exchanges and their
    # kernels on the EP stream, the synchronisation inside the dispatch), with the host model as above.
    "moe_ep_overlap": lambda: _toy(
        "mixed-2node",
        {**MOE_EP, "moe_dispatcher": "flex", "moe_flex_backend": "hybridep", "overlap_moe_expert_parallel_comm": True},
        model=MOE_MODEL,
        compute={"host_op": "20us", "host_launch": "5us", "host_sync_gap": "300us"},
    ),
}


@pytest.mark.parametrize("name", sorted(SCENARIOS))
def test_reuse_gives_the_same_plan(name):
    plain, reused = _lower_both(SCENARIOS[name]())
    assert_same_plan(plain.plan, reused.plan)
    assert plain.op_exit == reused.op_exit
    assert plain.choices == reused.choices and plain.n_collectives == reused.n_collectives


def test_moe_scenario_has_all_to_all():
    """The MoE case above really exercises all-to-all (else it would test nothing new)."""
    _, low = _lower_both(SCENARIOS["moe_ep"]())
    assert any(k.startswith("ep:all_to_all") for k in low.choices)
    assert not any("expert_dispatch" in k for k in low.choices)


def test_flex_dispatcher_plans_the_ep_exchange_with_expert_dispatch():
    """``moe_dispatcher = "flex"``: every EP all-to-all is planned by ``expert_dispatch``, nothing else changes."""
    _, low = _lower_both(SCENARIOS["moe_ep_flex"]())
    ep = {k: v for k, v in low.choices.items() if k.startswith("ep:")}
    assert ep and all(k.startswith("ep:all_to_all:expert_dispatch") for k in ep), ep
    _, plain = _lower_both(SCENARIOS["moe_ep"]())
    rest = {k: v for k, v in plain.choices.items() if not k.startswith("ep:")}
    assert rest == {k: v for k, v in low.choices.items() if not k.startswith("ep:")}
    assert sum(ep.values()) == sum(v for k, v in plain.choices.items() if k.startswith("ep:"))


def test_unknown_moe_dispatcher_names_the_field():
    from hetero_ns3.errors import ScenarioError

    with pytest.raises(ScenarioError, match=r"parallelism\.moe_dispatcher.*'deepep'"):
        _toy("mixed-2node", {"tp": 1, "ep": 2, "global_batch": 8, "moe_dispatcher": "deepep"})


@pytest.fixture(scope="module")
def env():
    return CollectiveEnv.from_graph(rail_cluster(2, 4, nvlink_bps=3.6e12, nic_bps=400e9))


def _calls(env):
    g = env.gpus
    node0, both = g[:4], g
    return [
        CollectiveCall("all_gather", node0, 1 << 20),
        CollectiveCall("reduce_scatter", both, 3 << 20),
        CollectiveCall("all_reduce", both, 5 << 20),
        CollectiveCall("all_reduce", both, 5 << 20, algo="tree"),
        CollectiveCall("all_reduce", both, 5 << 20, algo="hierarchical"),
        CollectiveCall("all_reduce", both, 1 << 12, protocol="LL"),
        CollectiveCall("broadcast", both, 2 << 20, root=3),
        CollectiveCall("reduce", both, 2 << 20, root=5),
        CollectiveCall("all_to_all", both, 4 << 20),
        CollectiveCall("all_to_all_v", node0, 0, pair_bytes=((0, 9, 1, 0), (5, 0, 7, 3), (1, 1, 0, 1), (8, 0, 2, 0))),
        CollectiveCall("send_recv", (g[1], g[6]), 7 << 20),
        CollectiveCall("send_recv", (g[6], g[1]), 7 << 20, channels=4),
    ]


def test_replayed_calls_match_emitted_calls_with_awkward_entry_deps(env):
    """Random interleaving of calls and compute tasks, with duplicate entry deps, entry deps equal to
    the previous task on the entry's stream, missing entry deps and calls before any stream work."""
    rng = random.Random(7)
    calls = _calls(env)
    seq = [rng.randrange(len(calls)) for _ in range(60)]
    plans = []
    for templates in (None, CallTemplates()):
        b = PlanBuilder(env.gpus)
        r = random.Random(11)
        for j, c in enumerate(seq):
            call = dataclasses.replace(calls[c], name=f"call{j}" if j % 5 else "")
            for _ in range(r.randrange(3)):  # some compute work, on the compute and on the comm stream
                b.add_compute(r.choice(env.gpus), 1e-6, stream=r.choice((0, COMM_STREAM, COMM_STREAM + 1)))
            entry = {}
            for gpu in env.gpus:
                pick = r.random()
                if pick < 0.2 or len(b) == 0:
                    continue  # no entry deps for this GPU
                ids = [r.randrange(len(b)) for _ in range(r.randrange(1, 4))]
                tail = b.stream_tails().get((b.gpu_index(gpu), COMM_STREAM))
                if pick < 0.5 and tail is not None:
                    ids.append(tail)  # repeats the implicit stream dependency
                entry[gpu] = ids + ids[:1]  # and a duplicate
            cat = "tp" if c % 3 else "dp"
            plan_collective(b, call, env, entry, category=cat, priority=3 if c % 2 else 0, templates=templates)
        plans.append(b.build())
        if templates is not None:
            assert templates.stats["replayed"] > 30  # the reuse path really ran
    assert_same_plan(*plans)


def test_templates_serve_one_builder(env):
    t = CallTemplates()
    call = CollectiveCall("all_gather", env.gpus[:4], 1 << 20)
    plan_collective(PlanBuilder(env.gpus), call, env, templates=t)
    with pytest.raises(PlanningError, match="one PlanBuilder"):
        plan_collective(PlanBuilder(env.gpus), call, env, templates=t)


def test_cp_scenarios_have_their_collectives():
    """The CP cases above really lower CP calls: the ring's all-gathers and the Ulysses all-to-alls."""
    for name, op in (("cp_ring", "all_gather"), ("cp_a2a", "all_to_all")):
        _, low = _lower_both(SCENARIOS[name]())
        assert any(k.startswith(f"cp:{op}") for k in low.choices), (name, dict(low.choices))
