"""Fit the PCIe wire overhead on published P2P copy bandwidths and print the residual table.

    PYTHONPATH=. python scripts/fit_pcie_overhead.py            # fit, print the table (markdown)
    PYTHONPATH=. python scripts/fit_pcie_overhead.py --check    # exit 1 if the shipped constant is not the fit

The data and the fit are :mod:`hetero_ns3.collectives.pcie_fit` (``hetero_ns3/data/validation/pcie_p2p.csv``);
the fitted constant is ``[links.pcie] wire_overhead`` of ``collectives/tuning.toml``, which this script prints
but does not edit. docs/collectives.md ("PCIe links") shows the table.
"""

from __future__ import annotations

import argparse
import math

from hetero_ns3.collectives import load_tuning
from hetero_ns3.collectives.pcie_fit import fit_wire_overhead, load_p2p, residual_table


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--check", action="store_true", help="compare the shipped constant with the fit")
    args = ap.parse_args(argv)
    rows = load_p2p()
    fit = fit_wire_overhead(rows)
    shipped = load_tuning().links["pcie"].wire_overhead
    print(f"wire_overhead fitted {fit:.10f} (median efficiency {1 / fit:.4f}), shipped {shipped:.10f}")
    print("| system | gen | measured GB/s | simulated | residual |\n|---|---|---|---|---|")
    for r in residual_table(rows, shipped):
        print(f"| {r['system']} | {r['gen']} | {r['measured_GBps']} | {r['simulated_GBps']} | {r['residual_pct']}% |")
    if args.check and not math.isclose(fit, shipped, rel_tol=1e-9):
        print("the shipped [links.pcie] wire_overhead is not the fit: edit collectives/tuning.toml")
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
