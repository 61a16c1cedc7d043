"""Fixtures of the end-to-end tests: one small analytic study, swept once per test session."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent.parent
TOPO = REPO / "tests" / "data" / "one-node-4gpu.toml"

SMALL_BASE = f"""
[model]
name = "gpt3-125m"
layers = 2
seq_len = 256
[parallelism]
tp = 2
global_batch = 2
micro_batch = 1
[cluster]
topology = "{TOPO}"
[run]
backend = "analytic"
reuse_isolated_collectives = "off"   # every NVLink flow kept: the run report's flow tables and port plots
"""

SMALL_STUDY = """
[study]
name = "small"
description = "tensor parallel size against sequence length on one 4-GPU node (test study)"
base = "base.toml"
[axes]
"parallelism.tp" = [2, 4]
"model.seq_len" = [128, 256]
"""


@pytest.fixture(scope="session")
def small_study(tmp_path_factory) -> Path:
    """Output directory of a 4-point analytic sweep (2 local workers): study.parquet and runs/."""
    root = tmp_path_factory.mktemp("small_study")
    (root / "study").mkdir()
    (root / "study" / "base.toml").write_text(SMALL_BASE, encoding="utf-8")
    (root / "study" / "study.toml").write_text(SMALL_STUDY, encoding="utf-8")
    out = root / "out"
    res = subprocess.run(
        [sys.executable, "-m", "hetero_ns3", "sweep", str(root / "study"), "--workers", "2", "--out", str(out),
         "--no-progress"],
        capture_output=True, text=True, timeout=300, cwd=root,
    )  # fmt: skip
    assert res.returncode == 0, res.stderr
    return out
