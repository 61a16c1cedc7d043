"""Several execution plans in one simulation: delayed starts and the merge of disjoint plans.

Used for multi-job scenarios (``[[jobs]]``): each job is lowered to its own plan on its own GPUs, its start
delayed by a per-GPU wait task, and the plans are concatenated into one DAG that a backend replays whole, so
the jobs share the network. Pure numpy over the plan arrays.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

import numpy as np

from hetero_ns3.errors import PlanningError
from hetero_ns3.plan.dag import COMPUTE, COMPUTE_STREAM, ExecutionPlan

#: Category of the wait tasks that delay a job's start (a breakdown "other" class, not compute).
START_CATEGORY = "start"


def delay_start(plan: ExecutionPlan, start_s: float, label: str = "start") -> ExecutionPlan:
    """``plan`` with every task held back until ``start_s``: one wait task of that duration per GPU comes
    first, and every task without dependencies waits for its GPU's (a flow: its source GPU's)."""
    if start_s < 0:
        raise PlanningError(f"a plan cannot start at a negative time ({start_s} s)")
    g, n = len(plan.gpus), len(plan)
    if start_s == 0 or n == 0:
        return plan
    counts = np.diff(plan.dep_ptr)
    roots = counts == 0
    new_counts = np.r_[np.zeros(g, np.int64), counts + roots]
    dep_ptr = np.r_[0, np.cumsum(new_counts)].astype(plan.dep_ptr.dtype)
    dep_idx = np.empty(int(dep_ptr[-1]), plan.dep_idx.dtype)
    # Old deps shift by g; a root's single new dep is its GPU's wait task (id = GPU index).
    pos_old = np.repeat(dep_ptr[g:-1] - plan.dep_ptr[:-1], counts) + np.arange(plan.dep_idx.shape[0])
    dep_idx[pos_old] = plan.dep_idx + g
    dep_idx[dep_ptr[g:-1][roots]] = plan.gpu[roots]
    cats = plan.categories if START_CATEGORY in plan.categories else (*plan.categories, START_CATEGORY)
    lbl = len(plan.labels)

    def head(values: np.ndarray, fill: object) -> np.ndarray:
        return np.r_[np.full(g, fill, dtype=values.dtype), values]

    return dataclasses.replace(
        plan,
        kind=head(plan.kind, COMPUTE),
        gpu=np.r_[np.arange(g, dtype=plan.gpu.dtype), plan.gpu],
        dst=head(plan.dst, -1),
        size_bytes=head(plan.size_bytes, 0),
        duration_s=head(plan.duration_s, float(start_s)),
        stream=head(plan.stream, COMPUTE_STREAM),
        priority=head(plan.priority, 0),
        dep_ptr=dep_ptr,
        dep_idx=dep_idx,
        label=head(plan.label, lbl),
        labels=(*plan.labels, label),
        category=head(plan.category, cats.index(START_CATEGORY)),
        categories=cats,
        channel=head(plan.channel, -1),
    )


def prefix_labels(plan: ExecutionPlan, prefix: str) -> ExecutionPlan:
    """Every label of ``plan`` prefixed with ``prefix`` (e.g. a job's name and a dot)."""
    return dataclasses.replace(plan, labels=tuple(prefix + t for t in plan.labels))


def merge_plans(plans: Sequence[ExecutionPlan]) -> tuple[ExecutionPlan, np.ndarray]:
    """One plan holding ``plans`` side by side (their GPUs must be disjoint); also the first task id of each.

    Task ids, GPU indices, label and category indices are renumbered; dependencies stay inside each plan.
    """
    if not plans:
        raise PlanningError("merge_plans needs at least one plan")
    gpus: list[str] = []
    for p in plans:
        clash = set(gpus) & set(p.gpus)
        if clash:
            raise PlanningError(f"plans to merge share GPUs ({sorted(clash)[:3]}); jobs must run on disjoint GPUs")
        gpus += p.gpus
    categories = tuple(dict.fromkeys(c for p in plans for c in p.categories))
    sizes = np.array([len(p) for p in plans], np.int64)
    first = np.r_[0, np.cumsum(sizes)[:-1]].astype(np.int64)
    g_off = np.r_[0, np.cumsum([len(p.gpus) for p in plans])[:-1]]
    l_off = np.r_[0, np.cumsum([len(p.labels) for p in plans])[:-1]]
    d_off = np.r_[0, np.cumsum([p.dep_idx.shape[0] for p in plans])[:-1]]
    base = plans[0]

    def cat(name: str, parts: list[np.ndarray]) -> np.ndarray:
        return np.concatenate(parts).astype(getattr(base, name).dtype, copy=False)

    fields = {}
    for f in dataclasses.fields(ExecutionPlan):
        if isinstance(getattr(base, f.name), np.ndarray):
            fields[f.name] = cat(f.name, [getattr(p, f.name) for p in plans])
    fields["gpu"] = cat("gpu", [p.gpu + o for p, o in zip(plans, g_off, strict=True)])
    fields["dst"] = cat("dst", [np.where(p.dst >= 0, p.dst + o, -1) for p, o in zip(plans, g_off, strict=True)])
    fields["dep_idx"] = cat("dep_idx", [p.dep_idx + o for p, o in zip(plans, first, strict=True)])
    fields["dep_ptr"] = np.r_[0, np.concatenate([p.dep_ptr[1:] + o for p, o in zip(plans, d_off, strict=True)])].astype(
        base.dep_ptr.dtype
    )
    fields["label"] = cat("label", [p.label + o for p, o in zip(plans, l_off, strict=True)])
    fields["category"] = cat(
        "category",
        [np.asarray([categories.index(c) for c in p.categories], np.int64)[p.category] for p in plans],
    )
    merged = dataclasses.replace(
        base, gpus=tuple(gpus), labels=tuple(t for p in plans for t in p.labels), categories=categories, **fields
    )
    merged.validate()
    return merged, first
