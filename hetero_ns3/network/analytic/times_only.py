"""The analytic replay without its flows table, in less memory: what ``hetero-ns3 validate`` runs.

:func:`replay_times` is :func:`~hetero_ns3.network.analytic.api.simulate_plan`'s event loop on the same
inputs, so the task times are the same bit for bit; it keeps no per-flow times, ideal FCTs, sizes or name
columns. In two steps (:func:`prepare_times`, then :meth:`PreparedTimes.run`) a caller can drop, between
them, the plan's columns the loop no longer reads (durations, priorities, channels: the loop has the task
codes by then). docs/analytic.md, "Memory", has the figures.
"""

from __future__ import annotations

import ctypes
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

import numpy as np

from hetero_ns3.errors import SimulationError
from hetero_ns3.network.analytic.api import (
    DEFAULT_CONFIG,
    AnalyticStats,
    Routes,
    _kernel,
    _link_bytes,
    _run,
    route_plan,
    simulate_plan,
)
from hetero_ns3.network.analytic.config import AnalyticConfig
from hetero_ns3.network.analytic.flows import plan_flows
from hetero_ns3.network.analytic.native import successors_native
from hetero_ns3.network.analytic.routes import FlowPaths, LinkArrays, link_arrays, resolve_next_hops
from hetero_ns3.plan.dag import ExecutionPlan, TaskTimes
from hetero_ns3.topology.graph import NetGraph


@dataclass(frozen=True)
class AnalyticTimes:
    """Outcome of :func:`replay_times`: an :class:`~hetero_ns3.network.analytic.api.AnalyticResult` without
    its flows table."""

    times: TaskTimes
    link_bytes: np.ndarray
    stats: AnalyticStats


@dataclass(frozen=True)
class _Routed:
    """What the loop needs after routing: the task codes, the paths, and three of the plan's columns."""

    lib: ctypes.CDLL
    code: np.ndarray
    paths: FlowPaths
    links: LinkArrays
    n_flows: int
    t_route: float
    dep_ptr: np.ndarray
    dep_idx: np.ndarray
    size_bytes: np.ndarray


class PreparedTimes:
    """A replay routed and ready (:func:`prepare_times`): it holds the task codes, the paths and, of the
    plan, only its bytes per task and dependency lists. :meth:`run` runs once (the loop writes the finish
    times over the codes)."""

    def __init__(
        self, n_links: int, config: AnalyticConfig, t0: float, routed: _Routed | None, done: AnalyticTimes | None
    ) -> None:
        self._n_links, self._config, self._t0 = n_links, config, t0
        self._routed, self._done = routed, done

    def run(self) -> AnalyticTimes:
        """The event loop: the task times of the plan given to :func:`prepare_times`."""
        if self._done is not None:  # the numpy engine: simulate_plan ran in prepare_times
            return self._done
        if self._routed is None:
            raise SimulationError("this prepared replay has run already (its task codes became finish times)")
        r, self._routed = self._routed, None
        code, paths = r.code, r.paths
        successors = successors_native(r.lib, r.dep_ptr, r.dep_idx, True)
        figures: dict[str, object] = {}
        if paths.latency_s is None:  # the loop computes latencies from the paths
            figures.update(links=r.links, store_and_forward=self._config.store_and_forward)
        args = (None, code, r.dep_ptr, r.dep_idx, None, r.size_bytes, paths.paths)  # (durations: in the codes)
        out, engine = _run(
            r.lib, self._config, *args, paths.latency_s, r.links.capacity, path_row=paths.row,
            successors=successors, task_code=code, finish_out=code, **figures,
        )  # fmt: skip
        del successors, code
        s = out.stats
        stats = AnalyticStats(
            int(out.start_s.shape[0]), r.n_flows, s.events, s.rate_updates, s.fill_rounds, s.max_active_flows,
            s.reused_rates, s.recomputed_rates, r.t_route, s.wall_s, time.perf_counter() - self._t0, engine,
        )  # fmt: skip
        return AnalyticTimes(TaskTimes(out.start_s, out.finish_s), _link_bytes(paths, self._n_links), stats)


def prepare_times(
    graph: NetGraph,
    plan: ExecutionPlan,
    config: AnalyticConfig = DEFAULT_CONFIG,
    seed: int = 0,
    routes: Routes | None = None,
) -> PreparedTimes:
    """Number the plan's flows, make the task codes and route the flows (the first part of
    :func:`replay_times`). The result keeps of ``plan`` only ``size_bytes``, ``dep_ptr`` and ``dep_idx``
    (with the native kernel; the numpy engine runs the whole replay here)."""
    t0 = time.perf_counter()
    lib: ctypes.CDLL | None = _kernel(config)
    if lib is None:
        r = simulate_plan(graph, plan, config, seed, routes)
        return PreparedTimes(0, config, t0, None, AnalyticTimes(r.times, r.link_bytes, r.stats))
    with ThreadPoolExecutor(max_workers=1) as pool:
        flows_job = pool.submit(plan_flows, plan, config.ecmp_key == "connection", lib, codes=True)
        table = resolve_next_hops(graph, routes)  # Python searches (GIL) while the C pass runs
        flows = flows_job.result()
        del flows_job  # (the future holds the result)
    links = link_arrays(graph, config)
    paths = route_plan(graph, plan, flows, plan.size_bytes, links, config, seed, table, lib, per_task=True)
    assert flows.code is not None  # (asked for: codes=True)
    routed = _Routed(
        lib, flows.code, paths, links, int(flows.task.shape[0]), time.perf_counter() - t0,
        plan.dep_ptr, plan.dep_idx, plan.size_bytes,
    )  # fmt: skip
    return PreparedTimes(len(graph.links), config, t0, routed, None)


def replay_times(
    graph: NetGraph,
    plan: ExecutionPlan,
    config: AnalyticConfig = DEFAULT_CONFIG,
    seed: int = 0,
    routes: Routes | None = None,
) -> AnalyticTimes:
    """:func:`~hetero_ns3.network.analytic.api.simulate_plan` without the flows table: the same event loop
    on the same inputs (the same task times, bit for bit), in less memory.

    With the native kernel it keeps, beside the plan, 20 bytes per task, 4 per dependency and 4 per flow
    at its peak: the successor lists (made after routing, not beside it), start times, and the task codes,
    which the finish times overwrite, and each flow's path row; the loop reads the plan's bytes per task.
    Without the kernel (numpy engine) it is ``simulate_plan`` with the table dropped.
    """
    return prepare_times(graph, plan, config, seed, routes).run()
