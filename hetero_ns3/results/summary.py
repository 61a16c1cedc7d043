"""The numbers of a run: iteration time and breakdown per GPU, per GPU type and overall.

A run may simulate several training iterations (``run.iterations``; the plan then carries the
iteration index of each task). Iteration ``k`` ends when its last task finishes (``end_k``); its
time is ``end_k - end_{k-1}``, with ``end_{-1}`` the first start of the run (0 in practice).
The iteration time reported for N >= 2 iterations is the mean over iterations 2..N, the steady
state: the first one starts from an idle cluster (no overlap with a previous iteration's pipeline
drain), so it is not representative of a long training run. The breakdown is attributed over the
same steady-state window ``[end_0, end_{N-1}]`` and divided by ``N - 1``, so that its terms still
sum to the iteration time.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from hetero_ns3.errors import SimulationError
from hetero_ns3.plan.dag import FLOW, ExecutionPlan, TaskTimes
from hetero_ns3.results.breakdown import TERMS, Breakdown, attribute
from hetero_ns3.results.meta import ENDPOINT_TYPE, GpuMeta, GpuMetaLike, resolve_gpu_meta


@dataclass(frozen=True)
class Summary:
    """What ``summary.json`` holds and the CLI prints. Times in seconds."""

    iteration_time_s: float
    """Time of one iteration: for one iteration, last finish minus first start over all tasks;
    for N >= 2, the mean of ``iteration_times_s[1:]`` (steady state, see the module docstring)."""
    per_gpu: dict[str, Breakdown]
    per_gpu_type: dict[str, Breakdown]
    """Mean over the GPUs of each type."""
    overall: Breakdown
    """Mean over all GPUs (sums to the iteration time)."""
    overall_max: Breakdown
    """Per-term maximum over all GPUs (does not sum to anything)."""
    gpu_types: dict[str, str]
    """GPU name -> GPU type."""
    counts: dict[str, Any] = field(default_factory=dict)
    iteration_times_s: tuple[float, ...] = ()
    """Time of each simulated iteration, ``end_k - end_{k-1}``; sums to ``makespan_s``."""
    makespan_s: float = 0.0
    """Last finish minus first start over all tasks of the run (all iterations)."""

    @property
    def iterations(self) -> int:
        return max(1, len(self.iteration_times_s))

    def to_dict(self) -> dict[str, Any]:
        n_per_type: dict[str, int] = {}
        for t in self.gpu_types.values():
            n_per_type[t] = n_per_type.get(t, 0) + 1
        return {
            "iteration_time_s": self.iteration_time_s,
            "iterations": self.iterations,
            "iteration_times_s": list(self.iteration_times_s) or [self.iteration_time_s],
            "makespan_s": self.makespan_s,
            "breakdown": {
                "per": "iteration (steady-state mean over iterations 2..N)" if self.iterations > 1 else "iteration",
                "terms": list(TERMS),
                "overall": self.overall.as_dict(),
                "overall_max": self.overall_max.as_dict(),
                "per_gpu_type": {t: {**b.as_dict(), "n_gpus": n_per_type[t]} for t, b in self.per_gpu_type.items()},
                "per_gpu": {g: {**b.as_dict(), "gpu_type": self.gpu_types[g]} for g, b in self.per_gpu.items()},
            },
            "counts": dict(self.counts),
        }


def summary_columns(plan: ExecutionPlan) -> ExecutionPlan:
    """``plan`` with only the columns :func:`summarize` reads: ``duration_s``, ``priority`` and ``channel``
    become read-only placeholders of no memory (NaN, 0, -1 for every task), so that a caller holding only
    this one frees those three arrays (11 bytes per task) before the replay needs its largest memory
    (``validation.simulate_scenario``). The summary of either plan is the same
    (tests/unit/test_results_blocks.py)."""
    n = len(plan)
    return dataclasses.replace(
        plan,
        duration_s=np.broadcast_to(np.float64(np.nan), (n,)),
        priority=np.broadcast_to(np.int8(0), (n,)),
        channel=np.broadcast_to(np.int16(-1), (n,)),
    )


#: Tasks per block in :func:`traffic_by_category` (temporaries of one block, not of all flows).
_BLOCK = 1 << 20


def traffic_by_category(plan: ExecutionPlan, meta: Sequence[GpuMeta]) -> dict[str, dict[str, int]]:
    """Per flow category: number of flows and bytes, split into intra-node and inter-node bytes (integer
    sums over blocks of tasks: the same figures as over all flows at once)."""
    _, node = np.unique(np.asarray([str(m.node) for m in meta], dtype=object), return_inverse=True)
    sums: dict[int, list[int]] = {}
    for lo in range(0, len(plan), _BLOCK):
        hi = lo + _BLOCK
        flows = np.flatnonzero(plan.kind[lo:hi] == FLOW)
        if not flows.size:
            continue
        intra = node[plan.gpu[lo:hi][flows]] == node[plan.dst[lo:hi][flows]]
        cats = plan.category[lo:hi][flows]
        sizes = plan.size_bytes[lo:hi][flows]
        for c in np.unique(cats).tolist():
            sel = cats == c
            acc = sums.setdefault(c, [0, 0, 0, 0])
            acc[0] += int(sel.sum())
            acc[1] += int(sizes[sel].sum())
            acc[2] += int(sizes[sel & intra].sum())
            acc[3] += int(sizes[sel & ~intra].sum())
    keys = ("flows", "bytes", "intra_node_bytes", "inter_node_bytes")
    return {plan.categories[c]: dict(zip(keys, sums[c], strict=True)) for c in sorted(sums)}


def plan_counts(
    plan: ExecutionPlan, times: TaskTimes | None = None, meta: Sequence[GpuMeta] | None = None
) -> dict[str, Any]:
    """Task, flow, GPU and byte counts of a plan, finished tasks if ``times`` is given, and traffic per
    category (``traffic``) if ``meta`` is given."""
    flows = plan.kind == FLOW
    out: dict[str, Any] = {
        "tasks": len(plan),
        "compute_tasks": int(len(plan) - np.count_nonzero(flows)),
        "flows": int(np.count_nonzero(flows)),
        "gpus": len(plan.gpus) if meta is None else sum(m.gpu_type != ENDPOINT_TYPE for m in meta),
        "flow_bytes": int(np.sum(plan.size_bytes, where=flows)),  # (no array of the flows' sizes)
    }
    if times is not None:
        out["tasks_finished"] = int(np.count_nonzero(np.isfinite(times.finish_s)))
    if meta is not None:
        out["traffic"] = traffic_by_category(plan, meta)
    return out


def iteration_ends_s(finish_s: np.ndarray, iteration: np.ndarray) -> np.ndarray:
    """When each iteration's last task finishes (seconds), for iteration indices 0..max."""
    iteration = np.asarray(iteration, dtype=np.int64)
    if iteration.size == 0:
        return np.zeros(0)
    if iteration.min() < 0:
        raise SimulationError("iteration indices must be >= 0")
    ends = np.full(int(iteration.max()) + 1, -np.inf)
    np.maximum.at(ends, iteration, np.asarray(finish_s, dtype=float))
    if not np.isfinite(ends).all():
        raise SimulationError("some iteration has no task (iteration indices must be 0..N-1)")
    return ends


