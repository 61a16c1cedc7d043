"""``recompute = "op"``: torchtitan's per-operator selective checkpoint (``selective_ac_option = "op"``): what the
backward re-runs and what the layer keeps, with BF16 and with FP8 linears (docs/workload.md "Per-operator
recomputation")."""

from __future__ import annotations

from dataclasses import replace

import pytest

from hetero_ns3.compute.config import ComputeConfig
from hetero_ns3.errors import ScenarioError
from hetero_ns3.scenario.cluster import ClusterSection, NodeGroupSpec, inline_gpus
from hetero_ns3.workload import layers as L
from hetero_ns3.workload.compiler import layer_context
from hetero_ns3.workload.memory import layer_activation_bytes
from hetero_ns3.workload.models import get_model
from hetero_ns3.workload.parallel import ParallelismSpec
from hetero_ns3.workload.planner import build_plan
from hetero_ns3.workload.timing import replay

M = get_model("llama3-8b")
OP = ParallelismSpec(tp=1, pp=1, dp=4, global_batch=8, micro_batch=2, recompute="op", zero_stage=3)
T = OP.micro_batch * M.seq_len


def _rerun(quantized: bool) -> list:
    return [k for st in L.op_recomputed(layer_context(M, OP, True, "fused", quantized), 0) for k in st.kernels]


def _gemm_flops(kernels: list) -> float:
    return sum(k.flops for k in kernels if k.op == "gemm")


def test_bf16_reruns_every_second_matmul_and_fp8_every_linear() -> None:
    """BF16: of q, k, v, o, w1, w3, w2 the even ones (k, o, w3), 2 T h (kv + q + f) FLOPs; FP8 (torchao's
    ``_scaled_mm`` is not ``aten.mm``): every linear, 2 T h (2 q + 2 kv + 3 f). Neither re-runs the attention core;
    both re-run the norms, the rotary embedding, the activation and the residual adds."""
    h, q, kv, f = M.hidden, M.q_dim, M.kv_dim, M.ffn_hidden
    bf16, fp8 = _rerun(False), _rerun(True)
    assert _gemm_flops(bf16) == pytest.approx(2.0 * T * h * (kv + q + f), rel=1e-12)
    assert _gemm_flops(fp8) == pytest.approx(2.0 * T * h * (2 * q + 2 * kv + 3 * f), rel=1e-12)
    core = {k.name for k in L.attention_core(layer_context(M, OP, True, "fused"), False)}
    others = {"ln1", "rope", "bda1", "ln2", "act", "bda2"}
    for kernels in (bf16, fp8):
        names = {k.name for k in kernels}
        assert not names & core and others <= names


def test_the_layer_keeps_its_input_the_attention_output_and_the_saved_matmuls() -> None:
    """Per layer and micro-batch: the BF16 input, the attention output and its FP32 log-sum-exp per head, and with
    BF16 linears the q, v, w1 and w2 outputs; against full recomputation's input alone and no recomputation."""
    s, h, q, kv, f = T, M.hidden, M.q_dim, M.kv_dim, M.ffn_hidden
    fp8 = layer_activation_bytes(M, 0, OP.micro_batch, 1, False, "op", True, 1, 1.0)
    bf16 = layer_activation_bytes(M, 0, OP.micro_batch, 1, False, "op", True, 1, 2.0)
    assert fp8 == pytest.approx(s * (2 * h + 2 * q + 4 * M.heads), rel=1e-12)
    assert bf16 - fp8 == pytest.approx(s * 2 * (q + kv + f + h), rel=1e-12)
    full = layer_activation_bytes(M, 0, OP.micro_batch, 1, False, "full", True, 1, 2.0)
    none = layer_activation_bytes(M, 0, OP.micro_batch, 1, False, "none", True, 1, 2.0)
    assert full < fp8 < bf16 < none


def test_a_step_with_op_recomputation_lies_between_none_and_full() -> None:
    """On 4 H200 with FSDP the re-run GEMMs cost what they cost: none < op (BF16) < full, and under FP8 the op
    policy re-runs every linear, as much GEMM work as full recomputation less the attention core."""
    gpus = inline_gpus(ClusterSection(groups=(NodeGroupSpec("H200-SXM", 1, 4),)))
    small = replace(M, layers=4)

    def step(recompute: str, compute: ComputeConfig) -> float:
        r = build_plan(small, replace(OP, recompute=recompute), gpus, replace(compute, check_memory=False))
        return replay(r.workload).iteration_time

    bf16 = ComputeConfig()
    none, op, full = (step(x, bf16) for x in ("none", "op", "full"))
    assert none < op < full
    fp8 = ComputeConfig(precision="fp8", fp8_recipe="current")
    assert step("none", fp8) < step("op", fp8) < step("full", fp8)


@pytest.mark.parametrize(("field", "value"), [("tp", 2), ("cp", 2)])
def test_refused_outside_what_it_models(field: str, value: int) -> None:
    with pytest.raises(ScenarioError, match=rf"parallelism\.recompute.*'op'.*parallelism\.{field} = 1"):
        replace(OP, **{field: value}).validate()
    gpus = inline_gpus(ClusterSection(groups=(NodeGroupSpec("H100-SXM", 1, 8),)))
    with pytest.raises(ScenarioError, match=r"parallelism\.recompute.*dense layers only"):
        build_plan(get_model("qwen3-30b-a3b"), replace(OP, dp=8, global_batch=8, micro_batch=1), gpus, ComputeConfig())
    with pytest.raises(ScenarioError, match=r"parallelism\.recompute.*without biases only"):
        build_plan(get_model("gpt3-125m"), replace(OP, dp=8, global_batch=8, micro_batch=1), gpus, ComputeConfig())
