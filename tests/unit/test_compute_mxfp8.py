"""MXFP8 (1 x 32 block-scaled FP8, ``[compute] fp8_recipe = "mxfp8"``): cast bytes, the block-scaled GEMM rate, the
architectures that refuse it, and the fit of its one constant (docs/compute.md "MXFP8")."""

from __future__ import annotations

import runpy
from pathlib import Path

import pytest

from hetero_ns3.cli.main import main
from hetero_ns3.compute.gpus import get_gpu
from hetero_ns3.compute.recipes import FP8_CAST_BYTES_PER_ELEMENT, MXFP8_SCALE_BYTES_PER_ELEMENT
from hetero_ns3.compute.roofline import Roofline, efficiency_table
from hetero_ns3.errors import PlanningError
from hetero_ns3.workload.steps import benchmark_gemm, gemm

ROOT = Path(__file__).resolve().parents[2]
B200 = get_gpu("B200")


def test_mxfp8_cast_writes_scales_without_an_amax_pass() -> None:
    """A forward / dgrad GEMM's cast under MXFP8 moves 4 + 2/32 bytes per element in one pass (row- and column-wise
    FP8 copies and their E8M0 scales), against delayed scaling's 4 in one pass and current scaling's 6 in two."""
    m, n, k = 16384, 14336, 4096
    elements = m * k
    per_element = {
        "delayed": (FP8_CAST_BYTES_PER_ELEMENT, 1),
        "current": (FP8_CAST_BYTES_PER_ELEMENT + 2.0, 2),
        "mxfp8": (FP8_CAST_BYTES_PER_ELEMENT + MXFP8_SCALE_BYTES_PER_ELEMENT, 1),
    }
    assert MXFP8_SCALE_BYTES_PER_ELEMENT * 32 == 2
    for recipe, (nbytes, launches) in per_element.items():
        rf = Roofline("fp8", fp8_recipe=recipe)
        e = rf.efficiency(B200)
        # the cast: the forward GEMM less the same product named as a wgrad, which casts nothing
        cast = rf.kernel_time(gemm("fc1", m, n, k), B200) - rf.kernel_time(gemm("fc1.wgrad", m, n, k), B200)
        expected = elements * nbytes / (B200.hbm_bw_Bps * e.memory) + launches * e.launch_overhead_s
        assert cast == pytest.approx(expected, rel=1e-6), recipe


def test_block_scaled_gemm_runs_at_the_fitted_fraction_of_per_tensor_fp8() -> None:
    """A compute-bound FP8 GEMM under MXFP8 takes 1 / mxfp8_gemm of its per-tensor time (less the launch); BF16
    kernels and BF16 runs do not change with the recipe."""
    factor = float(efficiency_table("Blackwell")["mxfp8_gemm"])
    assert 0.8 < factor < 1.0
    mx, cs = Roofline("fp8", fp8_recipe="mxfp8"), Roofline("fp8", fp8_recipe="current")
    launch = cs.efficiency(B200).launch_overhead_s
    k = gemm("fc2.wgrad", 4096, 4096, 16384)
    assert (mx.kernel_time(k, B200) - launch) == pytest.approx((cs.kernel_time(k, B200) - launch) / factor, rel=1e-6)
    logits = gemm("logits", 8192, 128256, 4096)
    assert mx.kernel_time(logits, B200) == cs.kernel_time(logits, B200)
    bf16 = gemm("fc1", 8192, 14336, 4096)
    assert Roofline("bf16", fp8_recipe="mxfp8").kernel_time(bf16, B200) == Roofline("bf16").kernel_time(bf16, B200)


@pytest.mark.parametrize("gpu", ["GB200", "GB300", "B300", "RTX-PRO-6000"])
def test_every_blackwell_gpu_takes_the_recipe(gpu: str) -> None:
    assert Roofline("fp8", fp8_recipe="mxfp8").efficiency(get_gpu(gpu)).mxfp8_gemm == pytest.approx(
        float(efficiency_table("Blackwell")["mxfp8_gemm"])
    )


@pytest.mark.parametrize("gpu", ["H100-SXM", "H200-SXM", "MI300X"])
def test_gpus_without_block_scaled_tensor_cores_refuse_mxfp8(gpu: str) -> None:
    with pytest.raises(PlanningError, match=rf"fp8_recipe \('mxfp8'\): GPU {gpu} .*'current' or 'delayed'"):
        Roofline("fp8", fp8_recipe="mxfp8").kernel_time(gemm("fc1", 4096, 4096, 4096), get_gpu(gpu))


def test_mxfp8_on_hopper_exits_2_naming_the_field(capsys) -> None:
    scenario = ROOT / "hetero_ns3" / "data" / "validation" / "heldout" / "llama2-7b-h100x8.toml"
    assert main(["plan", str(scenario), "--set", "compute.fp8_recipe=mxfp8"]) == 2
    err = capsys.readouterr().err
    assert "compute.fp8_recipe" in err and "H100-SXM" in err and "'current'" in err and "Traceback" not in err


def test_fit_reproduces_the_catalog_value(capsys) -> None:
    """scripts/fit_block_scaled.py mxfp8 --check: the DGX-B200 pair's published MX / CS ratio gives the catalog's constant."""
    mod = runpy.run_path(str(ROOT / "scripts" / "fit_block_scaled.py"))
    assert mod["main"](["mxfp8", "--check"]) == 0
    out = capsys.readouterr().out
    ratio = next(line for line in out.splitlines() if line.startswith("| MX / CS"))
    published, fitted, catalog = (float(c) for c in ratio.strip("|").split("|")[1:])
    assert fitted == pytest.approx(published, abs=2e-4) and catalog == pytest.approx(published, abs=1e-3)


# cuBLAS MXFP8 GEMMs (torch._scaled_mm, two K-major FP8 operands with 1 x 32 E8M0 scales, FP32 output) on one B200 at
# 1000 W, CUDA 13.0, as published in D. Vega-Myhre, "MXFP8 GEMM: Up to 99% of cuBLAS performance using CUDA + PTX"
# (March 2026), https://github.com/danielvegamyhre/danielvegamyhre.github.io/blob/00bbb7daaf138eb7a424345040085606d3b5b48b/docs/_posts/2026-03-21-mxfp8-gemm.md
CUBLAS_MXFP8_B200_TFLOPS = {4096: 2538.40, 8192: 2691.93}


@pytest.mark.parametrize(("size", "measured"), sorted(CUBLAS_MXFP8_B200_TFLOPS.items()))
def test_fitted_rate_against_a_published_block_scaled_kernel(size: int, measured: float) -> None:
    """The factor was fitted on training steps, not kernels; a published cuBLAS MXFP8 measurement checks it: the
    roofline's burst rate (``sustained`` 1, no launch) of a square MXFP8 GEMM on B200 lies within 10% of it, where
    the per-tensor FP8 rate would be 18-21% above it."""
    k = benchmark_gemm(size, size, size, "fp8")
    rate = {
        r: 2 * size**3 / Roofline("fp8", fp8_recipe=r, sustained=1.0, launch_overhead_s=0.0).kernel_time(k, B200) / 1e12
        for r in ("current", "mxfp8")
    }
    assert rate["mxfp8"] == pytest.approx(measured, rel=0.10)
    assert rate["current"] / measured > 1.15
