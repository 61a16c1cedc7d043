"""Quantization of grouped expert GEMMs' inputs, expert by expert: Transformer Engine's ``split_quantize`` (TE
2.8-2.17) has a fused multi-tensor cast for delayed scaling only (and a fused split quantize for NVFP4); current
scaling launches zero-amax, amax, scale and cast kernels per expert, MXFP8 one cast per expert
(docs/compute.md "FP8", "Grouped expert GEMMs"). Kernel times against the hand count, the layer and host
consequences, and what stays unchanged."""

from __future__ import annotations

from dataclasses import replace

import pytest

from hetero_ns3.compute.config import ComputeConfig
from hetero_ns3.compute.gpus import get_gpu
from hetero_ns3.compute.recipes import (
    CURRENT_SCALING_LAUNCHES_PER_TENSOR,
    FP8_AMAX_BYTES_PER_ELEMENT,
    FP8_CAST_BYTES_PER_ELEMENT,
    RECIPES,
)
from hetero_ns3.compute.roofline import Roofline
from hetero_ns3.workload import layers as L
from hetero_ns3.workload.compiler import layer_context
from hetero_ns3.workload.host import HostModel
from hetero_ns3.workload.models import get_model
from hetero_ns3.workload.parallel import ParallelismSpec
from hetero_ns3.workload.steps import gemm

H100, B200 = get_gpu("H100-SXM"), get_gpu("B200")
EXPERTS = 8
ROWS, HID, FFN = 4096, 2048, 1536  # rows per expert, Qwen3-30B-A3B's hidden size and gated FC1 width


def _grouped(name: str = "fc1", batch: int = EXPERTS):
    return gemm(name, ROWS, FFN, HID, batch=batch)


def _cast_time(r: Roofline, gpu, batch: int = EXPERTS) -> float:
    """Seconds the recipe's casts add to a grouped FC1 GEMM: its time minus that of the same product named as a
    weight gradient (which casts nothing)."""
    return r.kernel_time(_grouped(batch=batch), gpu) - r.kernel_time(_grouped("fc1.wgrad", batch), gpu)


@pytest.mark.parametrize(
    ("recipe", "gpu", "per_tensor_bytes", "launches"),
    [
        ("delayed", H100, FP8_CAST_BYTES_PER_ELEMENT, 1),  # one fused multi-tensor cast-transpose
        ("current", H100, FP8_CAST_BYTES_PER_ELEMENT + FP8_AMAX_BYTES_PER_ELEMENT, 4 * EXPERTS),
        ("mxfp8", B200, FP8_CAST_BYTES_PER_ELEMENT + 2.0 / 32, EXPERTS),
    ],
)
def test_grouped_cast_bytes_and_launches(recipe: str, gpu, per_tensor_bytes: float, launches: int) -> None:
    """Over 8 experts the casts move the bytes of one tensor of all the rows; delayed scaling launches one fused
    kernel, current scaling zero-amax, amax, scale and cast per expert (32), MXFP8 one cast per expert (8)."""
    r = Roofline("fp8", fp8_recipe=recipe)
    e = r.efficiency(gpu)
    bw = gpu.hbm_bw_Bps * e.memory
    assert _cast_time(r, gpu) == pytest.approx(
        per_tensor_bytes * ROWS * HID * EXPERTS / bw + launches * e.launch_overhead_s, rel=1e-9
    )
    assert CURRENT_SCALING_LAUNCHES_PER_TENSOR == 4
    assert RECIPES["nvfp4"].grouped_cast_launches(EXPERTS) == 0  # fused split quantize


def test_one_expert_keeps_the_single_tensor_charge() -> None:
    """One expert (as a dense GEMM) keeps current scaling's amax pass and cast, 2 launches, and MXFP8's one cast;
    BF16 runs have no casts."""
    for recipe, gpu, launches in (("current", H100, 2), ("mxfp8", B200, 1)):
        r = Roofline("fp8", fp8_recipe=recipe)
        e = r.efficiency(gpu)
        per_tensor = RECIPES[recipe].cast_bytes + RECIPES[recipe].amax_bytes
        assert _cast_time(r, gpu, batch=1) == pytest.approx(
            per_tensor * ROWS * HID / (gpu.hbm_bw_Bps * e.memory) + launches * e.launch_overhead_s, rel=1e-9
        )
    assert _cast_time(Roofline("bf16", fp8_recipe="current"), H100) == 0.0


def test_qwen3_moe_layer_pays_the_expert_launches() -> None:
    """A Qwen3-30B-A3B layer at EP 16 (8 local experts), forward + backward on one H100: current scaling minus
    delayed scaling equals, summed over its FP8 GEMMs, the amax passes plus one launch per dense cast and 4 x 8 - 1
    per grouped cast (FC1 and FC2 forward, their dgrads)."""
    model = replace(get_model("qwen3-30b-a3b"), layers=1, seq_len=4096)
    p = ParallelismSpec(tp=1, pp=1, dp=16, ep=16, global_batch=16, micro_batch=1)
    c = layer_context(model, p, True, "te", quantized_linears=True)
    kernels = [k for st in (*L.layer_forward(c, 0), *L.layer_backward(c, 0)) for k in getattr(st, "kernels", ())]
    delayed, current = Roofline("fp8"), Roofline("fp8", fp8_recipe="current")
    e = delayed.efficiency(H100)
    bw = H100.hbm_bw_Bps * e.memory
    diff = sum(current.kernel_time(k, H100) - delayed.kernel_time(k, H100) for k in kernels)
    amax = launches = 0.0
    grouped_casts = 0
    for k in kernels:
        if k.op != "gemm" or k.name.endswith(".wgrad") or k.name.split(".")[0] not in ("qkv", "proj", "fc1", "fc2"):
            continue
        amax += FP8_AMAX_BYTES_PER_ELEMENT * k.m * k.k * k.batch / bw
        launches += (4 * k.batch - 1) if k.batch > 1 else 1
        grouped_casts += k.batch > 1
    assert grouped_casts == 4 and {k.batch for k in kernels if k.name == "fc1"} == {8}
    assert diff == pytest.approx(amax + launches * e.launch_overhead_s, rel=1e-9)
    assert FP8_CAST_BYTES_PER_ELEMENT == 4.0


def test_host_issues_the_per_expert_casts() -> None:
    """With the host model on, a grouped FP8 forward GEMM over 8 experts costs 7 further GEMM launches plus 32
    quantization launches under current scaling, 7 under delayed scaling; a weight gradient casts nothing."""
    op, launch = 10e-6, 2e-6
    cur = HostModel(op_s=op, launch_s=launch, expert_cast_launches=RECIPES["current"].expert_cast_launches)
    dly = HostModel(op_s=op, launch_s=launch)
    k, wgrad = _grouped(), gemm("fc1.wgrad", HID, FFN, ROWS, batch=EXPERTS)
    assert cur.step_s("moe.experts", (k,)) == pytest.approx(op + (7 + 32) * launch)
    assert dly.step_s("moe.experts", (k,)) == pytest.approx(op + 7 * launch)
    assert cur.step_s("moe.experts.bwd", (wgrad,)) == pytest.approx(op + 7 * launch)
    cfg = ComputeConfig(precision="fp8", fp8_recipe="current", host_op=10e-6, host_launch=2e-6)
    assert cfg.host_model().expert_cast_launches == 4
    assert ComputeConfig(precision="bf16", fp8_recipe="current").host_model().expert_cast_launches == 0
