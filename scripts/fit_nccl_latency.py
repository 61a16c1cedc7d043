"""Fit the collective model's launch cost on the public 8x H100 nccl-tests sweep and write the residuals.

    PYTHONPATH=. python scripts/fit_nccl_latency.py            # fit, print, write the residual table
    PYTHONPATH=. python scripts/fit_nccl_latency.py --check    # recompute the shipped table, exit 1 if it differs

The model and the fit are :mod:`hetero_ns3.collectives.calibration` (data, outlier rule, fit points,
closed-form least squares); the fitted constant is ``[latency] launch_us`` of
``collectives/tuning.toml``, which this script prints but does not edit. The residual table
(``hetero_ns3/data/validation/nccl_latency_fit.csv``) is simulated with the shipped tuning file, so
``--check`` fails when the shipped constant, the planner or the backend changes what the table says.
docs/collectives.md ("Small-message latency") shows the table.
"""

from __future__ import annotations

import argparse
import csv
import sys

from hetero_ns3.collectives import load_tuning
from hetero_ns3.collectives.calibration import RESIDUALS_CSV, fit_launch, load_sweep, residual_table

FIELDS = ("size_bytes", "published_us", "simulated_us", "busbw_error_pct", "choice", "role")


def read_table() -> tuple[str, list[dict[str, str]]]:
    """The shipped table: its ``# launch_us`` header value and its rows."""
    text = RESIDUALS_CSV.read_text().splitlines()
    head = next((ln for ln in text if ln.startswith("# launch_us ")), "# launch_us ?")
    return head.split()[-1], list(csv.DictReader(ln for ln in text if not ln.startswith("#")))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--check", action="store_true", help="compare the shipped table with a recomputation")
    args = ap.parse_args(argv)
    tuning = load_tuning()
    points = load_sweep()
    shipped_us = f"{tuning.launch_s * 1e6:.2f}"
    fresh = residual_table(points, tuning)
    if args.check:
        launch, rows = read_table()
        ok = launch == shipped_us and rows == fresh
        if not ok:
            for a, b in zip(rows, fresh, strict=False):
                if a != b:
                    print(f"shipped {a}\nfresh   {b}")
        print("residual table reproduced" if ok else "residual table differs")
        return 0 if ok else 1
    fit = fit_launch(points, tuning)
    print(f"fit points: {len(fit.sizes)} sizes {fit.sizes[0]} .. {fit.sizes[-1]} B")
    print(f"least-squares launch cost: {fit.launch_s * 1e6:.3f} us (shipped: {shipped_us} us)")
    for r in fresh:
        print(
            f"{int(r['size_bytes']):>12} B  published {r['published_us']:>9} us  simulated {r['simulated_us']:>9} us"
            f"  busbw {r['busbw_error_pct']:>6}%  {r['choice']:<12} {r['role']}"
        )
    fit_err = [abs(float(r["busbw_error_pct"])) for r in fresh if r["role"] == "fit"]
    print(f"fit points: max |busbw error| {max(fit_err):.1f}%, mean {sum(fit_err) / len(fit_err):.1f}%")
    with open(RESIDUALS_CSV, "w", newline="") as fh:
        fh.write("# Residuals of the small-message latency fit (scripts/fit_nccl_latency.py) on the 8x H100\n")
        fh.write("# nccl-tests all-reduce sweep (nccl_tests_h100x8.csv); analytic backend, dgx-h100-rail --gpus 8.\n")
        fh.write("# busbw_error_pct = simulated / published busbw - 1. role: fit, outlier (excluded), check.\n")
        fh.write(f"# launch_us {shipped_us}\n")
        w = csv.DictWriter(fh, fieldnames=FIELDS, lineterminator="\n")
        w.writeheader()
        w.writerows(fresh)
    print(f"wrote {RESIDUALS_CSV}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
