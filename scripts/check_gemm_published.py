"""Compare the roofline's GEMM shape law with Azure's published cuBLASLt / hipBLASLt size curves and print the table.

    PYTHONPATH=. python scripts/check_gemm_published.py            # print the residual tables
    PYTHONPATH=. python scripts/check_gemm_published.py --check    # exit 1 if a large row leaves its stated bound

The data and the comparison are :mod:`hetero_ns3.compute.gemm_published`
(``hetero_ns3/data/validation/gemm_published.csv``): a check of the catalog, not a fit; nothing is edited.
docs/compute.md ("GEMM size curves") shows the tables.
"""

from __future__ import annotations

import argparse
from collections import defaultdict

from hetero_ns3.compute.gemm_published import (
    BOUND_PCT,
    DEFAULT_BOUND_PCT,
    load_published,
    out_of_bound,
    published_residuals,
)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--check", action="store_true", help="exit 1 if a large row leaves its stated bound")
    args = ap.parse_args(argv)
    rows = load_published()
    res = published_residuals(rows)
    launch = published_residuals(rows, with_launch=True)
    print(
        "| GPU | precision | m x n x k | measured TFLOP/s | of best | model TFLOP/s | of best | error "
        "| error with launch | checked |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|")
    worst: dict[str, float] = defaultdict(float)
    for r, rl in zip(res, launch, strict=True):
        w = r.row
        print(
            f"| {w.gpu_type} | {w.precision} | {w.m} x {w.n} x {w.k} | {w.tflops:.1f} | {r.measured_rel:.2f} "
            f"| {r.model_tflops:.1f} | {r.model_rel:.2f} | {r.error_pct:+.1f}% | {rl.error_pct:+.1f}% "
            f"| {'yes' if w.large else 'no'} |"
        )
        if w.large:
            worst[w.gpu_type] = max(worst[w.gpu_type], abs(r.error_pct))
    print("\n| GPU | worst checked row | stated bound |")
    print("|---|---|---|")
    for gpu, err in worst.items():
        print(f"| {gpu} | {err:.1f}% | {BOUND_PCT.get(gpu, DEFAULT_BOUND_PCT):g}% |")
    bad = out_of_bound(res)
    if args.check and bad:
        names = ", ".join(f"{r.row.gpu_type} {r.row.m}x{r.row.n}x{r.row.k} ({r.error_pct:+.1f}%)" for r in bad)
        print(f"outside the stated bound: {names}")
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
