"""PNG plots of a run: breakdown bars per GPU type, and a timeline of the run (all its iterations).

Uses matplotlib's Agg canvas directly (no pyplot, no display, no global backend switch).
"""

from __future__ import annotations

import os
import re
from collections.abc import Sequence

import numpy as np
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
from matplotlib.patches import Patch

from hetero_ns3.plan.dag import COMPUTE, ExecutionPlan, TaskTimes
from hetero_ns3.results.breakdown import TERMS
from hetero_ns3.results.categories import category_class
from hetero_ns3.results.meta import GpuMeta
from hetero_ns3.results.summary import Summary

TERM_COLORS = {
    "compute_s": "#4c72b0",
    "exposed_intra_node_comm_s": "#55a868",
    "exposed_inter_node_comm_s": "#c44e52",
    "pipeline_bubble_s": "#ccb974",
    "straggler_wait_s": "#8172b2",
    "other_s": "#8c8c8c",
}


_PALETTE = ["#4c72b0", "#dd8452", "#55a868", "#c44e52", "#8172b2", "#937860", "#da8bc3", "#8c8c8c", "#ccb974"]
_PASSES = ("fwd", "bwd", "opt", "recompute", "forward", "backward", "optimizer")
#: Fixed colors of the usual keys, so that every run's timeline reads the same way.
KEY_COLORS = {
    "fwd": "#4c72b0",
    "forward": "#4c72b0",
    "bwd": "#dd8452",
    "backward": "#dd8452",
    "recompute": "#937860",
    "opt": "#8172b2",
    "optimizer": "#8172b2",
    "compute": "#64b5cd",
    "tp": "#55a868",
    "pp": "#ccb974",
    "dp": "#c44e52",
    "ep": "#da8bc3",
    "cp": "#8c8c8c",
    "comm": "#2f4f4f",
}


def _key_color(name: str, k: int) -> str:
    return KEY_COLORS.get(name, _PALETTE[k % len(_PALETTE)])


_STEP = re.compile(r"(?:[a-z0-9_-]+\.)?([FB])\d+\.c\d+\.")
"""The compiler's step labels (``F3.c0.L7.qkv``: forward of microbatch 3, chunk 0; ``B3.c0...``: its
backward), after a job prefix (``a.F3...``) in multi-job runs."""


def _pass_of(label: str) -> str:
    """The pass a compute kernel's label names: its first word (``fwd``, ``opt``...), or for the compiler's
    step labels ``fwd`` / ``bwd`` (``recompute`` for a re-run forward inside a backward step)."""
    m = _STEP.match(label)
    if m is None:
        return re.split(r"[^a-z]", label.lower(), maxsplit=1)[0]
    if m.group(1) == "F":
        return "fwd"
    return "recompute" if ".recompute." in label else "bwd"


def _color_keys(plan: ExecutionPlan, category: np.ndarray, label: np.ndarray) -> tuple[list[str], np.ndarray]:
    """Color key names, and the key index of each task given by its ``category`` and ``label`` ids."""
    names: list[str] = list(plan.categories)
    pass_key = np.full(max(len(plan.labels), 1), -1, dtype=np.int64)
    for i, lab in enumerate(plan.labels):
        word = _pass_of(lab)
        if word in _PASSES:
            if word not in names:
                names.append(word)
            pass_key[i] = names.index(word)
    is_compute = np.array([category_class(c) == "compute" for c in plan.categories] or [False])
    use_pass = is_compute[category] & (pass_key[label] >= 0)
    return names, np.where(use_pass, pass_key[label], category.astype(np.int64))


def _save(fig: Figure, path: str | os.PathLike[str]) -> None:
    FigureCanvasAgg(fig)
    fig.savefig(path, format="png", dpi=100)


def plot_breakdown(summary: Summary, path: str | os.PathLike[str]) -> None:
    """Stacked bars (milliseconds) of the breakdown terms, one bar per GPU type plus the overall mean."""
    rows = [*summary.per_gpu_type.items(), ("overall", summary.overall)]
    fig = Figure(figsize=(max(4.0, 1.2 * len(rows) + 2.5), 3.6))
    ax = fig.add_subplot(1, 1, 1)
    x = np.arange(len(rows))
    bottom = np.zeros(len(rows))
    for term in TERMS:
        vals = np.array([getattr(b, term) for _, b in rows]) * 1e3
        ax.bar(x, vals, bottom=bottom, color=TERM_COLORS[term], label=term.removesuffix("_s").replace("_", " "))
        bottom += vals
    ax.set_xticks(x, [name for name, _ in rows])
    ax.set_ylabel("time per iteration (ms)")
    steady = f" (mean of iterations 2..{summary.iterations})" if summary.iterations > 1 else ""
    ax.set_title(f"iteration {summary.iteration_time_s * 1e3:.3f} ms{steady}: breakdown per GPU type")
    ax.legend(fontsize=7, loc="center left", bbox_to_anchor=(1.0, 0.5))
    fig.tight_layout()
    _save(fig, path)


