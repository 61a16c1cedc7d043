"""Self-contained HTML reports (jinja2) of a run directory or a study directory.

Images are embedded as base64 PNG, so the page can be mailed or archived alone. A run report has
the scenario summary, the breakdown per GPU type, the run's plots, the slowest flows, the busiest
GPU ports over time (:mod:`hetero_ns3.results.links`) and a link to its Perfetto trace. A study
report has the study table and one figure per axis: iteration time (or bus bandwidth, for collective
studies) against the axis value, one line per combination of the other axes, and the breakdown.
"""

from __future__ import annotations

import base64
import io
import json
import math
import os
from pathlib import Path
from typing import Any
from urllib.parse import quote

import numpy as np
import pandas as pd
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

from hetero_ns3.errors import ScenarioError
from hetero_ns3.results.breakdown import TERMS

TEMPLATE = "report.html.j2"
MAX_GROUPS = 12


def template_env():
    import jinja2

    return jinja2.Environment(
        loader=jinja2.FileSystemLoader(str(Path(__file__).with_name("templates"))),
        autoescape=jinja2.select_autoescape(["html", "j2"]),
        undefined=jinja2.StrictUndefined,
    )


def png_uri(fig: Figure) -> str:
    buf = io.BytesIO()
    FigureCanvasAgg(fig)
    fig.savefig(buf, format="png", dpi=90)
    return "data:image/png;base64," + base64.b64encode(buf.getvalue()).decode()


def _file_png(path: Path) -> str | None:
    return "data:image/png;base64," + base64.b64encode(path.read_bytes()).decode() if path.is_file() else None


def _fmt(v: Any) -> str:
    if isinstance(v, float):
        if math.isnan(v):
            return ""
        return f"{v:.6g}"
    return "" if v is None or v is pd.NA else str(v)


def _table(df: pd.DataFrame) -> dict[str, Any]:
    return {"columns": [str(c) for c in df.columns], "rows": [[_fmt(v) for v in r] for r in df.itertuples(index=False)]}


# -- run ---------------------------------------------------------------------------------------
def _read_flows(root: Path) -> pd.DataFrame | None:
    if (root / "flows.parquet").is_file():
        return pd.read_parquet(root / "flows.parquet")
    if (root / "flows.csv").is_file():
        return pd.read_csv(root / "flows.csv")
    return None


def _ports_figure(series: pd.DataFrame) -> str:
    fig = Figure(figsize=(9, 3.6))
    ax = fig.add_subplot()
    t_ms = series["time_s"].to_numpy() * 1e3
    for col in series.columns[1:]:
        ax.plot(t_ms, series[col].to_numpy(), label=col, lw=1.2)
    ax.set_xlabel("simulated time (ms)")
    ax.set_ylabel("rate (Gbit/s)")
    ax.legend(fontsize=7, ncol=2, loc="upper right")
    ax.grid(alpha=0.3)
    fig.tight_layout()
    return png_uri(fig)


def _href(target: Path, page_dir: Path | None) -> str:
    """A link from a page in ``page_dir`` (None: the run directory itself) to ``target``, relative so that
    the page and the run directory can move together."""
    if page_dir is None:
        return quote(target.name)
    return quote(Path(os.path.relpath(target.resolve(), page_dir.resolve())).as_posix())


