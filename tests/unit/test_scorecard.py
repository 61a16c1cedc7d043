"""The validation scorecard (``results/scorecard.py``) against hand-computed figures, and the validation page."""

from __future__ import annotations

import json
import math

import pytest

from hetero_ns3.errors import ScenarioError
from hetero_ns3.results.scorecard import by_gpu, case_kind, format_scorecard, score, scorecard
from hetero_ns3.studies.report import render_report
from hetero_ns3.studies.validation_report import read_records, render_validation


def rec(name, err, tol=10.0, heldout=True, kind="scenario", gpus="H100-SXM", pending="", failure=None, metric=None):
    within = failure is None and abs(err) <= tol
    return {
        "case": name, "kind": kind, "gpu_types": gpus, "metric": metric or "step_time_s", "published": 1.0,
        "simulated": None if failure else 1 + err / 100, "error_pct": None if failure else err,
        "tolerance_pct": tol, "within_tolerance": within, "pending": pending, "heldout": heldout,
        "source": f"https://example.org/{name}; table 1", "wall_s": 1.0, "failure": failure,
    }  # fmt: skip


RECORDS = [
    rec("t1", -12.0),
    rec("t2", 4.0),
    rec("t3", -20.0, gpus="B200"),
    rec("c1", 30.0, kind="collective", metric="busbw_GBps"),
    rec("c2", -2.0, kind="collective", metric="busbw_GBps", gpus="B200"),
    rec("f1", 0.0, failure="ScenarioError: no such model"),
    rec("p1", 90.0, pending="needs a feature"),
    rec("k1", 6.0, heldout=False, kind="layer", gpus="H200-SXM", metric="time_s"),
    rec("k2", -1.0, heldout=False, kind="incast", gpus="", metric="makespan_over_ideal"),
]


def test_group_score_by_hand() -> None:
    s = score("held-out", [r for r in RECORDS if r["heldout"]])
    # counted: t1 t2 t3 c1 c2 f1 (p1 pending); within: t2, c2; errors of the five that ran
    assert (s.cases, s.within, s.failed) == (6, 2, 1)
    assert s.mape_pct == pytest.approx((12 + 4 + 20 + 30 + 2) / 5)
    assert s.median_abs_pct == pytest.approx(12.0)
    # optimism: -error for the step times (t1 t2 t3), +error for the bandwidths (c1 c2)
    assert s.optimism_pct == pytest.approx((12 - 4 + 20 + 30 - 2) / 5)
    assert (s.worst_case, s.worst_error_pct) == ("c1", 30.0)


def test_scorecard_rows_and_gpu_groups() -> None:
    rows = {r.group: r for r in scorecard(RECORDS)}
    assert list(rows) == [
        "all", "calibration", "calibration / congestion", "calibration / kernel",
        "held-out", "held-out / collective", "held-out / training",
    ]  # fmt: skip
    assert (rows["all"].cases, rows["all"].within) == (8, 4)
    assert rows["held-out / training"].cases == 4 and rows["held-out / training"].failed == 1
    assert rows["held-out / training"].mape_pct == pytest.approx(12.0)
    assert rows["calibration / kernel"].optimism_pct == pytest.approx(-6.0)  # a kernel time 6% long: pessimistic
    gpus = {r.group: r for r in by_gpu(RECORDS)}
    assert set(gpus) == {"B200", "H100-SXM"}  # held-out only, pending left out
    assert gpus["B200"].mape_pct == pytest.approx(11.0)
    assert gpus["B200"].optimism_pct == pytest.approx((20 - 2) / 2)  # t3 20% fast, c2 2% low
    text = format_scorecard(scorecard(RECORDS))
    assert "held-out / training" in text and "[1 failed]" in text and "c1 (+30.0%)" in text


def test_group_without_a_run_case_has_no_error() -> None:
    s = score("x", [rec("f", 0.0, failure="boom")])
    assert (s.cases, s.within, s.failed) == (1, 0, 1) and math.isnan(s.mape_pct) and s.worst_case == ""
    assert "-" in format_scorecard([s])


def test_optimism_orients_rates_and_times() -> None:
    """A step time 10% short and an MFU 10% high are both +10% optimistic; a bandwidth 10% low is -10%."""
    from hetero_ns3.results.scorecard import optimism_pct

    assert optimism_pct(rec("a", -10.0)) == pytest.approx(10.0)
    assert optimism_pct(rec("b", 10.0, metric="mfu_pct")) == pytest.approx(10.0)
    assert optimism_pct(rec("c", -10.0, metric="busbw_GBps")) == pytest.approx(-10.0)
    assert optimism_pct(rec("d", 5.0, metric="makespan_over_ideal")) == pytest.approx(-5.0)
    assert math.isnan(optimism_pct(rec("e", 0.0, failure="boom")))


def test_records_without_a_kind_column_are_classified_by_metric() -> None:
    """validation.json written before the kind column (sessions up to 21) still scores per kind."""
    assert case_kind({"case": "a", "metric": "mfu_pct"}) == "scenario"
    assert case_kind({"case": "a", "metric": "busbw_GBps"}) == "collective"
    assert case_kind({"case": "h200.layer.x", "metric": "time_s"}) == "layer"
    assert case_kind({"case": "nccl.x.8B", "metric": "time_s"}) == "collective"
    assert case_kind({"case": "d", "metric": "jain_index"}) == "incast"


def test_validation_page_from_json(tmp_path) -> None:
    (tmp_path / "validation.json").write_text(json.dumps(RECORDS))
    page = render_validation(tmp_path).read_text()
    for heading in ("Summary", "Scorecard", "Held-out cases per GPU type", "Error per case", "Cases"):
        assert f"<h2>{heading}</h2>" in page, heading
    assert page.count("data:image/png;base64,") == 2
    assert '<a href="https://example.org/t1">' in page  # the source's URL, without the text after it
    assert 'class="failed"' in page and 'class="pending"' in page and 'class="out"' in page
    # hetero-ns3 report on the same directory renders the same page (default name validation.html)
    assert render_report(tmp_path) == tmp_path / "validation.html"


def test_validation_page_errors_name_the_problem(tmp_path) -> None:
    with pytest.raises(ScenarioError, match=r"has no validation.json; run `hetero-ns3 validate --out DIR`"):
        read_records(tmp_path)
    (tmp_path / "validation.json").write_text('{"case": "a"}')
    with pytest.raises(ScenarioError, match="is not a validation table"):
        read_records(tmp_path)


def test_compare_lists_changed_and_one_sided_cases() -> None:
    from hetero_ns3.results.scorecard import common_cases, compare

    base = [rec("a", 5.0), rec("b", -3.0), rec("c", 1.0), rec("d", 2.0), rec("p", 1.0, pending="x")]
    now = [rec("a", 5.0), rec("b", -20.0), rec("c", 0.0, failure="boom"), rec("e", 1.0), rec("p", 9.0, pending="x")]
    changes = compare(now, base)
    assert [c.case for c in changes] == ["b", "c"]  # a unchanged, d / e in one run only, p pending
    b, c = changes
    assert (b.error_before_pct, b.error_after_pct, b.within_before, b.within_after) == (-3.0, -20.0, True, False)
    assert c.after is None and c.error_after_pct is None and c.before == pytest.approx(1.01)
    now_common, base_common = common_cases(now, base)
    assert [r["case"] for r in now_common] == ["a", "b", "c"] == [r["case"] for r in base_common]
