"""HTML page of a validation run (``validation.json`` of ``hetero-ns3 validate --out DIR``).

The page holds the scorecard (:mod:`hetero_ns3.results.scorecard`: within-tolerance counts, MAPE, optimism and the
worst case, per set and case kind, and the held-out cases per GPU type), two figures (each case's error against
its tolerance band; the cumulative distribution of |error| per set) and the case table with a link to each
source. ``hetero-ns3 validate --out DIR`` writes it as ``DIR/validation.html`` after the last case;
``hetero-ns3 report DIR`` renders it again from the JSON (e.g. of a run that was stopped). With
``DIR/baseline.json`` (``validate --baseline``) it adds the cases whose value changed and both scorecards over
the cases the two runs share.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from matplotlib.figure import Figure

from hetero_ns3.errors import ScenarioError
from hetero_ns3.results.scorecard import (
    GroupScore,
    baseline_comparison,
    by_gpu,
    case_kind,
    case_set,
    fmt,
    kind_label,
    scorecard,
    within_change,
)
from hetero_ns3.studies.report import png_uri, template_env

TEMPLATE = "validation.html.j2"
JSON_NAME = "validation.json"
BASELINE_NAME = "baseline.json"
_URL = re.compile(r"https?://[^\s;,)]+")
COLUMNS = ("case", "set", "kind", "GPU types", "metric", "published", "simulated", "error %", "tolerance %", "within")
WITHIN_COLOUR, OUT_COLOUR, PENDING_COLOUR, BAND_COLOUR = "#2a8a4a", "#c0392b", "#999999", "#dddddd"


def read_records(path: Path, what: str = "validation directory") -> list[dict[str, Any]]:
    """The records of ``path`` (a ``validation.json``, or a directory holding one); a clear error naming ``what``
    when it is missing or not a list of cases."""
    file = path / JSON_NAME if path.is_dir() else path
    if not file.is_file():
        raise ScenarioError(
            f"{what} ({str(path)!r}) has no {JSON_NAME}; run `hetero-ns3 validate --out DIR` first and give DIR or "
            f"DIR/{JSON_NAME}"
        )
    try:
        data = json.loads(file.read_text(encoding="utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError) as err:
        raise ScenarioError(
            f"{what} ({str(file)!r}) is not JSON ({err}); give a {JSON_NAME} of hetero-ns3 validate"
        ) from None
    if not isinstance(data, list) or not all(isinstance(r, dict) and "case" in r for r in data):
        raise ScenarioError(
            f"{what} ({str(file)!r}) is not a validation table (a JSON list of cases, as hetero-ns3 validate writes)"
        )
    return data


def _status(r: Mapping[str, Any]) -> str:
    if r.get("failure"):
        return "failed"
    if r.get("simulated") is None or r.get("pending"):
        return "pending"
    return "within" if r.get("within_tolerance") else "out"


def _has_error(r: Mapping[str, Any]) -> bool:
    """The case ran and has an error against its published value (pending cases run with --pending included)."""
    return _status(r) != "failed" and r.get("error_pct") is not None


def _score_row(s: GroupScore) -> dict[str, Any]:
    return {
        "group": s.group, "cases": s.cases, "within": s.within, "failed": s.failed,
        "mape": fmt(s.mape_pct, ".1f"), "median": fmt(s.median_abs_pct, ".1f"),
        "optimism": fmt(s.optimism_pct, "+.1f"), "worst_case": s.worst_case,
        "worst_error": fmt(s.worst_error_pct, "+.1f"),
    }  # fmt: skip


def _order(r: Mapping[str, Any]) -> tuple[str, str, float]:
    e = r.get("error_pct")
    return case_set(r), case_kind(r), float(e) if e is not None else math.inf


def errors_figure(records: Sequence[Mapping[str, Any]]) -> Figure | None:
    """One horizontal bar per case that ran: its error (%), over a grey band of +- its tolerance; green within,
    red out of tolerance, grey when pending. Cases grouped by set and kind, sorted by error inside a group."""
    ran = sorted((r for r in records if _has_error(r)), key=_order)
    if not ran:
        return None
    n = len(ran)
    fig = Figure(figsize=(10, 1.2 + 0.16 * n))
    ax = fig.add_subplot()
    ys = list(range(n))[::-1]
    tol = [float(r["tolerance_pct"]) for r in ran]
    ax.barh(ys, [2 * t for t in tol], left=[-t for t in tol], height=0.8, color=BAND_COLOUR)
    colours = [
        PENDING_COLOUR if r.get("pending") else WITHIN_COLOUR if r.get("within_tolerance") else OUT_COLOUR for r in ran
    ]
    ax.barh(ys, [float(r["error_pct"]) for r in ran], height=0.5, color=colours)
    labels = [f"{r['case']} [{case_set(r)}, {kind_label(r)}]" for r in ran]
    ax.set_yticks(ys, labels, fontsize=6)
    ax.axvline(0.0, color="#444444", lw=0.8)
    ax.set_xlabel("error (%): simulated / published - 1")
    ax.set_ylim(-0.8, n - 0.2)
    ax.grid(axis="x", alpha=0.3)
    fig.tight_layout()
    return fig


def cdf_figure(records: Sequence[Mapping[str, Any]]) -> Figure | None:
    """Cumulative share of the counted cases of each set whose |error| is at most x."""
    fig = Figure(figsize=(7, 3.6))
    ax = fig.add_subplot()
    drawn = False
    for s in ("calibration", "held-out"):
        errs = sorted(
            abs(float(r["error_pct"])) for r in records if case_set(r) == s and not r.get("pending") and _has_error(r)
        )
        if not errs:
            continue
        ax.step(errs, [(i + 1) / len(errs) for i in range(len(errs))], where="post", label=f"{s} ({len(errs)})")
        drawn = True
    if not drawn:
        return None
    ax.set_xlabel("|error| (%)")
    ax.set_ylabel("share of cases")
    ax.set_ylim(0, 1.02)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8, loc="lower right")
    fig.tight_layout()
    return fig


def _case_row(r: Mapping[str, Any]) -> dict[str, Any]:
    status = _status(r)
    within = {"within": "yes", "out": "NO", "failed": "FAILED", "pending": "pending"}[status]
    source = str(r.get("source") or "")
    url = _URL.search(source)
    cells = [
        r["case"], case_set(r), kind_label(r), r.get("gpu_types") or "", r.get("metric", ""),
        fmt(r.get("published"), ".5g", ""), fmt(r.get("simulated"), ".5g", ""), fmt(r.get("error_pct"), "+.2f", ""),
        fmt(r.get("tolerance_pct"), ".0f", ""), within if not r.get("failure") else f"FAILED: {r['failure']}",
    ]  # fmt: skip
    if r.get("extrapolated_from") and not r.get("failure"):
        cells[-1] += f" (extrapolated from global_batch {r['extrapolated_from']})"
    text = source if len(source) <= 90 else source[:87] + "..."
    return {"status": status, "cells": cells, "source": text, "source_url": url.group(0) if url else None}


def validation_context(root: Path) -> dict[str, Any]:
    records = read_records(root)
    figures = [(name, png_uri(fig)) for name, fig in (
        ("Error per case", errors_figure(records)),
        ("Cumulative |error| per set", cdf_figure(records)),
    ) if fig is not None]  # fmt: skip
    statuses = [_status(r) for r in records]
    facts = [
        ("cases in the table", str(len(records))),
        ("within tolerance", str(statuses.count("within"))),
        ("out of tolerance", str(statuses.count("out"))),
        ("could not be simulated", str(statuses.count("failed"))),
        ("pending (not counted)", str(sum(1 for r in records if r.get("pending")))),
        ("simulation wall time, summed over cases", f"{sum(float(r.get('wall_s') or 0.0) for r in records):.0f} s"),
    ]
    applied = sorted({str(r["set"]) for r in records if r.get("set")})
    if applied:
        facts.append(("--set on the training cases (a what-if, not the shipped model)", " | ".join(applied)))
    return {
        "title": f"Validation {root.resolve().name}",
        "baseline": _baseline_context(root, records),
        "facts": facts,
        "scorecard": [_score_row(s) for s in scorecard(records)],
        "gpus": [_score_row(s) for s in by_gpu(records)],
        "figures": figures,
        "columns": COLUMNS,
        "cases": [_case_row(r) for r in sorted(records, key=_order)],
        "json_name": JSON_NAME,
    }


def _baseline_context(root: Path, records: Sequence[Mapping[str, Any]]) -> dict[str, Any] | None:
    """The comparison with ``root/baseline.json`` (written by ``validate --baseline``), or None without one."""
    if not (root / BASELINE_NAME).is_file():
        return None
    cmp = baseline_comparison(records, read_records(root / BASELINE_NAME, "baseline"))
    changes = [
        [c.case, fmt(c.before, ".5g", ""), fmt(c.after, ".5g", ""), fmt(c.error_before_pct, "+.2f", ""),
         fmt(c.error_after_pct, "+.2f", ""), within_change(c)]
        for c in cmp.changes
    ]  # fmt: skip
    return {
        "common": cmp.common,
        "changes": changes,
        "before": [_score_row(x) for x in cmp.before],
        "now": [_score_row(x) for x in cmp.now],
    }


def render_validation(root: str | Path, out: str | Path | None = None) -> Path:
    """Render the validation page of ``root`` (a directory with ``validation.json``) to ``out`` (default:
    ``root/validation.html``); written atomically."""
    from hetero_ns3.results import atomic

    root = Path(root)
    dest = Path(out) if out else root / "validation.html"
    html = template_env().get_template(TEMPLATE).render(**validation_context(root))
    return atomic.write_text(dest, html)
