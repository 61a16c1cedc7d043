"""``hetero-ns3 report`` of a run: the page's link to ``trace.json`` works wherever ``--out`` puts the page."""

from __future__ import annotations

import re
import sys
from pathlib import Path
from urllib.parse import unquote

from hetero_ns3.plan.dag import critical_path_s
from hetero_ns3.results import write_run
from hetero_ns3.studies.report import render_report

sys.path.insert(0, str(Path(__file__).resolve().parent))
from test_results_rundir import META, small_plan  # noqa: E402


def _trace_href(page: Path) -> str:
    hrefs = re.findall(r'<a href="([^"]+)">trace\.json</a>', page.read_text(encoding="utf-8"))
    assert len(hrefs) == 1, hrefs
    return unquote(hrefs[0])


def test_the_trace_link_resolves_from_where_the_page_is_written(tmp_path):
    """The link was the bare name ``trace.json``: a page written with ``--out`` outside the run directory
    pointed at a file that is not there."""
    run = tmp_path / "my run"
    plan = small_plan()
    write_run(run, scenario_resolved={}, versions={}, plan=plan, times=critical_path_s(plan, 0.3), gpu_meta=META,
              plots=False)  # fmt: skip
    pages = [
        render_report(run),
        render_report(run, tmp_path / "reports" / "r.html"),
        render_report(run, run / "x.html"),
    ]
    pages.append(render_report(run, tmp_path / "reports" / "deeper" / "r.html"))
    for page in pages:
        assert (page.parent / _trace_href(page)).resolve() == (run / "trace.json").resolve(), page
    assert _trace_href(pages[0]) == "trace.json"  # beside the run's files: the bare name, as before
