"""Chrome trace / Perfetto JSON of a run.

One process per GPU (named ``<gpu> (<type>, node <node>)``), one thread per GPU stream, and for
flows one thread per (channel, lane) on the sending GPU: flows of one channel that overlap in time
go to separate lanes so that slices on a thread never overlap (the JSON importers of Perfetto and
``chrome://tracing`` need properly nested slices). Every task is a complete ("X") event with
``ts``/``dur`` in microseconds. Zero-time barriers and unfinished tasks are left out.
Format: https://docs.google.com/document/d/1CvAClvFfyA5R-PhYUmn5OOQtYMH4h6I0nSsKchNAySU
"""

from __future__ import annotations

import heapq
from collections.abc import Sequence
from typing import Any

import numpy as np

from hetero_ns3.plan.dag import FLOW, ExecutionPlan, TaskTimes
from hetero_ns3.results.meta import GpuMeta
from hetero_ns3.results.tables import flow_channels

FLOW_TID_BASE = 1000
"""Thread ids of flow lanes start here (numbered per GPU in channel, then lane order); stream ``s`` is
thread ``s + 1`` (stream -1 of barriers is thread 0)."""


def _lanes(starts: np.ndarray, finishes: np.ndarray) -> list[int]:
    """Greedy interval partitioning in start order: the lane of each interval (no overlaps per lane)."""
    order = np.argsort(starts, kind="stable")
    lane_of = [0] * len(starts)
    free: list[tuple[float, int]] = []  # (finish, lane)
    n_lanes = 0
    for i in order.tolist():
        if free and free[0][0] <= starts[i]:
            _, lane = heapq.heappop(free)
        else:
            lane, n_lanes = n_lanes, n_lanes + 1
        lane_of[i] = lane
        heapq.heappush(free, (float(finishes[i]), lane))
    return lane_of


def chrome_trace(
    plan: ExecutionPlan, times: TaskTimes, meta: Sequence[GpuMeta], max_events: int = 1_000_000
) -> dict[str, Any]:
    """The trace as a JSON-ready dict (``{"traceEvents": [...], ...}``).

    At most ``max_events`` slices are kept (the earliest starts); ``otherData.truncated`` says so.
    """
    start, finish = np.asarray(times.start_s, dtype=float), np.asarray(times.finish_s, dtype=float)
    done = np.isfinite(start) & np.isfinite(finish)
    shown = done & ((plan.kind == FLOW) | (finish > start))
    ids = np.nonzero(shown)[0]
    truncated = ids.size > max_events
    if truncated:
        ids = ids[np.argsort(start[ids], kind="stable")[:max_events]]
        ids.sort()
    events: list[dict[str, Any]] = []
    threads: dict[tuple[int, int], str] = {}
    labels, cats = plan.labels, plan.categories
    flow_ids = ids[plan.kind[ids] == FLOW]
    flow_tid: dict[int, int] = {}
    groups: dict[tuple[int, int], list[int]] = {}
    chan = flow_channels(plan, flow_ids)
    for i, g, ch in zip(flow_ids.tolist(), plan.gpu[flow_ids].tolist(), chan.tolist(), strict=True):
        groups.setdefault((g, ch), []).append(i)
    next_tid: dict[int, int] = {}
    for (g, ch), members in sorted(groups.items()):
        arr = np.asarray(members)
        lanes = _lanes(start[arr], finish[arr])
        base = next_tid.get(g, FLOW_TID_BASE)
        next_tid[g] = base + max(lanes) + 1
        for i, lane in zip(members, lanes, strict=True):
            tid = base + lane
            if (g, tid) not in threads:
                threads[(g, tid)] = f"net ch{ch}" + (f" lane{lane}" if lane else "")
            flow_tid[i] = tid
    # Python lists of the shown tasks only (at most max_events), not of the whole plan: lists of every
    # task cost ~0.3 GB per column at 10 M tasks.
    gpu_l, lab_l, cat_l = plan.gpu[ids].tolist(), plan.label[ids].tolist(), plan.category[ids].tolist()
    kind_l, stream_l, dst_l, size_l = (
        plan.kind[ids].tolist(),
        plan.stream[ids].tolist(),
        plan.dst[ids].tolist(),
        plan.size_bytes[ids].tolist(),
    )
    start_l, finish_l = start[ids].tolist(), finish[ids].tolist()
    for k, i in enumerate(ids.tolist()):
        g = gpu_l[k]
        ev: dict[str, Any] = {
            "name": labels[lab_l[k]],
            "cat": cats[cat_l[k]],
            "ph": "X",
            "ts": start_l[k] * 1e6,
            "dur": (finish_l[k] - start_l[k]) * 1e6,
            "pid": g + 1,
        }
        if kind_l[k] == FLOW:
            ev["tid"] = flow_tid[i]
            ev["args"] = {"id": i, "dst": plan.gpus[dst_l[k]], "bytes": size_l[k]}
        else:
            st = stream_l[k]
            ev["tid"] = st + 1
            if (g, st + 1) not in threads:
                threads[(g, st + 1)] = f"stream {st}" if st >= 0 else "sync"
            ev["args"] = {"id": i}
        events.append(ev)
    meta_events: list[dict[str, Any]] = []
    for g, name in enumerate(plan.gpus):
        m = meta[g]
        meta_events.append(
            {"name": "process_name", "ph": "M", "pid": g + 1, "args": {"name": f"{name} ({m.gpu_type}, node {m.node})"}}
        )
        meta_events.append({"name": "process_sort_index", "ph": "M", "pid": g + 1, "args": {"sort_index": g}})
    for (g, tid), tname in sorted(threads.items()):
        meta_events.append({"name": "thread_name", "ph": "M", "pid": g + 1, "tid": tid, "args": {"name": tname}})
        meta_events.append(
            {"name": "thread_sort_index", "ph": "M", "pid": g + 1, "tid": tid, "args": {"sort_index": tid}}
        )
    return {
        "traceEvents": meta_events + events,
        "displayTimeUnit": "ns",
        "otherData": {"truncated": bool(truncated), "slices": len(events), "time_unit": "us"},
    }