def _check_iteration(plan: ExecutionPlan, iteration: np.ndarray | None) -> np.ndarray | None:
    if iteration is None:
        return None
    iteration = np.asarray(iteration)
    if iteration.shape != (len(plan),):
        raise SimulationError(f"iteration index has shape {iteration.shape}, the plan has {len(plan)} tasks")
    return iteration


def summarize(
    plan: ExecutionPlan,
    times: TaskTimes,
    gpu_meta: Mapping[str, GpuMetaLike] | None,
    iteration: np.ndarray | None = None,
) -> Summary:
    """Iteration time and breakdown of a finished run (pure; raises SimulationError on NaN times).

    ``iteration`` (one index per task, 0..N-1) marks a run of N iterations: the iteration time
    and the breakdown are then per steady-state iteration (module docstring).
    """
    meta = resolve_gpu_meta(plan.gpus, gpu_meta)
    iteration = _check_iteration(plan, iteration)
    n_iter, window, it_times, makespan = 1, None, (), 0.0
    if len(plan) and iteration is not None:
        if not np.isfinite(times.finish_s).all():
            raise SimulationError("breakdown: some tasks have no finish time (NaN); a partial run has no breakdown")
        t0 = float(np.min(times.start_s))
        ends = iteration_ends_s(times.finish_s, iteration)
        n_iter = ends.size
        it_times = tuple(np.diff(np.r_[t0, ends]).tolist())
        if n_iter > 1:
            window = float(ends[0])
    it, mat = attribute(plan, times, meta, window)
    if n_iter > 1:
        it, mat = it / (n_iter - 1), mat / (n_iter - 1)
    if len(plan):
        makespan = float(np.max(times.finish_s) - np.min(times.start_s))
    keep = [i for i, m in enumerate(meta) if m.gpu_type != ENDPOINT_TYPE]  # GPUs, not NVLS endpoints
    gpus = [plan.gpus[i] for i in keep]
    mat = mat[keep]
    types = [meta[i].gpu_type for i in keep]
    per_type: dict[str, Breakdown] = {}
    for t in dict.fromkeys(types):
        rows = mat[[i for i, x in enumerate(types) if x == t]]
        per_type[t] = Breakdown.from_array(rows.mean(axis=0))
    zero = np.zeros(len(TERMS))
    return Summary(
        iteration_time_s=it,
        per_gpu={g: Breakdown.from_array(mat[i]) for i, g in enumerate(gpus)},
        per_gpu_type=per_type,
        overall=Breakdown.from_array(mat.mean(axis=0) if len(mat) else zero),
        overall_max=Breakdown.from_array(mat.max(axis=0) if len(mat) else zero),
        gpu_types=dict(zip(gpus, types, strict=True)),
        counts=plan_counts(plan, times, meta),
        iteration_times_s=it_times or (it,),
        makespan_s=makespan,
    )


