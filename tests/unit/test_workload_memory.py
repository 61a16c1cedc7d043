"""Per-GPU memory estimate: GPT-3 175B by hand, published closed forms, overflow errors."""

from __future__ import annotations

import pytest

from hetero_ns3.compute.config import ComputeConfig
from hetero_ns3.compute.recipes import RECIPES
from hetero_ns3.errors import PlanningError
from hetero_ns3.scenario.cluster import ClusterSection, NodeGroupSpec, inline_gpus
from hetero_ns3.workload.memory import layer_activation_bytes
from hetero_ns3.workload.models import get_model
from hetero_ns3.workload.parallel import ParallelismSpec
from hetero_ns3.workload.planner import build_plan, resolve

GPT3 = get_model("gpt3-175b")


def _cluster(gpu: str, nodes: int):
    return inline_gpus(ClusterSection(groups=(NodeGroupSpec(gpu, nodes, 8),)))


def _gpt3_plan(**kw) -> ParallelismSpec:
    """Narayanan et al. SC'21 Table 1 row for GPT-3 175B: t=8, p=16, 1024 GPUs (d=8), B=1536, b=1."""
    base = {
        "tp": 8,
        "pp": 16,
        "global_batch": 1536,
        "micro_batch": 1,
        "sequence_parallel": True,
        "recompute": "selective",
        "zero_stage": 1,
        "partition": "uniform",
    }
    base.update(kw)
    return ParallelismSpec(**base)


def test_gpt3_175b_first_stage_by_hand() -> None:
    """Stage 0 of GPT-3 175B (t=8, p=16, d=8, SP + selective recomputation, distributed optimizer).

    Per layer on one rank: (12 h^2 + 7 h) / 8 sharded weights and biases + 6 h replicated (two
    layernorms 4h, two row-parallel biases 2h) = (1,811,939,328 + 86,016) / 8 + 73,728 = 226,576,896.
    6 layers: 1,359,461,376. Embedding: 51200 x 12288 / 8 = 78,643,200 + positions 2048 x 12288 =
    25,165,824. Total 1,463,270,400 parameters x (6 + 12/8) bytes = 10,974,528,000 bytes.
    Activations: 16 microbatches in flight x 6 layers x 34 s b h / t = 96 x 106,954,752 = 10,267,656,192.
    """
    r = resolve(GPT3, _gpt3_plan(), _cluster("A100-SXM-80GB", 128), ComputeConfig(memory_reserve=0))
    m = r.memory[0]
    assert m.stage == 0 and r.spec.stage_layers[0] == 6
    assert m.params == pytest.approx(1_463_270_400, rel=1e-9)
    assert m.weights + m.gradients + m.optimizer == pytest.approx(10_974_528_000, rel=1e-9)
    assert m.activations == pytest.approx(10_267_656_192, rel=1e-9)
    assert m.total == pytest.approx(21_242_184_192, rel=1e-9)
    assert m.fits


def test_first_stage_activations_match_korthikanti() -> None:
    """Korthikanti et al. 2022: with 1F1B the first stage holds s b h L (34 + 5 a s / h) / t bytes, whatever p."""
    s, b, h, a, L, t = 2048, 1, 12288, 96, 96, 8
    cfg = ComputeConfig(memory_reserve=0, flash_attention=False)
    for pp in (8, 16):
        r = resolve(GPT3, _gpt3_plan(pp=pp, recompute="none"), _cluster("A100-SXM-80GB", 128), cfg)
        assert r.memory[0].activations == pytest.approx(s * b * h * L * (34 + 5 * a * s / h) / t, rel=1e-9)
    # without sequence parallelism: s b h (10 + 24/t + 5 a s / (h t)) per layer
    per_layer = layer_activation_bytes(GPT3, 0, 1, 8, False, "none", flash=False)
    assert per_layer == pytest.approx(s * b * h * (10 + 24 / t + 5 * a * s / (h * t)))
    assert layer_activation_bytes(GPT3, 0, 1, 8, True, "full", flash=True) == pytest.approx(2 * s * b * h / t)


