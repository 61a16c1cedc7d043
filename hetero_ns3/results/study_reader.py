"""Read a study's output directory back (``hetero-ns3 sweep``): the table and the points' run directories."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pandas as pd

from hetero_ns3.errors import ScenarioError


def load_study(out_dir: str | os.PathLike[str]) -> pd.DataFrame:
    """The study table (``study.parquet``) as a DataFrame, one row per point.

    ``df.attrs`` holds ``name``, ``kind``, ``axes`` (the coordinate columns) and ``root`` (the directory);
    a point's run directory is ``root / row.run_dir`` (read it with :func:`hetero_ns3.results.load_run`).
    """
    root = Path(out_dir)
    path = root / "study.parquet"
    if not path.is_file():
        raise ScenarioError(f"{root} has no study.parquet; {unfinished_study_hint(root)}")
    df = pd.read_parquet(path)
    manifest = root / "study.json"
    meta = json.loads(manifest.read_text(encoding="utf-8")) if manifest.is_file() else {}
    df.attrs.update(name=meta.get("name", root.name), kind=meta.get("kind", "training"), axes=meta.get("axes", []))
    df.attrs["root"] = str(root)
    return df


def unfinished_study_hint(root: Path) -> str:
    """How to get a study table for ``root``: a directory with ``study.json`` but no table is a sweep that was
    killed before its end (``sweep --resume`` reruns nothing complete and writes the table)."""
    manifest = root / "study.json"
    try:
        source = json.loads(manifest.read_text(encoding="utf-8")).get("source") if manifest.is_file() else None
    except (OSError, ValueError, AttributeError):
        source = None
    if source:
        return (
            f"its sweep stopped before writing the table; run `hetero-ns3 sweep {source} --out {root} --resume` "
            "(complete points are not rerun) to write it"
        )
    return "give a directory that hetero-ns3 sweep wrote"
