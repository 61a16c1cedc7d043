"""Packet-level replay of an execution plan (a DAG of compute and flow tasks) in ns-3.

The plan's arrays go to ``ns3::DagReplay`` (C++, ``native/helper/dag-replay.h``) once; the replay
then runs entirely inside ns-3's event loop: a task is released when its dependencies finish,
compute tasks are scheduled delays, flow tasks are RDMA queue pairs of ``ns3::RdmaNetwork`` through
the simulated intra-node fabric and network. No Python runs per packet, per flow or per task.

Python regains control only between slices of simulated time (to report progress), and reads the
per-task start/finish times and per-flow records back as arrays at the end. The calls go through
the module's C ABI (:mod:`hetero_ns3.network.ns3.capi`; no ``import ns``), or through cppyy with
``engine="cppyy"`` (same results bit for bit).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from hetero_ns3.errors import ScenarioError, SimulationError, field_error
from hetero_ns3.network.config import NetworkConfig
from hetero_ns3.network.ns3.profile import event_profile
from hetero_ns3.network.ns3.roce import network_session, ports_frame
from hetero_ns3.plan.dag import FLOW, ExecutionPlan, TaskTimes
from hetero_ns3.topology.graph import NetGraph

#: ``progress(sim_time_s, tasks_done, tasks_total)`` called between slices of simulated time.
ProgressFn = Callable[[float, int, int], None]


@dataclass(frozen=True)
class LinkFault:
    """A link whose rate changes (``rate_factor`` in (0, 1]) or goes down (``rate_factor`` 0) at ``at_s``."""

    a: str
    b: str
    at_s: float = 0.0
    rate_factor: float = 0.0


@dataclass(frozen=True)
class ReplayResult:
    """Outcome of :func:`run_plan`."""

    times: TaskTimes
    """Per task start/finish in seconds (NaN where the task never ran)."""
    flows: pd.DataFrame
    """One row per flow task: task, src, dst, size_bytes, start_s, finish_s, fct_s, ideal_fct_s, retransmits."""
    ports: pd.DataFrame
    """Per-port counters of the network (tx bytes, PFC, ECN, drops)."""
    completed: bool
    """Every task finished."""
    interrupted: bool
    """The run stopped on KeyboardInterrupt (Ctrl-C) between two slices; ``times`` are partial."""
    wall_s: float
    events: int
    sim_time_s: float
    profile: dict[str, int] | None = None
    """With ``run_plan(profile=True)``: events by kind and DATA frames (:func:`~hetero_ns3.network.ns3.profile.event_profile`)."""


def _link_index(graph: NetGraph, a: str, b: str) -> int:
    for li, lk in enumerate(graph.links):
        if {lk.a, lk.b} == {a, b}:
            return li
    names = {nd.name for nd in graph.nodes}
    missing = [x for x in (a, b) if x not in names]
    if missing:
        raise ScenarioError(
            f"faults: {missing[0]!r} is not a node of the simulated network; the packet level attaches a GPU that "
            "has a NIC of its own directly (cluster.nic_attach 'auto' = 'direct' there: no PCIe switch or NIC node, "
            "the GPU's link goes to the first switch), so name the GPU (e.g. 'n0.g0' for 'n0.nic0') or set "
            "cluster.nic_attach = 'pcie'"
        )
    raise ScenarioError(f"faults: no link between {a!r} and {b!r} in the topology; name two adjacent nodes")


def _gpu_nodes(graph: NetGraph, plan: ExecutionPlan) -> np.ndarray:
    out = np.empty(len(plan.gpus), dtype=np.uint32)
    for i, name in enumerate(plan.gpus):
        out[i] = graph.index(name)
    return out


def run_plan(
    graph: NetGraph,
    plan: ExecutionPlan,
    config: NetworkConfig | None = None,
    seed: int = 1,
    *,
    link_faults: Sequence[LinkFault] = (),
    progress: ProgressFn | None = None,
    progress_every_s: float = 0.5,
    stall_limit_s: float = 60.0,
    engine: str = "capi",
    profile: bool = False,
) -> ReplayResult:
    """Replay ``plan`` on ``graph`` with the native RoCE network; return per-task times and flow records.

    Flow tasks hash for ECMP per connection (``config.routing.ecmp_key``, default ``connection``):
    the flows of one ``plan.flow_connections()`` id share a UDP source port and so a path.
    ``link_faults`` change link rates (or take links down) at given simulated times.
    ``progress`` is called about every ``progress_every_s`` wall seconds with the simulated time.
    A run that makes no progress for ``stall_limit_s`` simulated seconds stops and is reported as
    incomplete (``completed=False``) rather than hanging. Ctrl-C (or a ``progress`` callback raising
    KeyboardInterrupt) stops it between slices with ``interrupted=True`` and the partial times.
    ``engine``: ``capi`` (the C ABI, no ns-3 import) or ``cppyy``; both give the same results.
    ``profile`` fills ``ReplayResult.profile`` with the events by kind (the counters are always on).
    """
    plan.validate()
    n = len(plan)
    gpu_nodes = _gpu_nodes(graph, plan)
    t0 = time.perf_counter()
    with network_session(graph, config, seed, engine) as (eng, net):
        for i, f in enumerate(link_faults):
            if not 0.0 <= f.rate_factor <= 1.0:
                raise field_error(f"faults.links[{i}].rate_factor", f.rate_factor, "must be in [0, 1]; 0 = link down")
            li = _link_index(graph, f.a, f.b)
            if f.rate_factor == 0.0:
                net.set_link_up(li, False, float(f.at_s))
            else:
                net.set_link_rate(li, graph.links[li].rate_bps * f.rate_factor, float(f.at_s))
        replay = eng.replay(net)
        dep_idx = np.ascontiguousarray(plan.dep_idx, dtype=np.int32)
        if dep_idx.size == 0:
            dep_idx = np.zeros(1, dtype=np.int32)  # a valid pointer for C++; never read
        arrays = (
            np.ascontiguousarray(plan.kind, dtype=np.uint8),
            np.ascontiguousarray(plan.gpu, dtype=np.int32),
            np.ascontiguousarray(plan.dst, dtype=np.int32),
            np.ascontiguousarray(plan.size_bytes, dtype=np.int64),
            np.ascontiguousarray(plan.duration_s, dtype=np.float64),
            np.ascontiguousarray(plan.priority, dtype=np.uint8),
            np.ascontiguousarray(plan.dep_ptr, dtype=np.int64),
            dep_idx,
        )
        try:
            replay.set_tasks(n, arrays, gpu_nodes)
            if (config or NetworkConfig()).routing.ecmp_key == "connection" and n > 0:
                replay.set_connections(np.ascontiguousarray(plan.flow_connections(), dtype=np.int64))
            ev0 = eng.event_count()
            interrupted = False
            try:
                replay.start()
                _drive(eng, replay, n, progress, progress_every_s, stall_limit_s)
            except KeyboardInterrupt:
                interrupted = True  # keep what finished; the caller decides what to do with it
            except SimulationError:
                raise
            except Exception as exc:  # pragma: no cover - C++ aborts surface here
                raise SimulationError(f"packet-level replay failed: {exc}") from exc
            events = eng.event_count() - ev0
            prof = event_profile(eng.profile(), events) if profile else None
            sim_time = eng.now_s()
            start = replay.read("start")
            finish = replay.read("finish")
            flow_of_task = replay.read("flow_ids")
            flows = _flows_frame(graph, plan, net, flow_of_task, start)
            ports = ports_frame(graph, net)
            done = replay.completed()
        finally:
            replay.free()
    start[start < 0] = np.nan
    finish[finish < 0] = np.nan
    return ReplayResult(
        TaskTimes(start, finish), flows, ports, done == n, interrupted, time.perf_counter() - t0, events, sim_time, prof
    )


def _drive(eng: Any, replay: Any, n: int, progress: ProgressFn | None, every_s: float, stall_s: float) -> None:
    """Run the simulator in slices of simulated time until every task is done or nothing is left."""
    step = 1e-4  # simulated seconds per slice; adapted so a slice takes about ``every_s`` wall seconds
    last_done, last_change = -1, 0.0
    while True:
        w0 = time.perf_counter()
        eng.run_for(step)
        done = replay.completed()
        now = eng.now_s()
        # (Simulator::IsFinished() is true after every Stop, so it cannot tell an empty queue.)
        if done >= n:
            break
        if done != last_done:
            last_done, last_change = done, now
        elif now - last_change > stall_s:
            break
        if progress is not None:
            progress(now, done, n)
        wall = time.perf_counter() - w0
        step = min(step * 4, max(step / 4, step * every_s / max(wall, 1e-6)))
    if progress is not None:
        progress(eng.now_s(), replay.completed(), n)


def _flows_frame(
    graph: NetGraph, plan: ExecutionPlan, net: Any, flow_of_task: np.ndarray, start: np.ndarray
) -> pd.DataFrame:
    tasks = np.nonzero((plan.kind == FLOW) & (flow_of_task >= 0))[0]
    fid = flow_of_task[tasks]
    finish_all = net.read("flow_finish")
    ideal_all = net.read("flow_ideal")
    retx_all = net.read("flow_retransmits").astype(np.int64)
    finish = finish_all[fid] if fid.size else np.zeros(0)
    finish = np.where(finish < 0, np.nan, finish)
    labels = np.asarray(plan.labels, dtype=object)
    cats = np.asarray(plan.categories, dtype=object)
    gpus = np.asarray(plan.gpus, dtype=object)
    return pd.DataFrame(
        {
            "task": tasks.astype(np.int64),
            "src": gpus[plan.gpu[tasks]],
            "dst": gpus[plan.dst[tasks]],
            "size_bytes": plan.size_bytes[tasks],
            "start_s": start[tasks],
            "finish_s": finish,
            "fct_s": finish - start[tasks],
            "ideal_fct_s": ideal_all[fid] if fid.size else np.zeros(0),
            "retransmits": retx_all[fid] if fid.size else np.zeros(0, dtype=np.int64),
            "category": cats[plan.category[tasks]],
            "label": labels[plan.label[tasks]],
        }
    )
