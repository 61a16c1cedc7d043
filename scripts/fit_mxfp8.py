"""Fit the MXFP8 GEMM rate (``[efficiency.Blackwell] mxfp8_gemm``) on Megatron-Bridge's DGX-B200 Llama 3 8B pair.

    PYTHONPATH=. python scripts/fit_mxfp8.py            # fit and print the residual table
    PYTHONPATH=. python scripts/fit_mxfp8.py --check    # exit 1 if the catalog's value is not the fit (within 0.002)

The 25.11 table runs the same layout, container and recipes with per-tensor current scaling (FP8-CS, 30624
tokens/s/GPU) and with MXFP8 block scaling (FP8-MX, 29521): the two differ only in the scaling recipe. The model
prices the recipes' casts from their bytes (no constant), so the one unknown is how fast the block-scaled GEMMs
run against per-tensor FP8 ones on the same tensor cores; it is fitted so that the simulated step-time ratio
MX / CS of that pair equals the published one (a secant search on the analytic backend, a few seconds a step).
The other three pairs of the same table (GB200 and GB300 8B, B200 405B) are held-out cases of the validation suite,
not used here. docs/compute.md ("MXFP8") gives the table and the kernel measurement it is compared with.
Nothing is edited: the fitted value is printed for the catalog.
"""

from __future__ import annotations

import argparse
from dataclasses import replace

import hetero_ns3.compute.roofline as roofline
from hetero_ns3.compute.roofline import efficiency_table
from hetero_ns3.validation import load_suite, simulate_scenario

CS_CASE = "heldout.mbridge.llama3-8b.b200x8.fp8cs"
MX_CASE = "mbridge.llama3-8b.b200x8.mxfp8"
CHECK_TOL = 0.002


def _step(case_name: str, factor: float | None = None) -> float:
    """Simulated step time (s) of suite case ``case_name``, with every Blackwell GPU's ``mxfp8_gemm`` = ``factor``
    (the catalog's when None)."""
    base, cases = load_suite()
    case = next(c for c in cases if c.name == case_name)
    original = roofline.default_efficiency
    if factor is not None:

        def patched(gpu: roofline.GpuSpec) -> roofline.Efficiency:
            e = original(gpu)
            return replace(e, mxfp8_gemm=factor) if gpu.architecture == "Blackwell" else e

        roofline.default_efficiency = patched
    try:
        return simulate_scenario(base / case.scenario, case.overrides)["step_time_s"]
    finally:
        roofline.default_efficiency = original


def published_steps() -> tuple[float, float]:
    """Published (FP8-CS, FP8-MX) step times (s) of the calibration pair, from the suite."""
    _, cases = load_suite()
    pub = {c.name: c.published for c in cases}
    return pub[CS_CASE], pub[MX_CASE]


def fit(target: float, cs_step: float, x0: float = 0.8, x1: float = 1.0, tol: float = 1e-5) -> tuple[float, float]:
    """``(mxfp8_gemm, simulated MX step s)`` with simulated MX / ``cs_step`` = ``target`` (secant on the step
    time, which is close to ``a + b / x`` in the factor: the GEMMs' share scales with 1 / x)."""
    f0 = _step(MX_CASE, x0) / cs_step - target
    f1 = _step(MX_CASE, x1) / cs_step - target
    for _ in range(12):
        # secant in 1 / x, where the step is nearly linear
        u0, u1 = 1 / x0, 1 / x1
        u2 = u1 - f1 * (u1 - u0) / (f1 - f0)
        x0, f0, x1 = x1, f1, 1 / u2
        f1 = _step(MX_CASE, x1) / cs_step - target
        if abs(f1) < tol:
            break
    return x1, (f1 + target) * cs_step


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument(
        "--check", action="store_true", help=f"exit 1 if the catalog's value is off the fit by > {CHECK_TOL}"
    )
    args = ap.parse_args(argv)
    cs_pub, mx_pub = published_steps()
    target = mx_pub / cs_pub
    cs = _step(CS_CASE)
    x, mx = fit(target, cs)
    shipped = float(efficiency_table("Blackwell").get("mxfp8_gemm", 0.0))
    mx_shipped = _step(MX_CASE)
    print("| quantity | published | model (fit) | model (catalog) |")
    print("|---|---|---|---|")
    print(f"| FP8-CS step, s | {cs_pub:.3f} | {cs:.4f} | {cs:.4f} |")
    print(f"| FP8-MX step, s | {mx_pub:.3f} | {mx:.4f} | {mx_shipped:.4f} |")
    print(f"| MX / CS | {target:.4f} | {mx / cs:.4f} | {mx_shipped / cs:.4f} |")
    print(f"| mxfp8_gemm | | {x:.4f} | {shipped:.4f} |")
    if args.check and abs(x - shipped) > CHECK_TOL:
        print(f"catalog mxfp8_gemm {shipped} is not the fit {x:.4f} (tolerance {CHECK_TOL})")
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
