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
import json
import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from hetero_ns3.plan.dag import FLOW, HOST_STREAM, ExecutionPlan, TaskTimes
from hetero_ns3.results import atomic
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


@dataclass(frozen=True)
class _Layout:
    """What both trace writers need: the shown tasks (ascending ids), their threads and the thread names."""

    ids: np.ndarray
    truncated: bool
    flow_tid: dict[int, int]
    threads: dict[tuple[int, int], str]


def _layout(plan: ExecutionPlan, start: np.ndarray, finish: np.ndarray, max_events: int) -> _Layout:
    done = np.isfinite(start) & np.isfinite(finish)
    shown = done & ((plan.kind == FLOW) | (finish > start))
    ids = np.nonzero(shown)[0]
    truncated = ids.size > max_events
    if truncated:
        ids = ids[np.argsort(start[ids], kind="stable")[:max_events]]
        ids.sort()
    threads: dict[tuple[int, int], str] = {}
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
    # the compute streams' names, in the order the events first use them
    other = ids[plan.kind[ids] != FLOW]
    for g, st in zip(plan.gpu[other].tolist(), plan.stream[other].tolist(), strict=True):
        if (g, st + 1) not in threads:
            threads[(g, st + 1)] = f"stream {st}" if st >= 0 else "host" if st == HOST_STREAM else "sync"
    return _Layout(ids, bool(truncated), flow_tid, threads)


def _meta_events(plan: ExecutionPlan, meta: Sequence[GpuMeta], threads: dict[tuple[int, int], str]) -> list[dict]:
    out: list[dict[str, Any]] = []
    for g, name in enumerate(plan.gpus):
        m = meta[g]
        out.append(
            {"name": "process_name", "ph": "M", "pid": g + 1, "args": {"name": f"{name} ({m.gpu_type}, node {m.node})"}}
        )
        out.append({"name": "process_sort_index", "ph": "M", "pid": g + 1, "args": {"sort_index": g}})
    for (g, tid), tname in sorted(threads.items()):
        out.append({"name": "thread_name", "ph": "M", "pid": g + 1, "tid": tid, "args": {"name": tname}})
        out.append({"name": "thread_sort_index", "ph": "M", "pid": g + 1, "tid": tid, "args": {"sort_index": tid}})
    return out


def _columns(plan: ExecutionPlan, start: np.ndarray, finish: np.ndarray, ids: np.ndarray) -> dict[str, list]:
    """Python lists of the shown tasks only (at most max_events), not of the whole plan: lists of every task cost
    ~0.3 GB per column at 10 M tasks."""
    return {
        "gpu": plan.gpu[ids].tolist(),
        "label": plan.label[ids].tolist(),
        "category": plan.category[ids].tolist(),
        "kind": plan.kind[ids].tolist(),
        "stream": plan.stream[ids].tolist(),
        "dst": plan.dst[ids].tolist(),
        "size": plan.size_bytes[ids].tolist(),
        "start": start[ids].tolist(),
        "finish": finish[ids].tolist(),
    }


def chrome_trace(
    plan: ExecutionPlan, times: TaskTimes, meta: Sequence[GpuMeta], max_events: int = 1_000_000
) -> dict[str, Any]:
    """The trace as a JSON-ready dict (``{"traceEvents": [...], ...}``).

    At most ``max_events`` slices are kept (the earliest starts); ``otherData.truncated`` says so.
    :func:`write_chrome_trace` writes the same document as text without building it.
    """
    start, finish = np.asarray(times.start_s, dtype=float), np.asarray(times.finish_s, dtype=float)
    lay = _layout(plan, start, finish, max_events)
    labels, cats = plan.labels, plan.categories
    col = _columns(plan, start, finish, lay.ids)
    events: list[dict[str, Any]] = []
    for k, i in enumerate(lay.ids.tolist()):
        ev: dict[str, Any] = {
            "name": labels[col["label"][k]],
            "cat": cats[col["category"][k]],
            "ph": "X",
            "ts": col["start"][k] * 1e6,
            "dur": (col["finish"][k] - col["start"][k]) * 1e6,
            "pid": col["gpu"][k] + 1,
        }
        if col["kind"][k] == FLOW:
            ev["tid"] = lay.flow_tid[i]
            ev["args"] = {"id": i, "dst": plan.gpus[col["dst"][k]], "bytes": col["size"][k]}
        else:
            ev["tid"] = col["stream"][k] + 1
            ev["args"] = {"id": i}
        events.append(ev)
    return {
        "traceEvents": _meta_events(plan, meta, lay.threads) + events,
        "displayTimeUnit": "ns",
        "otherData": {"truncated": lay.truncated, "slices": len(events), "time_unit": "us"},
    }


TRACE_CHUNK = 100_000
"""Events formatted and written per chunk by :func:`write_chrome_trace`."""


def write_chrome_trace(
    path: str | os.PathLike[str],
    plan: ExecutionPlan,
    times: TaskTimes,
    meta: Sequence[GpuMeta],
    max_events: int = 1_000_000,
) -> Path:
    """Atomically write :func:`chrome_trace`'s document as compact JSON (the bytes of ``json.dumps(doc,
    separators=(",", ":"))`` and a newline), formatting each slice straight to text in chunks of
    :data:`TRACE_CHUNK` instead of building a dict per slice (docs/benchmarks.md, "Writing the trace")."""
    start, finish = np.asarray(times.start_s, dtype=float), np.asarray(times.finish_s, dtype=float)
    lay = _layout(plan, start, finish, max_events)
    names = [json.dumps(x) for x in plan.labels]
    cats = [json.dumps(x) for x in plan.categories]
    gpus = [json.dumps(x) for x in plan.gpus]
    head = json.dumps(_meta_events(plan, meta, lay.threads), separators=(",", ":"))[:-1]
    n = int(lay.ids.size)

    def write(tmp: Path) -> None:
        with open(tmp, "w", encoding="utf-8") as fh:
            fh.write('{"traceEvents":' + head)
            sep = "," if len(head) > 1 else ""
            for lo in range(0, n, TRACE_CHUNK):
                ids = lay.ids[lo : lo + TRACE_CHUNK]
                col = _columns(plan, start, finish, ids)
                ts = (start[ids] * 1e6).tolist()
                dur = ((finish[ids] - start[ids]) * 1e6).tolist()
                flow_tid = lay.flow_tid
                parts = []
                rows = zip(
                    ids.tolist(), col["label"], col["category"], ts, dur, col["gpu"], col["kind"], col["stream"],
                    col["dst"], col["size"], strict=True,
                )  # fmt: skip
                for i, lab, cat, t0, dt, g, kind, st, dst, size in rows:
                    common = f'{{"name":{names[lab]},"cat":{cats[cat]},"ph":"X","ts":{t0!r},"dur":{dt!r},"pid":{g + 1},'
                    if kind == FLOW:
                        args = f'"args":{{"id":{i},"dst":{gpus[dst]},"bytes":{size!r}}}}}'
                        parts.append(f'{common}"tid":{flow_tid[i]},{args}')
                    else:
                        parts.append(f'{common}"tid":{st + 1},"args":{{"id":{i}}}}}')
                fh.write(sep + ",".join(parts))
                sep = ","
            tail = {"truncated": lay.truncated, "slices": n, "time_unit": "us"}
            fh.write('],"displayTimeUnit":"ns","otherData":' + json.dumps(tail, separators=(",", ":")) + "}\n")

    return atomic.write_with(path, write)
