"""The flow tasks of an execution plan and the connections they travel on, as the analytic backend needs them.

One pass over the tasks gives each flow its row (flows are numbered in task order), and, for per-connection
ECMP, its connection: the dense ids of :meth:`hetero_ns3.plan.dag.ExecutionPlan.flow_connections` (restricted to
flows) with the first flow of each. The native kernel does it in one C pass with a hash table (no array
over the key range); without it, numpy does the same from ``flow_connections``.
"""

from __future__ import annotations

import ctypes
from dataclasses import dataclass

import numpy as np

from hetero_ns3.errors import SimulationError
from hetero_ns3.plan.dag import FLOW, ExecutionPlan


@dataclass(frozen=True)
class PlanFlows:
    """Flow rows of a plan of n tasks with F flows (and C connections)."""

    task: np.ndarray
    """int64 (F,): task id of each flow, increasing."""
    row: np.ndarray | None
    """int32 (n,): flow row of each task; -1 for compute tasks (None when ``code`` was made instead)."""
    connection: np.ndarray | None
    """int32 (F,): connection of each flow, dense, numbered in order of first appearance (None: not asked)."""
    first: np.ndarray | None
    """int64 (C,): the first flow row of each connection (None: not asked)."""
    code: np.ndarray | None = None
    """float64 (n,): the native loop's task codes, the task's duration for compute tasks and ``-(f + 1)``
    for the task of flow row ``f`` (None: not asked)."""


def plan_flows(
    plan: ExecutionPlan, connections: bool, lib: ctypes.CDLL | None = None, codes: bool = False
) -> PlanFlows:
    """The flows of ``plan`` (:class:`PlanFlows`); with ``connections`` also their connections.

    ``lib`` is the native kernel (:func:`hetero_ns3.network.analytic.native.load_kernel`); without it numpy
    computes the same arrays. ``codes`` (native only): the loop's task codes instead of the flow rows
    (a fresh array, which is also where the loop reads durations: it takes the plan's durations out of
    the builder's buffers, which are not backed by huge pages).
    """
    if lib is None:
        return _plan_flows_numpy(plan, connections)
    n = len(plan)
    if n >= 2**31 - 1:
        raise SimulationError(f"the plan has {n} tasks; the native kernel takes fewer than 2**31")
    kind = np.ascontiguousarray(plan.kind, np.int8)
    f = int(lib.flowsim_count_flows(n, kind.ctypes.data, FLOW))
    task = np.empty(f, np.int64)
    row = None if codes else np.empty(n, np.int32)
    code = np.empty(n) if codes else None
    dur = np.ascontiguousarray(plan.duration_s, np.float64)
    conn = np.empty(f, np.int32) if connections else None
    first = np.empty(f, np.int64) if connections else None
    nconn = np.zeros(1, np.int64)
    chan = np.ascontiguousarray(plan.channel, np.int16)  # -1 (no collective) counts as channel 0, as in numpy
    gpu = np.ascontiguousarray(plan.gpu, np.int32)
    dst = np.ascontiguousarray(plan.dst, np.int32)
    cat = np.ascontiguousarray(plan.category, np.int16)
    rc = lib.flowsim_flows(
        n, kind.ctypes.data, FLOW, gpu.ctypes.data, dst.ctypes.data, cat.ctypes.data, chan.ctypes.data,
        max(1, len(plan.gpus)), max(1, len(plan.categories)), max(0, int(chan.max(initial=0))) + 1,
        task.ctypes.data, None if row is None else row.ctypes.data, None if conn is None else conn.ctypes.data,
        None if first is None else first.ctypes.data, nconn.ctypes.data, dur.ctypes.data,
        None if code is None else code.ctypes.data,
    )  # fmt: skip
    if rc == 3:
        raise MemoryError("the analytic kernel ran out of memory")
    if first is not None:
        first = first[: int(nconn[0])].copy()
    return PlanFlows(task, row, conn, first, code)


def _plan_flows_numpy(plan: ExecutionPlan, connections: bool) -> PlanFlows:
    is_flow = plan.kind == FLOW
    task = np.flatnonzero(is_flow)
    row = np.full(len(plan), -1, np.int32)
    row[task] = np.arange(task.size, dtype=np.int32)
    if not connections:
        return PlanFlows(task, row, None, None)
    conn = plan.flow_connections()[task]
    n_conn = int(conn.max()) + 1 if conn.size else 0
    first = np.empty(n_conn, np.int64)
    first[conn[::-1]] = np.arange(conn.size - 1, -1, -1, dtype=np.int64)  # the last write wins: first flow
    return PlanFlows(task, row, conn.astype(np.int32), first)


#: Flows per block in :func:`row_bytes` (bounded temporaries: a few MiB instead of 16 bytes per flow).
_BYTES_BLOCK = 1 << 20


def row_bytes(rows: np.ndarray, n_rows: int, size: np.ndarray, task: np.ndarray | None = None) -> np.ndarray:
    """float64 (n_rows,): bytes per path row, summed over its flows (flow ``f`` on row ``rows[f]`` with
    ``size[f]`` bytes, or ``size[task[f]]`` given ``task``), in blocks of 2**20 flows. The sums are of whole
    bytes below 2**53, exact in float64 in any order: the same figures as one ``bincount`` over all flows."""
    out = np.zeros(n_rows)
    for lo in range(0, rows.shape[0], _BYTES_BLOCK):
        hi = lo + _BYTES_BLOCK
        w = size[lo:hi] if task is None else size[task[lo:hi]]
        out += np.bincount(rows[lo:hi], weights=w, minlength=n_rows)
    return out
