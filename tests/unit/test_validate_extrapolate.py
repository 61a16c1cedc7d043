"""``extrapolate_batches``: a validation case too large for this host simulated at two smaller global batches, its
step read off the line through them. The line is checked against the whole run of a small pipeline, where both can
run."""

from __future__ import annotations

import pytest

from hetero_ns3.errors import ScenarioError
from hetero_ns3.validation import extrapolated, load_suite, run_case

CASE = """[[case]]
name = "small"
kind = "scenario"
scenario = "small.toml"
overrides = ["parallelism.global_batch=64", "parallelism.zero_stage=1"]
metric = "{metric}"
published = {published}
tolerance = 0.1
source = "the same scenario run whole"
{extra}
"""


def _suite(tmp_path, metric="step_time_s", published=1.0, extra=""):
    from tests.e2e.test_run_cli import _scenario  # GPT-3 125M, TP 4 / PP 2 on two H100 nodes, analytic

    _scenario(tmp_path)
    p = tmp_path / "suite.toml"
    p.write_text(CASE.format(metric=metric, published=published, extra=extra))
    return load_suite(p)


def test_the_line_through_two_points() -> None:
    assert extrapolated((8, 16), (1.0, 1.5), 64) == pytest.approx(4.5)
    assert extrapolated((8, 16), (1.0, 1.5), 16) == pytest.approx(1.5)


def test_extrapolated_step_matches_the_whole_run_of_a_pipeline(tmp_path) -> None:
    """1F1B over 2 stages and 2 replicas: 32 micro-batches per replica run whole against the line through 8 and 16.
    A steady pipeline adds one micro-batch's cost per micro-batch and the fixed part (warm-up, cool-down, the last
    gradient reduction) is the same at every batch, so on this deterministic plan the two agree to rounding (1e-11
    measured; 1e-6 allowed)."""
    base, (case,) = _suite(tmp_path)
    whole = run_case(case, base)
    base, (ext,) = _suite(tmp_path, extra="extrapolate_batches = [16, 32]")
    line = run_case(ext, base)
    assert line.detail["step_time_s@16"] < line.detail["step_time_s@32"] < line.simulated
    assert line.simulated == pytest.approx(whole.simulated, rel=1e-6)
    assert line.detail["compute_only_s"] == pytest.approx(whole.detail["compute_only_s"], rel=1e-6)
    assert line.detail["mfu_pct"] == pytest.approx(whole.detail["mfu_pct"], rel=1e-6)


@pytest.mark.parametrize(
    ("extra", "words"),
    [
        ("extrapolate_batches = [32]", "two increasing global batches"),
        ("extrapolate_batches = [32, 16]", "two increasing global batches"),
        ('extrapolate_batches = ["16", 32]', "two increasing global batches"),
    ],
)
def test_bad_batches_are_refused_naming_the_field(tmp_path, extra, words) -> None:
    with pytest.raises(ScenarioError, match=r"case\[0\]\.extrapolate_batches .*" + words):
        _suite(tmp_path, extra=extra)


def test_batches_at_or_above_the_scenarios_are_refused(tmp_path) -> None:
    base, (case,) = _suite(tmp_path, extra="extrapolate_batches = [32, 64]")
    with pytest.raises(ScenarioError, match=r"extrapolate_batches \(\[32, 64\]\) must lie below the scenario's global"):
        run_case(case, base)


def test_an_extrapolated_case_says_so_in_the_table_the_records_and_the_page(tmp_path, capsys) -> None:
    import json

    from hetero_ns3.cli.main import main

    _suite(tmp_path, published=0.0511, extra="extrapolate_batches = [16, 32]")
    out = tmp_path / "out"
    assert main(["validate", "--suite", str(tmp_path / "suite.toml"), "--out", str(out)]) == 0
    assert "yes (extrapolated from global_batch 16 and 32)" in capsys.readouterr().out
    (rec,) = json.loads((out / "validation.json").read_text())
    assert rec["extrapolated_from"] == "16, 32" and rec["within_tolerance"]
    assert "extrapolated from global_batch 16, 32" in (out / "validation.html").read_text()
    assert main(["validate", "--suite", str(tmp_path / "suite.toml"), "--list"]) == 0
    assert capsys.readouterr().out.splitlines()[1].endswith("extrapolated")
