"""Flow tables for the RoCE backend: read, validate against a graph, turn into arrays.

A flow table has columns ``src, dst, size_bytes, start_s`` and optionally ``priority`` (traffic
class 0..7, default 3). Hosts are named as in the graph. Errors name the row (0-based data row and
the file line) and the column. Pure Python: no ns-3 here.
"""

from __future__ import annotations

import io
import math
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from hetero_ns3.errors import ScenarioError
from hetero_ns3.inputs import read_csv_text
from hetero_ns3.topology.graph import HOST, NetGraph

REQUIRED_COLUMNS: tuple[str, ...] = ("src", "dst", "size_bytes", "start_s")
OPTIONAL_COLUMNS: tuple[str, ...] = ("priority",)
DEFAULT_PRIORITY = 3
"""Traffic class of flows without a ``priority`` (RoCE's customary lossless class)."""


@dataclass(frozen=True)
class FlowArrays:
    """Validated flows as arrays, ready for the simulator (one entry per flow)."""

    src: np.ndarray
    """Source host node index (uint32)."""
    dst: np.ndarray
    """Destination host node index (uint32)."""
    size_bytes: np.ndarray
    """Bytes to deliver (uint64, > 0)."""
    start_s: np.ndarray
    """Start time, seconds (float64, >= 0)."""
    priority: np.ndarray
    """Traffic class 0..7 (uint8)."""

    def __len__(self) -> int:
        return len(self.src)


def read_flows_csv(path: str | Path) -> pd.DataFrame:
    """Read a flows CSV; raises ScenarioError for a missing or empty file, missing columns or no rows."""
    p = Path(path)
    if not p.is_file():
        raise ScenarioError(
            f"flows file {str(p)!r} does not exist; pass a CSV with columns {','.join(REQUIRED_COLUMNS)}"
        )
    text = read_csv_text(p, "flows file")
    header = f"{','.join(REQUIRED_COLUMNS)}[,{','.join(OPTIONAL_COLUMNS)}]"
    if not text.strip():
        raise ScenarioError(
            f"flows file {str(p)!r} is empty; write a header line {header} and one row per flow"
            " (see scenarios/flows_example.csv)"
        )
    try:
        df = pd.read_csv(io.StringIO(text), dtype=str, keep_default_na=False, skipinitialspace=True)
    except (pd.errors.ParserError, pd.errors.EmptyDataError, UnicodeDecodeError) as exc:
        detail = " ".join(str(exc).split())
        raise ScenarioError(f"flows file {str(p)!r} is not a readable CSV: {detail}") from None
    df.columns = [str(c).strip() for c in df.columns]
    check_columns(df, p.name)
    if df.empty:
        raise ScenarioError(
            f"flows file {str(p)!r} has a header but no flows, so there is nothing to simulate; "
            f"add one row per flow ({header})"
        )
    return df


def check_columns(df: pd.DataFrame, source: str = "flows") -> None:
    """Raise ScenarioError naming any required column that ``df`` lacks."""
    missing = [c for c in REQUIRED_COLUMNS if c not in df.columns]
    if missing:
        raise ScenarioError(
            f"{source} is missing column(s) {missing}; required columns: {','.join(REQUIRED_COLUMNS)}"
            f" (+ optional {','.join(OPTIONAL_COLUMNS)})"
        )


def _where(source: str, row: int, column: str) -> str:
    return f"{source} row {row} (line {row + 2}), column {column!r}"


def _number(source: str, row: int, column: str, value: object) -> float:
    try:
        x = float(str(value).strip())
    except ValueError:
        raise ScenarioError(f"{_where(source, row, column)}: {value!r} is not a number") from None
    if not math.isfinite(x):
        raise ScenarioError(f"{_where(source, row, column)}: {value!r} is not a finite number")
    return x


def flow_arrays(graph: NetGraph, flows: pd.DataFrame, source: str = "flows") -> FlowArrays:
    """Validate ``flows`` against ``graph`` and convert to arrays.

    Raises ScenarioError naming row and column for unknown hosts, non-host endpoints, src == dst,
    non-positive or fractional sizes, negative or non-numeric start times and priorities outside 0..7.
    """
    check_columns(flows, source)
    n = len(flows)
    src = np.empty(n, dtype=np.uint32)
    dst = np.empty(n, dtype=np.uint32)
    size = np.empty(n, dtype=np.uint64)
    start = np.empty(n, dtype=np.float64)
    prio = np.full(n, DEFAULT_PRIORITY, dtype=np.uint8)
    index = {node.name: i for i, node in enumerate(graph.nodes)}
    hosts = graph.host_names()
    has_prio = "priority" in flows.columns
    cols = {c: flows[c].tolist() for c in flows.columns}
    for r in range(n):
        for column, out in (("src", src), ("dst", dst)):
            name = str(cols[column][r]).strip()
            i = index.get(name)
            if i is None:
                raise ScenarioError(
                    f"{_where(source, r, column)}: unknown host {name!r}; hosts are {hosts[:4]}"
                    f"{'...' if len(hosts) > 4 else ''} ({len(hosts)} in all)"
                )
            if graph.nodes[i].kind != HOST:
                raise ScenarioError(f"{_where(source, r, column)}: {name!r} is a switch, not a host")
            out[r] = i
        if src[r] == dst[r]:
            raise ScenarioError(f"{_where(source, r, 'dst')}: destination equals source {cols['src'][r]!r}")
        s = _number(source, r, "size_bytes", cols["size_bytes"][r])
        if s <= 0 or s != int(s):
            raise ScenarioError(
                f"{_where(source, r, 'size_bytes')}: {cols['size_bytes'][r]!r} must be a positive whole number of bytes"
            )
        size[r] = int(s)
        t = _number(source, r, "start_s", cols["start_s"][r])
        if t < 0:
            raise ScenarioError(f"{_where(source, r, 'start_s')}: {cols['start_s'][r]!r} must be >= 0 seconds")
        start[r] = t
        if has_prio and str(cols["priority"][r]).strip() != "":
            p = _number(source, r, "priority", cols["priority"][r])
            if p != int(p) or not 0 <= p <= 7:
                raise ScenarioError(f"{_where(source, r, 'priority')}: {cols['priority'][r]!r} must be an integer 0..7")
            prio[r] = int(p)
    return FlowArrays(src, dst, size, start, prio)
