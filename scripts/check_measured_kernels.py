"""Compare the roofline with the kernel times measured on an H200 and write the residual table.

    PYTHONPATH=. python scripts/check_measured_kernels.py            # print, write the table
    PYTHONPATH=. python scripts/check_measured_kernels.py --check    # recompute the shipped table, exit 1 if it differs
    PYTHONPATH=. python scripts/check_measured_kernels.py --cases    # every case, not only the groups

Measurements: ``hetero_ns3/data/measured/h200/`` (``scripts/measure_gpu_kernels.py`` on one H200,
2026-12-04; see the README there). Comparison: :mod:`hetero_ns3.compute.measured`. Table:
``hetero_ns3/data/validation/h200_kernels_fit.csv`` (one row per group: cases, median, 10th / 90th
percentile and worst error of model over measured time, in percent); docs/compute.md, "Measured on H200".
"""

from __future__ import annotations

import argparse
import csv
import io
import sys
from pathlib import Path

from hetero_ns3.compute.measured import residuals, summarise
from hetero_ns3.results.atomic import write_text

TABLE = Path(__file__).resolve().parents[1] / "hetero_ns3" / "data" / "validation" / "h200_kernels_fit.csv"
FIELDS = ["group", "cases", "median_pct", "p10_pct", "p90_pct", "worst_pct"]


def table() -> str:
    buf = io.StringIO()
    buf.write("# Roofline (H200-SXM catalog constants, sustained applied) against kernels measured on one H200.\n")
    buf.write("# error = model / measured - 1; written by scripts/check_measured_kernels.py\n")
    w = csv.DictWriter(buf, fieldnames=FIELDS, lineterminator="\n")
    w.writeheader()
    for g in summarise(residuals()):
        w.writerow(
            {
                "group": g.name,
                "cases": g.n,
                "median_pct": f"{g.median:+.1f}",
                "p10_pct": f"{g.p10:+.1f}",
                "p90_pct": f"{g.p90:+.1f}",
                "worst_pct": f"{g.worst:+.1f}",
            }
        )
    return buf.getvalue()


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--check", action="store_true", help="compare the shipped table with a recomputation")
    ap.add_argument("--cases", action="store_true", help="print every case")
    args = ap.parse_args(argv)
    text = table()
    if args.check:
        ok = TABLE.read_text() == text
        print("residual table reproduced" if ok else "residual table differs")
        return 0 if ok else 1
    if args.cases:
        for r in residuals():
            print(
                f"{r.section:14s} {r.case:48s} measured {r.measured:11.4e} model {r.model:11.4e} {r.error_pct:+7.1f}%"
            )
    print(text, end="")
    write_text(TABLE, text)
    print(f"wrote {TABLE}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