def run_context(root: Path, top: int = 15, page_dir: Path | None = None) -> dict[str, Any]:
    """What the template shows of run directory ``root``; ``page_dir``: where the page is written (links to
    the run's files are relative to it; None: inside ``root``)."""
    summary = json.loads((root / "summary.json").read_text(encoding="utf-8"))
    scen_path = root / "scenario.resolved.json"
    scen = json.loads(scen_path.read_text(encoding="utf-8")) if scen_path.is_file() else {}
    facts: list[tuple[str, str]] = [("status", summary.get("status", "")), ("reason", summary.get("reason", ""))]
    run = summary.get("run") or {}
    if "model" in scen:
        m, p = scen["model"], scen.get("parallelism", {})
        facts += [
            ("model", f"{m.get('name')} ({m.get('layers')} layers, hidden {m.get('hidden')}, seq {m.get('seq_len')})"),
            ("parallelism", f"TP {p.get('tp')} x PP {p.get('pp')} x DP {p.get('dp') or 'auto'}, "
             f"global batch {p.get('global_batch')}, micro batch {p.get('micro_batch')}, {p.get('schedule')}"),
            ("cluster", str(scen.get("cluster", {}).get("topology"))),
        ]  # fmt: skip
    if "collective" in scen:
        facts += [("collective", json.dumps(scen["collective"])), ("cluster", json.dumps(scen.get("cluster")))]
    facts += [("backend", str(run.get("backend", ""))), ("seed", str(run.get("seed", "")))]
    it = summary.get("iteration_time_s")
    if it is not None:
        facts.append(("iteration time", f"{it * 1e3:.4f} ms"))
    if "mfu" in run:
        facts.append(("MFU", f"{100 * run['mfu']:.2f} %"))
    coll = summary.get("collective")
    if coll:
        facts.append(("time / algbw / busbw", f"{coll['time_s'] * 1e6:.2f} us / {coll['algbw_GBps']:.2f} / "
                      f"{coll['busbw_GBps']:.2f} GB/s ({coll['algo']}/{coll['protocol']}, {coll['channels']} ch)"))  # fmt: skip
    bd = summary.get("breakdown") or {}
    breakdown = None
    if bd.get("per_gpu_type"):
        rows = [
            {"GPU type": g, "GPUs": v.get("n_gpus", ""), **{t: v.get(t, math.nan) * 1e3 for t in TERMS}}
            for g, v in bd["per_gpu_type"].items()
        ]
        rows.append({"GPU type": "overall (mean)", "GPUs": "", **{t: bd["overall"][t] * 1e3 for t in TERMS}})
        breakdown = _table(pd.DataFrame(rows).rename(columns={t: t.removesuffix("_s") + " (ms)" for t in TERMS}))
    plots = [
        (title, uri)
        for title, uri in (
            ("Breakdown plot", _file_png(root / "plots" / "breakdown.png")),
            ("Timeline", _file_png(root / "plots" / "timeline.png")),
        )
        if uri
    ]
    flows = _read_flows(root)
    slowest = ports_table = ports_png = None
    if flows is not None and len(flows):
        from hetero_ns3.results.links import busiest_ports

        cols = [
            c for c in ("id", "src", "dst", "size_bytes", "start_s", "fct_s", "category", "collective") if c in flows
        ]
        slowest = _table(flows.sort_values("fct_s", ascending=False).head(top)[cols])
        ports, series = busiest_ports(flows, top=8)
        if len(ports):
            ports_table = _table(ports)
            ports_png = _ports_figure(series)
    return {
        "kind": "run",
        "title": f"Run {root.name}",
        "facts": facts,
        "breakdown": breakdown,
        "plots": plots,
        "slowest": slowest,
        "ports": ports_table,
        "ports_png": ports_png,
        "trace": _href(root / "trace.json", page_dir) if (root / "trace.json").is_file() else None,
    }


# -- study -------------------------------------------------------------------------------------
def _x_values(values: pd.Series) -> tuple[np.ndarray, list[str] | None, bool]:
    """Numeric x (and whether to use a log scale), or category positions with their labels."""
    if pd.api.types.is_numeric_dtype(values) and not pd.api.types.is_bool_dtype(values):
        uniq = np.sort(values.dropna().unique().astype(float))
        log = len(uniq) > 2 and uniq.min() > 0 and uniq.max() / uniq.min() >= 100
        return uniq, None, bool(log)
    labels = list(dict.fromkeys(str(v) for v in values))
    return np.arange(len(labels), dtype=float), labels, False


#: Longest axis value written out on a tick or in a legend; longer ones (a ``faults.gpus`` table as JSON) are
#: shortened in the middle, the study table above the figures has them whole.
MAX_LABEL = 28


def _short(text: str, n: int = MAX_LABEL) -> str:
    return text if len(text) <= n else f"{text[: n // 2 - 1]}...{text[-(n - n // 2 - 2) :]}"


def _axis_figure(df: pd.DataFrame, axis: str, others: list[str], kind: str) -> str:
    return png_uri(axis_figure(df, axis, others, kind))