def test_megatron_bytes_per_parameter() -> None:
    """Megatron-LM distributed-optimizer docs: 18 bytes/param, 6 + 12/d with the distributed optimizer."""
    gpus = _cluster("H100-SXM", 2)
    model = get_model("gpt3-1.3b")
    for zero, per_param in ((0, 18.0), (1, 6 + 12 / 4), (2, 2 + 16 / 4)):
        r = resolve(model, ParallelismSpec(tp=2, pp=2, global_batch=16, zero_stage=zero), gpus)
        m = r.memory[0]
        assert (m.weights + m.gradients + m.optimizer) / m.params == pytest.approx(per_param)


def test_bf16_gradient_reduction_bytes_per_parameter() -> None:
    """Same table, "fp16 param, fp16 grads" row: 20 bytes/param, 4 + 16/d distributed (2-byte gradient buffer,
    fp32 copy of the gradient shard in the optimizer); zero_stage 2 shards both: 2 + 18/d."""
    gpus = _cluster("H100-SXM", 2)
    model = get_model("gpt3-1.3b")
    for zero, per_param in ((0, 20.0), (1, 4 + 16 / 4), (2, 2 + 18 / 4)):
        plan = ParallelismSpec(tp=2, pp=2, global_batch=16, zero_stage=zero, grad_reduce_dtype="bf16")
        m = resolve(model, plan, gpus).memory[0]
        assert (m.weights + m.gradients + m.optimizer) / m.params == pytest.approx(per_param)
        assert m.gradients / m.params == pytest.approx(2.0 / (4 if zero == 2 else 1))


def test_overflow_fails_naming_gpu() -> None:
    with pytest.raises(PlanningError, match=r"GPU n0\.g0 \(A100-SXM-40GB, stage 0.*HBM.*zero_stage"):
        build_plan(GPT3, ParallelismSpec(tp=8, pp=2, global_batch=16), _cluster("A100-SXM-40GB", 2))


def test_heterogeneous_memory_uses_each_gpu_capacity() -> None:
    gpus = inline_gpus(ClusterSection(groups=(NodeGroupSpec("H100-SXM", 1, 8), NodeGroupSpec("L40S", 1, 8))))
    r = resolve(get_model("llama2-13b"), ParallelismSpec(tp=8, pp=2, global_batch=16), gpus)
    caps = {m.gpu_type: m.capacity for m in r.memory}
    assert caps["L40S"] == 48 * 2**30 and caps["H100-SXM"] == 80 * 2**30


def test_fp8_activations_keep_linear_inputs_in_one_byte() -> None:
    """Transformer Engine's FP8 linears save their quantized inputs (1 byte) for the weight gradient: per layer and
    token, the QKV and fc1 inputs lose 1 byte x h each, the fc2 input 1 byte x f, and the projection's input gains
    an FP8 copy beside attention's BF16 output (+1 byte x h / t); Llama 3 405B, TP 4 with SP, one token."""
    model = get_model("llama3-405b")
    h, f, t = model.hidden, model.ffn_hidden, 4
    bf16 = layer_activation_bytes(model, 0, 1, t, True, "none", True)
    fp8 = layer_activation_bytes(model, 0, 1, t, True, "none", True, lin_bytes=RECIPES["current"].saved_bytes)
    s = model.seq_len
    assert (bf16 - fp8) / s == pytest.approx(2 * h / t + f / t - h / t)
    assert layer_activation_bytes(model, 0, 1, t, True, "full", True, lin_bytes=1.0) == pytest.approx(2 * s * h / t)
    # NVFP4 keeps 0.5 + 1/16 bytes per element (E2M1 values and their E4M3 block scales) of the same inputs
    fp4 = layer_activation_bytes(model, 0, 1, t, True, "none", True, lin_bytes=RECIPES["nvfp4"].saved_bytes)
    assert (bf16 - fp4) / s == pytest.approx(1.4375 * (2 * h / t + f / t) - 0.5625 * h / t)


def test_saved_element_bytes_must_be_bytes() -> None:
    """The old ``fp8`` flag passed where bytes per saved element are expected is refused, not read as 0 or 1 byte."""
    model = get_model("llama3-8b")
    for bad in (True, False, 0.0, 4.0):
        with pytest.raises(ValueError, match="lin_bytes"):
            layer_activation_bytes(model, 0, 1, 1, False, "none", True, 1, bad)
