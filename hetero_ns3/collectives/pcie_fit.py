"""PCIe wire overhead of the collective model, fitted on published GPU-to-GPU P2P copy bandwidths.

Data: ``hetero_ns3/data/validation/pcie_p2p.csv``, one row per published system (PCIe Gen4 / Gen5 x16,
bandwidth per direction; sources in the file). The simulated PCIe link carries the line rate after the
line code, GT/s x lanes x 128/130 (:func:`hetero_ns3.topology.loader.pcie_rate_bps`: 31.5 GB/s Gen4,
63.0 GB/s Gen5). A transfer reaches less: every TLP of at most the max payload size (128-512 B) carries
about 24 B of framing, header and LCRC, and the link also carries DLLPs (acknowledgements, flow-control
credits). The model puts that loss on the plan as ``[links.pcie] wire_overhead`` (wire bytes per
payload byte on paths whose slowest link is PCIe), as it does for NVLink.

Fit: ``wire_overhead = 1 / median(measured / line rate)`` over the rows; the median, because the rows
are single published figures of different platforms (max payload size, root complex, driver), not
repeated samples of one. Residual of a row: ``line rate / wire_overhead / measured - 1``.
"""

from __future__ import annotations

import csv
import statistics
from dataclasses import dataclass
from pathlib import Path

from hetero_ns3.errors import ScenarioError
from hetero_ns3.inputs import read_csv_text
from hetero_ns3.paths import PACKAGE_DATA
from hetero_ns3.topology.loader import pcie_rate_bps

P2P_CSV = PACKAGE_DATA / "validation" / "pcie_p2p.csv"
LANES = 16


@dataclass(frozen=True)
class P2pRow:
    """One published P2P bandwidth: PCIe generation, GB/s per direction (x16), the system and source."""

    system: str
    gen: int
    measured_GBps: float
    kind: str
    source: str

    @property
    def line_GBps(self) -> float:
        """The simulated link's rate, GB/s per direction."""
        return pcie_rate_bps(self.gen, LANES) / 8e9

    @property
    def efficiency(self) -> float:
        return self.measured_GBps / self.line_GBps


def load_p2p(path: str | Path | None = None) -> tuple[P2pRow, ...]:
    """Rows of the P2P table (``#`` lines are comments). Raises ScenarioError naming a bad row."""
    p = Path(path) if path is not None else P2P_CSV
    text = read_csv_text(p, "P2P table")
    lines = [ln for ln in text.splitlines() if ln.strip() and not ln.startswith("#")]
    rows = []
    for i, r in enumerate(csv.DictReader(lines), start=1):
        try:
            rows.append(P2pRow(r["system"], int(r["gen"]), float(r["measured_GBps"]), r["kind"], r["source"]))
        except (KeyError, TypeError, ValueError) as e:
            raise ScenarioError(
                f"{p}: data row {i} is not 'system,gen,measured_GBps,kind,source' ({e}); fix that row"
            ) from None
    if not rows:
        raise ScenarioError(f"{p}: no data rows; the fit needs at least one published P2P bandwidth")
    return tuple(rows)


def fit_wire_overhead(rows: tuple[P2pRow, ...]) -> float:
    """Wire bytes per payload byte: 1 / the median efficiency of the rows."""
    return 1.0 / statistics.median(r.efficiency for r in rows)


def residual_table(rows: tuple[P2pRow, ...], wire_overhead: float) -> list[dict[str, str]]:
    """Per row: generation, measured and simulated GB/s, residual % (simulated / measured - 1)."""
    out = []
    for r in rows:
        sim = r.line_GBps / wire_overhead
        out.append(
            {
                "system": r.system,
                "gen": str(r.gen),
                "measured_GBps": f"{r.measured_GBps:.2f}",
                "simulated_GBps": f"{sim:.2f}",
                "residual_pct": f"{100.0 * (sim / r.measured_GBps - 1.0):+.1f}",
            }
        )
    return out
