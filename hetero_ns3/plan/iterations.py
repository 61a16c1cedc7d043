"""Several training iterations in one plan: repeat a lowered one-iteration ExecutionPlan N times.

The iteration rule (what real training does, per GPU): a GPU begins iteration k+1 only once
everything it does in iteration k is over. In Megatron-style training loops a rank runs its
optimizer step (and, with ZeRO-1, the parameter all-gather that follows it) before the next
forward pass; its kernels on every stream, the flows it sends and the collectives it takes part
in all belong to the step it is in.

In the plan this is a dependency, not a new task. For each GPU ``g`` (a flow belongs to its
sending GPU, as ``ExecutionPlan.gpu`` says):

* the **entries** of ``g`` are its tasks with no dependency on another task of ``g`` in the same
  iteration (the first kernel of each stream, receive-side entry tasks fed only by other GPUs, ...);
* the **sinks** of ``g`` are its tasks on which no other task of ``g`` in the same iteration
  depends (the last kernel of each stream, the exits of its last collectives, send-side exits ...).

Iteration k+1's entries of ``g`` depend on all of iteration k's sinks of ``g``. Every task of
``g`` is reachable from one of its entries and reaches one of its sinks through tasks of ``g``
(follow same-GPU dependencies; ids strictly decrease), so *every* task of ``g`` in iteration k+1
starts after *every* task of ``g`` in iteration k has finished. In particular the builder's
stream semantics hold across iterations: on each (gpu, stream) the compute tasks stay in order.
Different GPUs are not synchronised beyond what the plan's own flows and collectives impose, so
iteration k+1 can begin on a pipeline's first stage while the last stage is still finishing
iteration k, as it does on a real cluster.

Iteration k's tasks are a copy of the one-iteration plan with ids offset by ``k * n``; labels and
categories are shared. All of it is numpy on whole arrays: O(N * (n + deps) + N * sum_g E_g S_g)
time and memory, where ``E_g`` and ``S_g`` (entries and sinks of ``g``) are a handful each.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

import numpy as np

from hetero_ns3.errors import PlanningError
from hetero_ns3.plan.dag import ExecutionPlan

_INT32_MAX = np.iinfo(np.int32).max


@dataclass(frozen=True)
class RepeatedPlan:
    """A plan of ``iterations`` copies of one iteration, and the iteration index of each task."""

    plan: ExecutionPlan
    iteration: np.ndarray
    """int32, one per task: 0 for the first iteration's tasks, ..., ``iterations - 1``."""
    iterations: int
    tasks_per_iteration: int


def _ranges(starts: np.ndarray, lengths: np.ndarray) -> np.ndarray:
    """Concatenation of ``arange(s, s + l)`` for each (s, l), without a Python loop."""
    total = int(lengths.sum())
    if total == 0:
        return np.zeros(0, dtype=np.int64)
    offsets = np.cumsum(lengths) - lengths  # where each range begins in the output
    return np.repeat(starts - offsets, lengths) + np.arange(total, dtype=np.int64)


def gpu_entries_and_sinks(plan: ExecutionPlan) -> tuple[np.ndarray, np.ndarray]:
    """Boolean masks (entry, sink) per task: no dependency on / no dependent from its own GPU."""
    n = len(plan)
    owner = np.repeat(np.arange(n, dtype=np.int64), np.diff(plan.dep_ptr))
    dep = plan.dep_idx.astype(np.int64)
    same = plan.gpu[dep] == plan.gpu[owner]
    entry = np.ones(n, dtype=bool)
    entry[owner[same]] = False
    sink = np.ones(n, dtype=bool)
    sink[dep[same]] = False
    return entry, sink