def axis_figure(df: pd.DataFrame, axis: str, others: list[str], kind: str) -> Figure:
    """The two panels of one axis: the metric against the axis (a line per combination of the other axes)
    and the breakdown (time per call for collective studies) averaged over the other axes."""
    ok = df[df["status"] == "ok"]
    xs, labels, log = _x_values(df[axis])
    pos = (lambda v: labels.index(str(v))) if labels is not None else float  # noqa: E731
    metric, ylabel, scale = (
        ("busbw_GBps", "bus bandwidth (GB/s)", 1.0) if kind == "collective" else ("iteration_time_s", "iteration time (ms)", 1e3)
    )  # fmt: skip
    fig = Figure(figsize=(12, 3.8))
    ax = fig.add_subplot(1, 2, 1)
    groups = list(ok.groupby(others, dropna=False, sort=True)) if others else [((), ok)]
    for key, g in groups[:MAX_GROUPS]:
        key = key if isinstance(key, tuple) else (key,)
        g = g.sort_values(axis, key=lambda s: s.map(pos))
        name = ", ".join(f"{o}={_short(str(v))}" for o, v in zip(others, key, strict=True)) or "all"
        ax.plot([pos(v) for v in g[axis]], g[metric] * scale, marker="o", label=name)
    ax.set_xlabel(axis)
    ax.set_ylabel(ylabel)
    ticks = [_short(t) for t in labels] if labels is not None else None
    if ticks is not None:
        ax.set_xticks(xs, ticks, rotation=30 if max(map(len, ticks)) > 6 else 0)
    elif log:
        ax.set_xscale("log", base=2)
    ax.grid(alpha=0.3)
    if len(groups) > 1:
        ax.legend(fontsize=7)
    ax2 = fig.add_subplot(1, 2, 2)
    if kind == "collective":
        for _key, g in groups[:MAX_GROUPS]:
            g = g.sort_values(axis, key=lambda s: s.map(pos))
            ax2.plot([pos(v) for v in g[axis]], g["time_s"] * 1e6, marker="o")
        ax2.set_ylabel("time (us)")
        ax2.set_yscale("log")
        if log:
            ax2.set_xscale("log", base=2)
    else:
        mean = ok.groupby(axis)[list(TERMS)].mean() * 1e3
        bottom = np.zeros(len(mean))
        at = [pos(v) for v in mean.index]
        width = 0.6 if labels is not None or len(at) < 2 else 0.6 * float(np.min(np.diff(np.sort(at))))
        for term in TERMS:
            vals = mean[term].to_numpy()
            ax2.bar(at, vals, bottom=bottom, width=width, label=term.removesuffix("_s"))
            bottom += vals
        ax2.set_ylabel("breakdown, mean over other axes (ms)")
        ax2.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0))
    ax2.set_xlabel(axis)
    if ticks is not None:
        ax2.set_xticks(xs, ticks, rotation=30 if max(map(len, ticks)) > 6 else 0)
    ax2.grid(alpha=0.3)
    fig.tight_layout()
    return fig


def study_context(root: Path) -> dict[str, Any]:
    from hetero_ns3.results.study_reader import load_study

    df = load_study(root)
    axes = [a for a in df.attrs.get("axes", []) if a in df.columns]
    kind = df.attrs.get("kind", "training")
    if kind == "collective":
        show = ["status", "time_s", "algbw_GBps", "busbw_GBps", "algo", "protocol", "channels"]
    else:
        show = ["status", "iteration_time_s", "mfu", "tokens_per_s", *TERMS]
    cols = ["point_id", *axes, *[c for c in show if c in df.columns], "backend", "wall_s"]
    figures = []
    for a in axes:
        if df[a].nunique(dropna=False) < 2 or not (df["status"] == "ok").any():
            continue
        figures.append((a, _axis_figure(df, a, [o for o in axes if o != a and df[o].nunique() > 1], kind)))
    failed = df[df["status"] != "ok"][["point_id", *axes, "status", "error"]]
    manifest = root / "study.json"
    desc = json.loads(manifest.read_text(encoding="utf-8")).get("description", "") if manifest.is_file() else ""
    return {
        "kind": "study",
        "title": f"Study {df.attrs.get('name', root.name)}",
        "description": desc,
        "facts": [
            ("points", str(len(df))),
            ("ok", str(int((df["status"] == "ok").sum()))),
            ("failed or missing", str(int((df["status"] != "ok").sum()))),
            ("axes", ", ".join(axes)),
            ("kind", kind),
        ],
        "study_table": _table(df[cols]),
        "figures": figures,
        "failed": _table(failed) if len(failed) else None,
    }


def render_report(path: str | Path, out: str | Path | None = None, top: int = 15) -> Path:
    """Render the report of a run or study directory to ``out`` (default: ``<dir>/report.html``), or the page of a
    validation directory (:func:`~hetero_ns3.studies.validation_report.render_validation`; default
    ``<dir>/validation.html``)."""
    root = Path(path)
    dest = Path(out) if out else root / "report.html"
    if (root / "validation.json").is_file() and not (root / "summary.json").is_file():
        from hetero_ns3.studies.validation_report import render_validation

        return render_validation(root, out)
    if (root / "study.parquet").is_file():
        ctx = study_context(root)
    elif (root / "summary.json").is_file():
        ctx = run_context(root, top, dest.parent)
    else:
        from hetero_ns3.results.study_reader import unfinished_study_hint

        hint = unfinished_study_hint(root) if (root / "study.json").is_file() else "give one of those"
        raise ScenarioError(
            f"{root} is neither a run directory (summary.json), a study directory (study.parquet) nor a validation "
            f"directory (validation.json); {hint}"
        )
    html = template_env().get_template(TEMPLATE).render(**ctx)
    from hetero_ns3.results import atomic

    return atomic.write_text(dest, html)