TIMELINE_RESOLUTION = 4000
"""The timeline draws kernels of one color on one row that are closer than 1/this of the run's span as one
bar: the figure is 900 pixels wide (about 600 for the time axis), so such a gap is under a sixth of a pixel."""


def merge_spans(start: np.ndarray, finish: np.ndarray, gap: float) -> tuple[np.ndarray, np.ndarray]:
    """Union of the intervals ``[start, finish]`` (seconds), joining those that overlap or are at most ``gap``
    apart: (starts, finishes) of the merged spans, in time order. A timeline of millions of kernels draws
    each visible span once instead of every kernel with its own edge lines."""
    if start.size == 0:
        return start.copy(), finish.copy()
    order = np.argsort(start, kind="stable")
    s, f = start[order], finish[order]
    reach = np.maximum.accumulate(f)
    new = np.ones(s.size, dtype=bool)
    new[1:] = s[1:] > reach[:-1] + gap
    first = np.nonzero(new)[0]
    return s[first], np.maximum.reduceat(f, first)


def plot_timeline(
    plan: ExecutionPlan,
    times: TaskTimes,
    meta: Sequence[GpuMeta],
    path: str | os.PathLike[str],
    max_gpus: int = 32,
    iteration_ends: Sequence[float] | np.ndarray | None = None,
) -> None:
    """Gantt chart of kernels: one row per GPU (first ``max_gpus``), colored by category.

    A run of several iterations is drawn whole; ``iteration_ends`` (seconds: when each iteration's
    last task finished) adds a dashed line at the end of every iteration but the last.

    Compute-category kernels whose label starts with a pass name (``fwd``, ``bwd``, ``opt``,
    ``recompute``, ...) get that name as their color key, so forward and backward passes differ. The
    compute stream fills the row; kernels on other streams (e.g. reductions) are a thin band under
    it. Unfinished tasks are left out. Kernels of one color on one row closer than the span /
    :data:`TIMELINE_RESOLUTION` are drawn as one bar (:func:`merge_spans`).
    """
    start, finish = np.asarray(times.start_s, dtype=float), np.asarray(times.finish_s, dtype=float)
    n_gpus = min(len(plan.gpus), max_gpus)
    keep = (plan.kind == COMPUTE) & np.isfinite(finish) & (finish > start) & (plan.gpu < n_gpus)
    fig = Figure(figsize=(9.0, 1.0 + 0.3 * n_gpus))
    ax = fig.add_subplot(1, 1, 1)
    scale = 1e3
    idx = np.nonzero(keep)[0]
    keys, key = _color_keys(plan, plan.category[idx], plan.label[idx])
    gpu, side = plan.gpu[idx], (plan.stream[idx] != 0).astype(np.int8)
    order = np.lexsort((side, gpu, key))
    idx, key, gpu, side = idx[order], key[order], gpu[order], side[order]
    cut = np.nonzero((np.diff(key) != 0) | (np.diff(gpu) != 0) | (np.diff(side) != 0))[0] + 1
    used: set[int] = set()
    span = float(finish[idx].max() - start[idx].min()) if idx.size else 0.0
    for part in np.split(np.arange(idx.size), cut) if idx.size else []:
        k, g, thin = int(key[part[0]]), int(gpu[part[0]]), bool(side[part[0]])
        used.add(k)
        t = idx[part]
        lo, hi = merge_spans(start[t], finish[t], span / TIMELINE_RESOLUTION)
        bars = list(zip((lo * scale).tolist(), ((hi - lo) * scale).tolist(), strict=True))
        y, h = (g + 0.22, 0.18) if thin else (g - 0.4, 0.6)
        ax.broken_barh(bars, (y, h), facecolors=_key_color(keys[k], k), edgecolors="white", linewidth=0.4)
    ends = [] if iteration_ends is None else [float(e) for e in iteration_ends]
    for e in ends[:-1]:
        ax.axvline(e * scale, color="black", linestyle="--", linewidth=0.8)
    ax.set_yticks(range(n_gpus), [f"{plan.gpus[g]} ({meta[g].gpu_type})" for g in range(n_gpus)], fontsize=7)
    ax.invert_yaxis()
    ax.set_xlabel("simulated time (ms)")
    more = f" (first {n_gpus} of {len(plan.gpus)} GPUs)" if len(plan.gpus) > n_gpus else ""
    what = f"{len(ends)} iterations (dashed: iteration ends)" if len(ends) > 1 else "one iteration"
    ax.set_title(f"timeline of {what}" + more)
    handles = [Patch(color=_key_color(keys[k], k), label=keys[k]) for k in sorted(used)]
    if handles:
        ax.legend(handles=handles, fontsize=7, loc="center left", bbox_to_anchor=(1.0, 0.5))
    fig.tight_layout()
    _save(fig, path)
