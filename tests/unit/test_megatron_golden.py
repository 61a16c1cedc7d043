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


#: Rows whose simulation is long (analytic backend, this 2-core host): gpt-3.6b ~25 s and 2.0 GiB peak,
#: gpt-7.5b (49 M tasks) ~80 s and 6.4 GiB. gpt-1.7b (~3 s, 0.3 GiB) is the fast check.
_SLOW_ROWS = {"gpt-3.6b", "gpt-7.5b"}
#: Rows with a golden simulated step time that the test suite does not re-simulate (too long for it:
#: gpt-18b ~40-70 s CPU / 3.7 GiB, gpt-39b ~70-110 s CPU / 6.4 GiB, gpt-76b ~100 s CPU / 4.3 GiB, gpt-145b
#: ~170 s / 5.8 GiB, gpt-310b ~200 s / 5.9 GiB, gpt-530b ~300 s / 8.0 GiB, gpt-1t ~440 s / 9.8 GiB, with
#: reuse_isolated_collectives; their goldens come from scripts/make_validation_scenarios.py --golden,
#: docs/validation.md).
_GOLDEN_ONLY_ROWS = {"gpt-18b", "gpt-39b", "gpt-76b", "gpt-145b", "gpt-310b", "gpt-530b", "gpt-1t"}


def _simulated_rows() -> list:
    rows = [(k, float(v["simulated_step_s"])) for k, v in _golden().items() if v["simulated_step_s"]]
    return [
        pytest.param(k, t, id=k, marks=[pytest.mark.slow] if k in _SLOW_ROWS else [])
        for k, t in rows
        if k not in _GOLDEN_ONLY_ROWS
    ]


def test_golden_table_simulates_the_rows_that_fit_this_host() -> None:
    """Every row that runs on this 24 GiB host has a simulated step time (docs/validation.md)."""
    assert {k for k, v in _golden().items() if v["simulated_step_s"]} == {
        "gpt-1.7b", "gpt-3.6b", "gpt-7.5b", "gpt-18b", "gpt-39b", "gpt-76b", "gpt-145b", "gpt-310b", "gpt-530b",
        "gpt-1t",
    }  # fmt: skip


@pytest.mark.parametrize(("name", "step_s"), _simulated_rows())
def test_simulated_step_time_is_golden(name: str, step_s: float) -> None:
    """The analytic backend's step time of a row simulated in the golden table."""
    got = simulate_scenario(Path(DATA / "megatron" / f"{name}.toml"))["step_time_s"]
    assert got == pytest.approx(step_s, rel=1e-6), name
