"""Fit the roofline's memory-bound efficiency on NVIDIA's published normalization kernels and print the residuals.

    PYTHONPATH=. python scripts/fit_memory_published.py            # fit H200 and GB200, print the tables
    PYTHONPATH=. python scripts/fit_memory_published.py --check    # exit 1 if gpus.toml does not hold the fits

The data and the fit are :mod:`hetero_ns3.compute.memory_fit` (``hetero_ns3/data/validation/memory_published.csv``);
the fitted constants are ``memory`` of ``[efficiency.Hopper]`` (H200) and ``[efficiency.Blackwell]`` (GB200) in
``hetero_ns3/data/gpus.toml``, which this script prints but does not edit. docs/compute.md ("Memory-bound kernels")
shows the tables.
"""

from __future__ import annotations

import argparse
import statistics
from collections import defaultdict

from hetero_ns3.compute.memory_fit import FIT_MIN_COLS, FITS, fit_published, load_published, published_residuals
from hetero_ns3.compute.roofline import efficiency_table


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--check", action="store_true", help="compare the shipped constants with the fits")
    args = ap.parse_args(argv)
    rows = load_published()
    stale = []
    for gpu_type, table in FITS:
        fit = fit_published(gpu_type, rows)
        shipped = efficiency_table(table).get("memory")
        print(
            f"{gpu_type} cuDNN RMSNorm -> [efficiency.{table}]: memory {fit.memory:g} (shipped {shipped}); "
            f"{fit.cases} cases, RMS {fit.rms_pct:.1f}%, worst {fit.worst_pct:+.1f}%"
        )
        if shipped != fit.memory:
            stale.append(table)
    print("\n| GPU | back end | kernel | pass | rows x cols | MB | GB/s | of HBM | model | fitted |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    groups: dict[tuple[str, str, str], list[float]] = defaultdict(list)
    for res in published_residuals(rows):
        r = res.row
        print(
            f"| {r.gpu_type} | {r.backend} | {r.kernel} | {r.direction} | {r.rows} x {r.cols} | {r.bytes / 1e6:.1f} "
            f"| {r.bytes / r.time_s / 1e9:.0f} | {r.fraction:.3f} | {res.error_pct:+.1f}% | {'yes' if r.fitted else 'no'} |"
        )
        kind = r.kernel + (" (head rows)" if r.cols < FIT_MIN_COLS and r.backend != "babelstream" else "")
        groups[(r.gpu_type, r.backend, f"{kind} {r.direction}")].append(res.error_pct)
    print("\n| GPU | back end | kernels | cases | median model error |")
    print("|---|---|---|---|---|")
    for (gpu, backend, kind), errs in groups.items():
        print(f"| {gpu} | {backend} | {kind} | {len(errs)} | {statistics.median(errs):+.1f}% |")
    if args.check and stale:
        print(f"gpus.toml does not hold the fit of [efficiency.{'], ['.join(stale)}]: edit hetero_ns3/data/gpus.toml")
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
