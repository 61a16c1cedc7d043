"""The event loop of the flow-level backend: DAG replay with max-min fair flows.

Time advances from event to event. An event is a compute task (or a flow's last byte after its path
latency) completing, a task being released at a given time, or one or more flows draining their last
byte. Between events the set of active flows and their rates are constant, so remaining bytes fall
linearly; rates are recomputed (:func:`~hetero_ns3.network.analytic.maxmin.maxmin_rates`) only when the set of
active flows changes, once per event time however many flows start or end at it.

DAG bookkeeping (dependency counters, successors) runs in plain Python lists, which are faster than
numpy for the one-task-at-a-time updates; everything that scales with the number of active flows
(advancing bytes, the next drain, the rates) is vectorized in numpy.
"""

from __future__ import annotations

import heapq
import time
from dataclasses import dataclass

import numpy as np

from hetero_ns3.errors import SimulationError
from hetero_ns3.network.analytic.maxmin import maxmin_rates, unchanged_level

#: Staying flows whose old rate is below the unchanged level by this relative margin keep their rate.
REUSE_RTOL = 1e-9


@dataclass(frozen=True)
class EngineStats:
    """Counters of one replay."""

    events: int
    """Distinct event times processed."""
    rate_updates: int
    """Max-min recomputations (one per event time at which the active flow set changed)."""
    fill_rounds: int
    """Water-filling rounds summed over all recomputations."""
    max_active_flows: int
    """Largest number of flows sharing the network at once."""
    reused_rates: int
    """Flow rates kept across updates because they lie below the unchanged level (incremental max-min)."""
    recomputed_rates: int
    """Flow rates recomputed, summed over updates (the water-filling work)."""
    wall_s: float
    """Wall-clock seconds spent in the event loop."""


@dataclass(frozen=True)
class EngineResult:
    start_s: np.ndarray
    finish_s: np.ndarray
    drain_s: np.ndarray | None
    """Per task: when a flow's last byte left its bottleneck (NaN for compute tasks); None when not kept."""
    stats: EngineStats


def successors(dep_ptr: np.ndarray, dep_idx: np.ndarray, n: int) -> tuple[np.ndarray, np.ndarray]:
    """Reverse the dependency CSR: successors of task i are ``succ_idx[succ_ptr[i]:succ_ptr[i+1]]``."""
    owner = np.repeat(np.arange(n, dtype=np.int64), np.diff(dep_ptr))
    order = np.argsort(dep_idx, kind="stable")
    succ_ptr = np.zeros(n + 1, np.int64)
    np.cumsum(np.bincount(dep_idx, minlength=n), out=succ_ptr[1:])
    return succ_ptr, owner[order]