def boundary_deps(plan: ExecutionPlan) -> tuple[np.ndarray, np.ndarray]:
    """The cross-iteration dependencies of one iteration boundary as (entry ids, sink ids) pairs.

    Each entry task of GPU ``g`` (in the next iteration) is paired with every sink of ``g`` (in
    the previous one); pairs are grouped by entry in id order, sinks in id order.
    """
    entry, sink = gpu_entries_and_sinks(plan)
    n_gpus = len(plan.gpus)
    sink_ids = np.nonzero(sink)[0]
    sink_ids = sink_ids[np.argsort(plan.gpu[sink_ids], kind="stable")]
    per_gpu = np.bincount(plan.gpu[sink_ids], minlength=n_gpus).astype(np.int64)
    first = np.cumsum(per_gpu) - per_gpu
    entry_ids = np.nonzero(entry)[0]
    lengths = per_gpu[plan.gpu[entry_ids]]
    pos = _ranges(first[plan.gpu[entry_ids]], lengths)
    return np.repeat(entry_ids, lengths), sink_ids[pos]


def _next_iteration_csr(plan: ExecutionPlan) -> tuple[np.ndarray, np.ndarray]:
    """CSR (ptr, idx) of an iteration after the first, with ids relative to its own first task.

    Each task keeps its own dependencies (relative ids >= 0) followed, for entries, by the sinks of
    its GPU in the previous iteration (relative ids ``sink - n`` < 0).
    """
    n = len(plan)
    own = np.diff(plan.dep_ptr)
    b_entry, b_sink = boundary_deps(plan)
    extra = np.bincount(b_entry, minlength=n).astype(np.int64)
    ptr = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(own + extra, out=ptr[1:])
    idx = np.empty(int(ptr[-1]), dtype=np.int64)
    owner = np.repeat(np.arange(n, dtype=np.int64), own)
    idx[ptr[owner] + np.arange(owner.size, dtype=np.int64) - plan.dep_ptr[owner]] = plan.dep_idx
    if b_entry.size:
        rank = _ranges(np.zeros(n, dtype=np.int64), extra)  # position within each entry's sink list
        idx[ptr[b_entry] + own[b_entry] + rank] = b_sink - n
    return ptr, idx


def repeat_plan(plan: ExecutionPlan, iterations: int) -> RepeatedPlan:
    """``iterations`` copies of ``plan`` chained by the per-GPU iteration rule (module docstring).

    ``iterations == 1`` returns ``plan`` itself. Raises PlanningError if ``iterations < 1`` or the
    repeated plan would have more task ids than int32 holds.
    """
    if isinstance(iterations, bool) or not isinstance(iterations, (int, np.integer)) or iterations < 1:
        raise PlanningError(f"iterations ({iterations!r}) must be an integer >= 1")
    reps, n = int(iterations), len(plan)
    if reps * n > _INT32_MAX:
        raise PlanningError(
            f"{reps} iterations of {n} tasks exceed {_INT32_MAX} task ids; run fewer iterations or a coarser plan"
        )
    iteration = np.repeat(np.arange(reps, dtype=np.int32), n)
    if reps == 1:
        return RepeatedPlan(plan, iteration, 1, n)
    ptr, rel = _next_iteration_csr(plan)
    first_len, later_len = plan.dep_idx.size, rel.size
    base = np.repeat(np.arange(1, reps, dtype=np.int64) * n, later_len)
    dep_idx = np.concatenate([plan.dep_idx.astype(np.int64), np.tile(rel, reps - 1) + base]).astype(np.int32)
    starts = first_len + np.arange(reps - 1, dtype=np.int64) * later_len
    dep_ptr = np.concatenate([plan.dep_ptr, (starts[:, None] + ptr[None, 1:]).ravel()])

    # Every per-task array is tiled (whatever fields ExecutionPlan has); names and the CSR are shared/new.
    per_task: dict[str, Any] = {
        f.name: np.tile(v, reps)
        for f in dataclasses.fields(plan)
        if f.name not in ("dep_ptr", "dep_idx") and isinstance(v := getattr(plan, f.name), np.ndarray)
    }
    out = dataclasses.replace(plan, dep_ptr=dep_ptr, dep_idx=dep_idx, **per_task)
    return RepeatedPlan(out, iteration, reps, n)
