"""FP8 as Transformer Engine runs it, and the cross-generation GEMM rule (measured matmul ceilings).

Sources: NVIDIA Transformer Engine, "Using FP8 with Transformer Engine" (only the linear layers' GEMMs in
FP8) and "FP8 Delayed Scaling" (one tensor read per quantization); S. Bekman, ml-engineering, "Maximum
Achievable Matmul FLOPS comparison table" (BF16 / FP8 MAMF of A100, H100, H200, B200).
"""

from __future__ import annotations

import math
from dataclasses import replace

import pytest

from hetero_ns3.compute.attention_grid import attention_occupancy
from hetero_ns3.compute.gpus import get_gpu, gpu_spec_from_table
from hetero_ns3.compute.recipes import FP8_CAST_BYTES_PER_ELEMENT, FP8_LINEAR_GEMMS, cast_elements, is_fp8_linear
from hetero_ns3.compute.roofline import Kernel, Roofline, _wave_factor, default_efficiency
from hetero_ns3.errors import ScenarioError
from hetero_ns3.workload.compiler import CompileSpec, StepPrograms
from hetero_ns3.workload.layers import (
    Compute,
    LayerContext,
    attention_backward,
    attention_forward,
    gemm,
    gemm_bwd,
    mlp_backward,
    mlp_forward,
)
from hetero_ns3.workload.models import get_model
from hetero_ns3.workload.parallel import ParallelismSpec
from hetero_ns3.workload.planner import program_time

H100, A100, B200 = get_gpu("H100-SXM"), get_gpu("A100-SXM-80GB"), get_gpu("B200")
BF16, FP8 = Roofline("bf16"), Roofline("fp8")


def _layer_kernels(model: str = "llama2-7b", tp: int = 1) -> list[Kernel]:
    c = LayerContext(get_model(model), 1, tp, tp > 1, 1, "none")
    steps = [*attention_forward(c), *mlp_forward(c), *mlp_backward(c), *attention_backward(c)]
    return [k for s in steps if isinstance(s, Compute) for k in s.kernels]


def test_only_te_linear_gemms_are_fp8() -> None:
    """A Llama layer's forward and backward: exactly QKV, proj, FC1, FC2 (fwd, dgrad, wgrad) are FP8 GEMMs (the other
    stems of ``FP8_LINEAR_GEMMS`` are multi-latent attention's, the prediction module's and the Mamba-2 mixer's
    projections)."""
    ks = _layer_kernels()
    fp8 = {k.name for k in ks if is_fp8_linear(k)}
    assert fp8 == {f"{g}{sfx}" for g in ("qkv", "proj", "fc1", "fc2") for sfx in ("", ".dgrad", ".wgrad")}
    assert {
        "qkv", "proj", "fc1", "fc2", "q_down", "kv_down", "q_up", "kv_up", "mtp_proj", "in_proj", "out_proj"
    } == FP8_LINEAR_GEMMS  # fmt: skip
    assert all(FP8.kernel_precision(k) == "bf16" for k in ks if k.name not in fp8)
    assert not is_fp8_linear(gemm("logits", 4096, 32000, 4096))  # Megatron's output layer, not TE
    assert not is_fp8_linear(gemm("attn.qk", 4096, 4096, 128, 32))  # unfused attention BMM


def test_attention_and_elementwise_stay_bf16_under_fp8() -> None:
    """Attention FLOPs run at the BF16 peak under fp8 (TE's DotProductAttention is BF16 by default)."""
    for k in _layer_kernels():
        if k.op in ("attention_fwd", "attention_bwd", "memory"):
            assert FP8.kernel_time(k, H100) == BF16.kernel_time(k, H100)
    attn = next(k for k in _layer_kernels() if k.op == "attention_fwd")
    e = default_efficiency(H100)
    seq = attn.m / (attn.m + e.attention_seq_half)
    tiles = math.ceil(attn.m / e.attention_causal_tile)  # causal: diagonal tiles run whole
    work = (tiles + 1) / (2 * tiles) if attn.causal else attn.work
    occ = attention_occupancy(attn.batch, math.ceil(attn.m / e.attention_block_rows), attn.causal, H100.sm_count)
    t = attn.flops * work / (989.4e12 * e.attention_fwd * e.sustained * seq * occ) + e.launch_overhead_s
    assert FP8.kernel_time(attn, H100) == pytest.approx(t, rel=1e-9)


def test_cast_bytes_of_fp8_gemms() -> None:
    """Forward and dgrad GEMMs cast their m x k input (2 B read, 1 B FP8 + 1 B transpose written); wgrad
    reuses those transposes; the cast is memory-bound at the catalog memory efficiency."""
    m, n, k = 4096, 11008, 4096
    fwd = gemm("fc1", m, n, k)
    dgrad, wgrad = gemm_bwd("fc1", m, n, k)
    assert FP8_CAST_BYTES_PER_ELEMENT == 4.0
    assert cast_elements(fwd) == m * k
    assert cast_elements(dgrad) == m * n  # the incoming gradient, m x n
    assert cast_elements(wgrad) == 0
    assert cast_elements(gemm("logits", m, n, k)) == 0
    e = default_efficiency(H100)
    no_cast = FP8.kernel_time(wgrad, H100)  # same FLOPs as fwd, no cast
    t_cast = 4.0 * m * k / (3.35e12 * e.memory) + e.launch_overhead_s
    shape_ratio = FP8._comp_eff(H100, fwd, e, "fp8") / FP8._comp_eff(H100, wgrad, e, "fp8")
    t_fwd_gemm = (no_cast - e.launch_overhead_s) / shape_ratio + e.launch_overhead_s
    assert FP8.kernel_time(fwd, H100) == pytest.approx(t_fwd_gemm + t_cast, rel=1e-9)


