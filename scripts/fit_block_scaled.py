"""Fit a block-scaled recipe's GEMM constant on a published pair of Megatron-Bridge steps.

    PYTHONPATH=. python scripts/fit_block_scaled.py mxfp8            # fit [efficiency.Blackwell] mxfp8_gemm
    PYTHONPATH=. python scripts/fit_block_scaled.py nvfp4            # fit [efficiency.Blackwell] nvfp4_gemm
    PYTHONPATH=. python scripts/fit_block_scaled.py RECIPE --check   # exit 1 if the catalog's value is not the fit

Each recipe's pair runs the same layout, container and settings with two precision recipes, so the step-time ratio
isolates the recipe. The model prices the recipes' casts from their bytes (no constant), so the one unknown is how
fast the recipe's GEMMs run on the same tensor cores; it is fitted so that the simulated step-time ratio of the pair
equals the published one (a secant search on the analytic backend through the validation suite's two cases):

* ``mxfp8``: the 25.11 table's DGX-B200 Llama 3 8B pair, FP8-CS 30624 against FP8-MX 29521 tokens/s/GPU (a few
  seconds a step; the fit takes ~10 s).
* ``nvfp4``: the 26.04.01 table's Llama 3 70B pair on 64 GB200 (TP 2, PP 4, VP 5), MXFP8 3712 against NVFP4 4864
  tokens/s/GPU (~20 s a step; the fit takes ~2-3 min).

The other pairs of those tables are held-out cases of the validation suite, not used here. docs/compute.md ("MXFP8",
"NVFP4") gives the tables and the kernel measurements each constant is compared with. Nothing is edited: the fitted
value is printed for the catalog.
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass, replace

import hetero_ns3.compute.roofline as roofline
from hetero_ns3.compute.roofline import efficiency_table
from hetero_ns3.validation import load_suite, simulate_scenario

CHECK_TOL = 0.002


@dataclass(frozen=True)
class Pair:
    """A published pair of one layout under two recipes, and the constant it fits."""

    factor: str  # the [efficiency.Blackwell] constant
    ref_case: str  # the suite case of the reference recipe
    case: str  # the suite case of the fitted recipe
    labels: tuple[str, str, str]  # reference step, fitted step, ratio (row labels of the printed table)
    x0: float = 0.8  # the secant's two starting values
    x1: float = 1.0


PAIRS = {
    "mxfp8": Pair(
        "mxfp8_gemm",
        "heldout.mbridge.llama3-8b.b200x8.fp8cs",
        "mbridge.llama3-8b.b200x8.mxfp8",
        ("FP8-CS", "FP8-MX", "MX / CS"),
    ),
    "nvfp4": Pair(
        "nvfp4_gemm",
        "heldout.mbridge.llama3-70b.gb200x64.mxfp8",
        "mbridge.llama3-70b.gb200x64.nvfp4",
        ("MXFP8", "NVFP4", "NV / MX"),
        0.5,
        0.7,
    ),
}


def step(case_name: str, factor_name: str = "", factor: float | None = None) -> float:
    """Simulated step time (s) of suite case ``case_name``, with every Blackwell GPU's ``factor_name`` = ``factor``
    (the catalog's when None)."""
    base, cases = load_suite()
    case = next(c for c in cases if c.name == case_name)
    original = roofline.default_efficiency
    if factor is not None:

        def patched(gpu: roofline.GpuSpec) -> roofline.Efficiency:
            e = original(gpu)
            return replace(e, **{factor_name: factor}) if gpu.architecture == "Blackwell" else e

        roofline.default_efficiency = patched
    try:
        return simulate_scenario(base / case.scenario, case.overrides)["step_time_s"]
    finally:
        roofline.default_efficiency = original


def published_steps(pair: Pair) -> tuple[float, float]:
    """Published (reference, fitted-recipe) step times (s) of ``pair``, from the suite."""
    _, cases = load_suite()
    pub = {c.name: c.published for c in cases}
    return pub[pair.ref_case], pub[pair.case]


def fit(pair: Pair, target: float, ref_step: float, tol: float = 1e-5) -> tuple[float, float]:
    """``(factor, simulated step s)`` with simulated step / ``ref_step`` = ``target`` (secant on the step time, which
    is close to ``a + b / x`` in the factor: the GEMMs' share scales with 1 / x)."""
    x0, x1 = pair.x0, pair.x1
    f0 = step(pair.case, pair.factor, x0) / ref_step - target
    f1 = step(pair.case, pair.factor, x1) / ref_step - target
    for _ in range(12):
        # secant in 1 / x, where the step is nearly linear
        u0, u1 = 1 / x0, 1 / x1
        u2 = u1 - f1 * (u1 - u0) / (f1 - f0)
        x0, f0, x1 = x1, f1, 1 / u2
        f1 = step(pair.case, pair.factor, x1) / ref_step - target
        if abs(f1) < tol:
            break
    return x1, (f1 + target) * ref_step


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("recipe", choices=sorted(PAIRS), help="the recipe whose GEMM constant to fit")
    ap.add_argument(
        "--check", action="store_true", help=f"exit 1 if the catalog's value is off the fit by > {CHECK_TOL}"
    )
    args = ap.parse_args(argv)
    pair = PAIRS[args.recipe]
    ref_pub, pub = published_steps(pair)
    target = pub / ref_pub
    ref = step(pair.ref_case)
    x, fitted = fit(pair, target, ref)
    shipped = float(efficiency_table("Blackwell").get(pair.factor, 0.0))
    at_shipped = step(pair.case)
    ref_label, label, ratio_label = pair.labels
    print("| quantity | published | model (fit) | model (catalog) |")
    print("|---|---|---|---|")
    print(f"| {ref_label} step, s | {ref_pub:.3f} | {ref:.4f} | {ref:.4f} |")
    print(f"| {label} step, s | {pub:.3f} | {fitted:.4f} | {at_shipped:.4f} |")
    print(f"| {ratio_label} | {target:.4f} | {fitted / ref:.4f} | {at_shipped / ref:.4f} |")
    print(f"| {pair.factor} | | {x:.4f} | {shipped:.4f} |")
    if args.check and abs(x - shipped) > CHECK_TOL:
        print(f"catalog {pair.factor} {shipped} is not the fit {x:.4f} (tolerance {CHECK_TOL})")
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
