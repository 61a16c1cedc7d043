"""The ``incast`` cases of ``hetero-ns3 validate`` (issue 14: the 8-to-1 DCQCN incast in the suite).

The machinery is checked against its analytic answer: without congestion control the incast's makespan is
the line-rate time of all wire bytes (the receiver's link never idles) with equal shares. The shipped
cases are the default DCQCN preset on 8 x 10 MB; the suite file runs them under full ``validate``.
"""

from __future__ import annotations

import pytest

from hetero_ns3.cli.main import main
from hetero_ns3.errors import ScenarioError
from hetero_ns3.network.incast import ideal_makespan_s
from hetero_ns3.validation import Case, load_suite, run_case

pytestmark = pytest.mark.ns3

SRC = "analytic: line rate"


def _case(metric: str, cc: str = "none", senders: int = 4, size: int = 2_000_000) -> Case:
    return Case("t", "incast", metric, 1.0, 0.02, SRC, senders=senders, size=size, cc=cc)


def test_incast_without_cc_runs_at_line_rate_with_equal_shares(capi) -> None:
    """CC none: makespan = wire bytes / line rate within 2% (the first frame's two hops and the ACK path
    add a few us), Jain's index 1 within 1e-3; the ideal counts RoCEv2 framing."""
    base, _ = load_suite()
    util = run_case(_case("makespan_over_ideal"), base)
    fair = run_case(_case("jain_index"), base)
    assert 1.0 <= util.simulated <= 1.02 and util.within
    assert fair.simulated == pytest.approx(1.0, abs=1e-3)
    assert util.detail["makespan_s"] == pytest.approx(ideal_makespan_s(4, 2_000_000, 100e9), rel=0.02)
    assert ideal_makespan_s(1, 4096, 8.0) == pytest.approx(4096 + 62)  # one frame: payload + headers, in s at 8 b/s


def test_incast_dcqcn_is_scored_against_the_ideal(capi) -> None:
    """DCQCN (default preset) on a small incast finishes above the ideal and is scored as such: the
    outcome's error is the relative distance to 1.0, and the shipped cases are the issue's 8 x 10 MB,
    counted (not pending) and outside --quick (packet level)."""
    base, cases = load_suite()
    out = run_case(_case("makespan_over_ideal", cc="dcqcn", senders=8), base)
    assert out.simulated > 1.0
    assert out.error_pct == pytest.approx(100.0 * (out.simulated - 1.0))
    shipped = [c for c in cases if c.kind == "incast"]
    assert {c.metric for c in shipped} == {"makespan_over_ideal", "jain_index"}
    for c in shipped:
        assert (c.senders, c.size, c.rate_gbps) == (8, 10_000_000, 100.0) and not c.quick and not c.pending


def test_incast_case_without_senders_is_refused(tmp_path) -> None:
    p = tmp_path / "s.toml"
    p.write_text(
        '[[case]]\nname = "i"\nkind = "incast"\nmetric = "jain_index"\npublished = 1\ntolerance = 0.05\n'
        'source = "s"\nsize = 1000\n'
    )
    with pytest.raises(ScenarioError, match="senders"):
        run_case(load_suite(p)[1][0], tmp_path)
    assert main(["validate", "--suite", str(p)]) == 2