@pytest.mark.parametrize(("model", "gpu", "tp"), [("llama2-7b", "H100-SXM", 1), ("llama3-8b", "B200", 1)])
def test_fp8_layer_between_half_and_full_bf16_time(model: str, gpu: str, tp: int) -> None:
    """FP8 helps only the linear GEMMs and adds casts, so a layer's fp8 time lies between half and all of
    its bf16 time (published NeMo FP8 speed-ups over BF16 are ~1.2-1.5x, not 2x)."""
    md = get_model(model)
    plan = ParallelismSpec(tp=tp, global_batch=8)
    t = {}
    for prec in ("bf16", "fp8"):
        progs = StepPrograms(CompileSpec(md, plan, (md.layers,), (8,), Roofline(prec), get_gpu))
        t[prec] = program_time(progs, gpu, ("layer_f", "layer_b"))
    assert t["bf16"] / 2 < t["fp8"] < t["bf16"]
    assert 1.2 < t["bf16"] / t["fp8"] < 1.8


def test_a100_gemm_unchanged_by_mamf_rule() -> None:
    """A100's measured ceiling is the reference, so its GEMM efficiency is exactly the Ampere table's (the
    Megatron SC'21 fit is untouched)."""
    for name in ("A100-SXM-80GB", "A100-SXM-40GB"):
        assert default_efficiency(get_gpu(name)).gemm == 0.85


@pytest.mark.parametrize(
    ("gpu", "prec", "mamf"),
    [
        ("H100-SXM", "bf16", 0.803),
        ("H100-SXM", "fp8", 0.709),
        ("B200", "bf16", 0.776),
        ("B200", "fp8", 0.763),
        ("GB200", "bf16", 0.7288),
        ("GB200", "fp8", 0.7231),
        ("B300", "bf16", 0.7862),
        ("B300", "fp8", 0.7452),
        ("MI300X", "bf16", 0.5415),
        ("MI300X", "fp8", 0.4868),
    ],
)
def test_large_gemm_fraction_follows_measured_ceiling(gpu: str, prec: str, mamf: float) -> None:
    """Microbenchmark level (sustained 1): a large linear GEMM's fraction of the dense peak, relative to the
    same GEMM on A100, equals the ratio of the measured matmul ceilings (MAMF table) within 1%."""
    g = get_gpu(gpu)

    def frac(rf: Roofline, gp) -> float:
        rf._eff[gp.name] = replace(default_efficiency(gp), sustained=1.0, launch_overhead_s=0.0)
        k = gemm("fc1", 8192, 8192, 8192) if rf.precision == "fp8" else gemm("g", 8192, 8192, 8192)
        cast = FP8_CAST_BYTES_PER_ELEMENT * cast_elements(k)
        t = rf.kernel_time(k, gp) - cast / (gp.hbm_bw_Bps * default_efficiency(gp).memory)
        return k.flops / t / gp.peak_flops(rf.precision)

    ours = frac(Roofline(prec), g) / frac(Roofline("bf16"), A100)
    # wave quantization differs between the GPUs' SM counts and tiles; compare with it divided out
    ea, eg = default_efficiency(A100), default_efficiency(g)
    waves = _wave_factor(eg, 8192, 8192, g.sm_count) / _wave_factor(ea, 8192, 8192, A100.sm_count)
    assert ours / waves == pytest.approx(mamf / 0.869, rel=0.01)


def test_mamf_field_errors() -> None:
    base = {
        "architecture": "Hopper",
        "fp16_tflops": 100,
        "hbm_gib": 80,
        "hbm_tbps": 3,
        "tdp_w": 700,
        "sm_count": 100,
        "source": "x",
    }
    with pytest.raises(ScenarioError, match=r"compute\.gpus\.X\.mamf_fp8 \(1\.4\) must be a fraction"):
        gpu_spec_from_table("X", {**base, "mamf_fp8": 1.4}, "compute.gpus.X")
    spec = gpu_spec_from_table("X", {**base, "mamf_bf16": 0.5}, "compute.gpus.X")
    assert default_efficiency(spec).gemm == pytest.approx(0.85 * 0.5 / 0.869)


def test_mamf_values_cite_a_source() -> None:
    from hetero_ns3.compute.gpus import gpu_catalog

    for g in gpu_catalog().values():
        if g.mamf_bf16 is not None or g.mamf_fp8 is not None:
            assert g.mamf_source.startswith("https://")


def test_b300_carries_gb300s_attention() -> None:
    """B300 is GB300's die on the HGX board: its attention constants are GB300's (fitted to GB300's published cuDNN
    times), applied to its own peak; its GEMM ceilings are its own MAMF row, and GB300 keeps the Blackwell rule."""
    b300, gb300 = default_efficiency(get_gpu("B300")), default_efficiency(get_gpu("GB300"))
    for field in ("attention_fwd", "attention_bwd", "attention_seq_half", "attention_causal_tile"):
        assert getattr(b300, field) == getattr(gb300, field), field
    assert b300.memory == gb300.memory == 0.74
    assert gb300.gemm == 0.78 and gb300.gemm_fp8 is None
    assert b300.gemm == pytest.approx(0.85 * 0.7862 / 0.869)
