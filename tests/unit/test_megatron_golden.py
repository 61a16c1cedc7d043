"""Golden step times of the Megatron SC'21 calibration rows (regenerate only with
``PYTHONPATH=. python scripts/make_validation_scenarios.py --golden``, docs/validation.md)."""

from __future__ import annotations

import csv
from pathlib import Path

import pytest

from hetero_ns3.compute.roofline import Roofline
from hetero_ns3.paths import PACKAGE_DATA
from hetero_ns3.validation import simulate_scenario
from hetero_ns3.workload.calibration import estimate_step, load_rows, scenario_toml

DATA = PACKAGE_DATA / "validation"


def _golden() -> dict[str, dict[str, str]]:
    text = (DATA / "megatron_golden.csv").read_text().splitlines()
    return {r["row"]: r for r in csv.DictReader(ln for ln in text if not ln.startswith("#"))}


@pytest.mark.parametrize("row", load_rows(), ids=lambda r: r.name)
def test_closed_form_step_time_is_golden(row) -> None:
    g = _golden()[row.name]
    assert row.published_step_s == pytest.approx(float(g["published_step_s"]), rel=1e-6)
    assert estimate_step(row, Roofline("fp16")).total_s == pytest.approx(float(g["closed_form_step_s"]), rel=1e-6)


@pytest.mark.parametrize("row", load_rows(), ids=lambda r: r.name)
def test_shipped_scenario_matches_the_row(row) -> None:
    assert (DATA / "megatron" / f"{row.name}.toml").read_text() == scenario_toml(row)


def test_simulated_step_time_is_golden() -> None:
    """The analytic backend's step time of every row simulated in the golden table (gpt-1.7b: ~10 s)."""
    g = _golden()
    simulated = {k: float(v["simulated_step_s"]) for k, v in g.items() if v["simulated_step_s"]}
    assert simulated
    for name, t in simulated.items():
        got = simulate_scenario(Path(DATA / "megatron" / f"{name}.toml"))["step_time_s"]
        assert got == pytest.approx(t, rel=1e-6), name
