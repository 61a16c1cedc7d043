"""Shared experts (``model.shared_ffn``, Megatron-Core's ``--moe-shared-expert-intermediate-size``) against the
published size of Qwen1.5-MoE-A2.7B and closed forms (docs/workload.md "Shared experts")."""

from __future__ import annotations

from dataclasses import replace

import pytest

from hetero_ns3.compute.config import ComputeConfig
from hetero_ns3.errors import ScenarioError
from hetero_ns3.scenario.cluster import ClusterSection, NodeGroupSpec, inline_gpus
from hetero_ns3.workload import layers as L
from hetero_ns3.workload.compiler import StepPrograms
from hetero_ns3.workload.memory import layer_activation_bytes, layer_params_per_rank
from hetero_ns3.workload.models import load_model_section, model_catalog
from hetero_ns3.workload.parallel import ParallelismSpec
from hetero_ns3.workload.planner import build_plan, resolve
from hetero_ns3.workload.steps import Comm, Compute

QWEN = model_catalog()["qwen1.5-moe-a2.7b"]
SMALL = replace(QWEN, layers=2, seq_len=1024)
GPUS = inline_gpus(ClusterSection(groups=(NodeGroupSpec("H100-SXM", 1, 8),)))
PLAN = ParallelismSpec(tp=2, pp=1, dp=4, ep=4, sequence_parallel=True, global_batch=8, micro_batch=1)


def test_qwen15_moe_has_its_published_total_and_active_parameters() -> None:
    """Model card: 14.3 B parameters, 2.7 B activated (the shared expert always, 4 of 60 routed, both
    embeddings); without the shared expert it would be 14.2 B / 2.0 B."""
    m = QWEN
    assert m.total_params() == pytest.approx(14.3e9, rel=2e-3)
    per_layer = m.attention_params() + m.top_k * m.mlp_params() + m.shared_params() + m.hidden * m.experts
    active = m.layers * (per_layer + 2 * m.norm_params()) + 2 * m.padded_vocab(1) * m.hidden + m.norm_params()
    assert active == pytest.approx(2.7e9, rel=5e-3)
    assert m.shared_params() == 3 * m.hidden * 5632
    assert replace(m, shared_ffn=0).total_params() == m.total_params() - m.layers * m.shared_params()


def test_shared_expert_flops_are_a_dense_mlp_on_every_token() -> None:
    b, s, h = 2, SMALL.seq_len, SMALL.hidden
    without = replace(SMALL, shared_ffn=0)
    assert SMALL.layer_forward_flops(b) - without.layer_forward_flops(b) == 2 * b * s * h * 5632 * 3


def _program(what: str, model=SMALL, tp: int = 2) -> list[L.Step]:
    plan = replace(PLAN, tp=tp, dp=8 // tp, sequence_parallel=tp > 1)
    return StepPrograms(resolve(model, plan, GPUS, ComputeConfig()).spec).program(what, 0)


def test_the_shared_expert_runs_after_the_combine_with_its_own_tensor_parallel_collectives() -> None:
    fwd = _program("layer_f")
    names = [s.name for s in fwd]
    shared = names.index("moe.shared")
    assert names.index("moe.combine.a2a") < shared < names.index("moe.bda")
    assert names[shared - 1] == "moe.shared.ag" and names[shared + 1] == "moe.shared.rs"
    kernels = next(s for s in fwd if isinstance(s, Compute) and s.name == "moe.shared").kernels
    sf, T, h = 5632 // 2, SMALL.seq_len, SMALL.hidden
    assert [(k.name, k.m, k.n, k.k) for k in kernels if k.op == "gemm"] == [
        ("fc1", T, 2 * sf, h),
        ("fc2", T, h, sf),
    ]
    bwd = _program("layer_b")
    comms = [s.name for s in bwd if isinstance(s, Comm) and s.name.startswith("moe.shared")]
    assert comms == ["moe.shared.ag_grad", "moe.shared.fc1.ag_input", "moe.shared.fc1.rs_grad"]
    plain = [s.name for s in _program("layer_f", replace(SMALL, shared_ffn=0))]
    assert "moe.shared" not in plain and "moe.unpermute" in plain


def test_recomputed_norm_comes_before_the_shared_experts_backward() -> None:
    """With ``layernorm`` recomputation the norm's output is rebuilt before its first use in the backward: the
    shared expert's (it runs last in the forward), else the router's."""
    plan = replace(PLAN, tp=1, dp=8, sequence_parallel=False, recompute="selective", recompute_modules=("layernorm",))

    def where_ln2(model) -> str:
        prog = StepPrograms(resolve(model, plan, GPUS, ComputeConfig()).spec).program("layer_b", 0)
        return next(s.name for s in prog if isinstance(s, Compute) and any(k.name == "ln2" for k in s.kernels))

    assert where_ln2(SMALL) == "moe.bda.bwd"
    assert where_ln2(replace(SMALL, shared_ffn=0)) == "moe.route.bwd"


def test_shared_expert_weights_are_dense_and_its_activations_kept() -> None:
    tp, ep = 2, 4
    with_shared = layer_params_per_rank(SMALL, 0, tp, ep)
    without = layer_params_per_rank(replace(SMALL, shared_ffn=0), 0, tp, ep)
    assert with_shared.dense - without.dense == pytest.approx(3 * SMALL.hidden * 5632 / tp)
    assert with_shared.expert == without.expert
    act = layer_activation_bytes(SMALL, 0, 1, 1, False, "none", True)
    base = layer_activation_bytes(replace(SMALL, shared_ffn=0), 0, 1, 1, False, "none", True)
    assert act - base == pytest.approx((2.0 * 2 * 5632 + 2.0 * 5632) * SMALL.seq_len)
    moe = frozenset(("moe",))
    assert layer_activation_bytes(SMALL, 0, 1, 1, False, "selective", True, modules=moe) == layer_activation_bytes(
        replace(SMALL, shared_ffn=0), 0, 1, 1, False, "selective", True, modules=moe
    )


def test_a_shared_expert_costs_time() -> None:
    plan = replace(PLAN, tp=1, dp=8, sequence_parallel=False)
    t = build_plan(SMALL, plan, GPUS, ComputeConfig()).compute_time
    t0 = build_plan(replace(SMALL, shared_ffn=0), plan, GPUS, ComputeConfig()).compute_time
    assert t > t0


def test_shared_ffn_needs_moe_and_a_size() -> None:
    with pytest.raises(ScenarioError, match=r"model\.shared_ffn.*>= 0"):
        load_model_section({"name": "qwen1.5-moe-a2.7b", "shared_ffn": -1})
    with pytest.raises(ScenarioError, match=r"model\.shared_ffn.*experts > 1"):
        load_model_section({"name": "llama3-8b", "shared_ffn": 1024})