def replay(
    is_flow: np.ndarray,
    duration_s: np.ndarray,
    dep_ptr: np.ndarray,
    dep_idx: np.ndarray,
    flow_row: np.ndarray,
    size_bytes: np.ndarray,
    path_res: np.ndarray,
    latency_s: np.ndarray,
    capacity: np.ndarray,
    release_s: np.ndarray | None = None,
    tolerance_s: float = 1e-12,
    incremental: bool = True,
) -> EngineResult:
    """Replay a DAG.

    Per task i: ``is_flow[i]``; ``duration_s[i]`` (compute); ``flow_row[i]`` the row of flow i in
    ``path_res`` / ``latency_s`` (-1 for compute). ``size_bytes`` per task in payload bytes,
    ``capacity`` per resource in payload bytes/s. ``release_s`` (optional) is the earliest start of
    each task. A flow finishes ``latency_s`` after its last byte drains.
    """
    t0 = time.perf_counter()
    n = int(is_flow.shape[0])
    succ_ptr_a, succ_idx_a = successors(dep_ptr, dep_idx, n)
    succ_ptr = succ_ptr_a.tolist()
    succ_idx = succ_idx_a.tolist()
    indeg = np.diff(dep_ptr).tolist()
    flow = is_flow.tolist()
    dur = duration_s.tolist()
    start = [0.0] * n
    finish = [np.nan] * n
    drain = np.full(n, np.nan)
    lat = latency_s
    heap: list[tuple[float, int]] = []  # (time, task) completion, (time, -1 - task) release
    zero: list[int] = []
    pending: list[int] = []
    push = heapq.heappush
    pop = heapq.heappop

    def begin(i: int, t: float) -> None:
        start[i] = t
        if flow[i]:
            pending.append(i)
        elif dur[i] > 0.0:
            push(heap, (t + dur[i], i))
        else:
            zero.append(i)

    def complete(i: int, t: float) -> None:
        finish[i] = t
        for k in range(succ_ptr[i], succ_ptr[i + 1]):
            s = succ_idx[k]
            indeg[s] -= 1
            if indeg[s] == 0:
                begin(s, t)

    rel = release_s.tolist() if release_s is not None else None
    for i in np.flatnonzero(np.diff(dep_ptr) == 0).tolist():
        if rel is not None and rel[i] > 0.0:
            push(heap, (rel[i], -1 - i))
        else:
            begin(i, 0.0)

    width = path_res.shape[1]
    act_task = np.zeros(0, np.int64)
    act_res = np.zeros((0, width), path_res.dtype)
    rem = np.zeros(0)
    rate = np.zeros(0)
    left = np.zeros(0)  # seconds until each active flow drains at the current rates
    t = 0.0
    events = updates = rounds = max_active = reused = recomputed = 0
    inf = float("inf")
    dirty = False
    n_added = 0  # flows at the tail of the active arrays that have no rate yet
    removed_min = inf  # smallest rate among flows removed since the last update
    while True:
        while zero:
            complete(zero.pop(), t)
        if pending:
            new = np.asarray(pending, np.int64)
            pending.clear()
            act_task = np.concatenate((act_task, new))
            act_res = np.concatenate((act_res, path_res[flow_row[new]]))
            rem = np.concatenate((rem, size_bytes[new].astype(np.float64)))
            rate = np.concatenate((rate, np.full(new.size, np.nan)))
            left = np.concatenate((left, np.full(new.size, np.nan)))
            n_added += new.size
            dirty = True
        if dirty:
            dirty = False
            a = int(act_task.size)
            if a:
                n_old = a - n_added
                x0 = (
                    unchanged_level(act_res[:n_old], rate[:n_old], capacity, act_res[n_old:], removed_min)
                    if incremental
                    else 0.0
                )
                upper = np.ones(a, bool)
                if incremental:
                    upper[:n_old] = rate[:n_old] >= x0 * (1.0 - REUSE_RTOL)
                n_up = int(np.count_nonzero(upper))
                if n_up == a:
                    rate, r = maxmin_rates(act_res, capacity)
                    left = rem / rate
                elif n_up:
                    bg = ~upper
                    load = np.bincount(
                        act_res[bg].ravel(), weights=np.repeat(rate[bg], width), minlength=capacity.shape[0]
                    )
                    rate[upper], r = maxmin_rates(act_res[upper], capacity - load)
                    left[upper] = rem[upper] / rate[upper]
                else:
                    r = 0
                rounds += r
                updates += 1
                reused += a - n_up
                recomputed += n_up
                if n_up and not np.all(rate[upper] > 0):
                    raise SimulationError("a flow got a zero rate; check link rates in the topology")
                max_active = max(max_active, a)
            n_added = 0
            removed_min = inf
        dmin = float(left.min()) if act_task.size else inf
        th = heap[0][0] if heap else inf
        if dmin == inf and th == inf:
            break
        events += 1
        if t + dmin <= th:
            dt = dmin
            t = t + dmin
            done = left <= dmin + tolerance_s
            fin_tasks = act_task[done]
            removed_min = min(removed_min, float(rate[done].min()))
            drain[fin_tasks] = t
            keep = ~done
            act_task = act_task[keep]
            act_res = act_res[keep]
            rate = rate[keep]
            rem = rem[keep] - rate * dt
            left = left[keep] - dt
            dirty = True
            fin_times = (t + lat[flow_row[fin_tasks]]).tolist()
            for i, tf in zip(fin_tasks.tolist(), fin_times, strict=True):
                if tf > t:
                    push(heap, (tf, i))
                else:
                    zero.append(i)
        else:
            dt = th - t
            t = th
            if act_task.size:
                rem = rem - rate * dt
                left = left - dt
        while heap and heap[0][0] <= t:
            _, code = pop(heap)
            if code >= 0:
                complete(code, t)
            else:
                begin(-1 - code, t)
    stuck = [i for i in range(n) if indeg[i] > 0]
    if stuck:
        raise SimulationError(f"{len(stuck)} tasks never became ready (first: task {stuck[0]})")
    stats = EngineStats(events, updates, rounds, max_active, reused, recomputed, time.perf_counter() - t0)
    return EngineResult(np.asarray(start), np.asarray(finish), drain, stats)
