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


def test_study_figures_shorten_long_axis_values():
    """An axis whose values are tables (``faults.gpus``, written as JSON) put whole values on the ticks and
    in the legend: the rotated labels took most of the figure (the plot was 0.36 of its height)."""
    import pandas as pd

    from hetero_ns3.results.breakdown import TERMS
    from hetero_ns3.studies.report import MAX_LABEL, axis_figure

    faults = ["[]", '[{"factor": 1.5, "gpu_type": "A100-SXM-80GB"}]', '[{"factor": 2.0, "gpu_type": "H100-SXM"}]']
    rows = [{"status": "ok", "faults.gpus": f, "parallelism.schedule": s, "iteration_time_s": 0.07 + 0.01 * i + 0.001 * j,
             **dict.fromkeys(TERMS, 0.01)} for i, f in enumerate(faults) for j, s in enumerate(["1f1b", "gpipe"])]  # fmt: skip
    df = pd.DataFrame(rows)
    for axis, other in (("faults.gpus", "parallelism.schedule"), ("parallelism.schedule", "faults.gpus")):
        fig = axis_figure(df, axis, [other], "training")
        plot = fig.axes[0]
        texts = [t.get_text() for t in plot.get_xticklabels()] + [t.get_text() for t in plot.get_legend().get_texts()]
        assert max(len(t.split("=", 1)[-1]) for t in texts) <= MAX_LABEL, texts
        assert plot.get_position().height > 0.45, (axis, plot.get_position().height)
