"""``[compute] attention_kernel = "flash2"``: FlashAttention-2's constants on Hopper, against the published figures."""

from __future__ import annotations

import pytest

from hetero_ns3.compute.gpus import get_gpu
from hetero_ns3.compute.roofline import Roofline, default_efficiency
from hetero_ns3.workload.layers import flash_attention_kernels

H100, A100 = get_gpu("H100-SXM"), get_gpu("A100-SXM-80GB")


def test_flash2_replaces_only_hoppers_attention_constants() -> None:
    auto, fa2 = Roofline("bf16"), Roofline("bf16", attention_kernel="flash2")
    e = fa2.efficiency(H100)
    assert (e.attention_fwd, e.attention_bwd) == (0.43, 0.31)
    assert e.attention_head_factors == () and e.attention_head_tile == 0  # cuDNN-measured, dropped
    base = default_efficiency(H100)
    assert (e.gemm, e.attention_seq_half, e.attention_block_rows) == (
        base.gemm,
        base.attention_seq_half,
        base.attention_block_rows,
    )
    assert auto.efficiency(H100) == base
    assert fa2.efficiency(A100) == auto.efficiency(A100)  # Ampere's constants are FlashAttention-2's already


def _forward_tflops(b: int, s: int, heads: int, causal: bool) -> float:
    """The model's forward rate in the benchmarks' count (causal: half the square), ``sustained`` applied as in
    every attention fit (docs/compute.md "FlashAttention-2 on Hopper")."""
    rf = Roofline("bf16", attention_kernel="flash2")
    (k,) = flash_attention_kernels(b, s, heads, heads, 128, causal, False)
    flops = 4.0 * b * s * s * heads * 128 * (0.5 if causal else 1.0)
    return flops / rf.kernel_time(k, H100) / 1e12


@pytest.mark.parametrize(("causal", "published"), [(True, 335.0), (False, 370.0)])
def test_flash2_forward_against_the_flash_attn_package_on_h100(causal: bool, published: float) -> None:
    """A check the fit never saw: the flash-attn package (what Transformer Engine's FlashAttention backend imports)
    measured by its authors on an H100 80GB SXM5 (FlashAttention-3 paper, arXiv 2407.08608, Fig. 5 / 6: head dim
    128, 16 heads, 16k tokens): 335 (causal) / 370 (no mask) TFLOP/s forward. The model within 7%."""
    assert _forward_tflops(1, 16384, 16, causal) == pytest.approx(published, rel=0.07)


def test_pytorch_benchmark_figures_of_flash2_are_an_outlier() -> None:
    """Not a source since session 24: PyTorch's benchmark of its SDPA FlashAttention-2 on an H100 (pytorch/benchmark
    PR 2296, June 2024: batch 128, 8 heads of 128, no mask) at 4k / 8k / 16k tokens: 298 / 288 / 304 TFLOP/s
    forward, 15-30% under the model, where NVIDIA's and the package authors' figures agree with it."""
    for s, published in ((4096, 298.4), (8192, 287.7), (16384, 304.2)):
        ratio = _forward_tflops(128, s, 8, False) / published
        assert 1.15 < ratio < 1.30, (s, ratio)


def test_flash2_is_slower_than_the_hopper_default_in_a_layer() -> None:
    """The point of the option: FlashAttention-2 runs well under cuDNN's rate on Hopper. NVIDIA's May 2024 H200 table
    (hetero_ns3/data/validation/attention_published.csv) has cuDNN 9.1 1.65-1.9x faster forward than PyTorch's
    FlashAttention-2; the model's cuDNN constants are those of cuDNN 9.19 (faster still), so 1.6-2.5x."""
    (k,) = flash_attention_kernels(1, 8192, 32, 8, 128, True, False)
    t_auto = Roofline("bf16").kernel_time(k, H100)
    t_fa2 = Roofline("bf16", attention_kernel="flash2").kernel_time(k, H100)
    assert 1.6 < t_fa2 / t_auto < 2.5


@pytest.mark.parametrize(("causal", "fwd_published"), [(True, 335.0), (False, 370.0)])
def test_flash2_forward_plus_backward_against_the_flashattention3_paper(causal: bool, fwd_published: float) -> None:
    """The FlashAttention-3 paper (Shah et al. 2024, arXiv 2407.08608, Fig. 5 / 6; H100 80GB SXM5, head dim 128,
    16 heads, 16k tokens) measures FlashAttention-2 at 335 (causal) / 370 (no mask) TFLOP/s forward and 322 TFLOP/s
    backward, the backward counted as 2.5 forwards (258 in this model's count of 2). The constants are fitted to
    NVIDIA's H200 times of PyTorch's copy (0.43 / 0.31, ``sustained`` applied); against this second source a
    training step's forward + backward comes within 8% (7% slow causal, 3% without a mask)."""
    rf = Roofline("bf16", attention_kernel="flash2")
    s, heads, hd = 16384, 16, 128
    fwd_flops = 4.0 * s * s * heads * hd * (0.5 if causal else 1.0)
    published = fwd_flops / (fwd_published * 1e12) + 2 * fwd_flops / (322.0 * 2 / 2.5 * 1e12)
    model = 0.0
    for backward in (False, True):
        for k in flash_attention_kernels(1, s, heads, heads, hd, causal, backward):
            if k.op != "memory":  # the benchmark times the main kernels (its FLOPs are theirs alone)
                model += rf.kernel_time(k, H100)
    assert model / published == pytest.approx(1.0, abs=0.08)
