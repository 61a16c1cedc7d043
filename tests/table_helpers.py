"""Shared helper of the published-table tests: a copy of a table's header and first data rows with one row edited."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path


def edited_table(table: Path, tmp_path: Path, edit: Callable[[str], str]) -> Path:
    """A CSV in ``tmp_path`` holding ``table``'s header and first two data rows, the second passed through ``edit``
    (the loaders call it "data row 2")."""
    lines = table.read_text().splitlines()[:3]
    lines[2] = edit(lines[2])
    p = tmp_path / "t.csv"
    p.write_text("\n".join(lines) + "\n")
    return p