_SHORT = {
    "compute_s": "compute",
    "exposed_intra_node_comm_s": "intra-comm",
    "exposed_inter_node_comm_s": "inter-comm",
    "pipeline_bubble_s": "bubble",
    "straggler_wait_s": "straggler",
    "other_s": "other",
}


def _fmt_time(s: float) -> str:
    a = abs(s)
    if a >= 1.0 or a == 0.0:
        return f"{s:.3f} s"
    if a >= 1e-3:
        return f"{s * 1e3:.3f} ms"
    return f"{s * 1e6:.3f} us"


def format_summary(summary: Summary) -> str:
    """A plain-text table: iteration time, then each term per GPU type and overall (ms and %)."""
    it = summary.iteration_time_s
    n_gpus = summary.counts.get("gpus", len(summary.per_gpu))
    if summary.iterations > 1:
        each = ", ".join(_fmt_time(t) for t in summary.iteration_times_s[:8])
        more = ", ..." if summary.iterations > 8 else ""
        lines = [
            f"iteration time: {_fmt_time(it)}  (mean of iterations 2..{summary.iterations}; {n_gpus} GPUs)",
            f"{summary.iterations} iterations in {_fmt_time(summary.makespan_s)}: {each}{more}",
            "breakdown per steady-state iteration:",
        ]
    else:
        lines = [f"iteration time: {_fmt_time(it)}  ({n_gpus} GPUs)"]
    rows = [*summary.per_gpu_type.items(), ("overall (mean)", summary.overall)]
    width = max(len(r[0]) for r in rows)
    head = f"{'GPU type':<{width}}" + "".join(f"{_SHORT[t]:>20}" for t in TERMS)
    lines += [head, "-" * len(head)]
    for name, b in rows:
        cells = []
        for t in TERMS:
            v = getattr(b, t)
            pct = 100.0 * v / it if it > 0 else 0.0
            cells.append(f"{v * 1e3:>11.3f}ms {pct:5.1f}%")
        lines.append(f"{name:<{width}}" + "".join(f"{c:>20}" for c in cells))
    return "\n".join(lines)
