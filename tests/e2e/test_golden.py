"""The demo's flow-level result against its stored golden figures (regenerate: ``python tests/golden.py --write``)."""

from __future__ import annotations

import json
import math
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from golden import GOLDEN, REL_TOL, run_demo  # noqa: E402

pytestmark = pytest.mark.e2e


def _flat(d: dict, prefix: str = "") -> dict[str, float]:
    out: dict[str, float] = {}
    for k, v in d.items():
        if isinstance(v, dict):
            out.update(_flat(v, f"{prefix}{k}."))
        else:
            out[f"{prefix}{k}"] = v
    return out


def test_demo_on_the_analytic_backend_matches_its_golden_summary(tmp_path: Path) -> None:
    want = _flat(json.loads(GOLDEN.read_text()))
    got = _flat(run_demo(tmp_path / "demo"))
    assert sorted(got) == sorted(want), "the golden file's keys changed: regenerate with tests/golden.py --write"
    bad = {k: (got[k], want[k]) for k in want if not math.isclose(got[k], want[k], rel_tol=REL_TOL, abs_tol=1e-12)}
    assert not bad, f"differs from {GOLDEN.name} (got, golden): {bad}"
