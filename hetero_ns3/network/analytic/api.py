"""Public entry points of the flow-level backend: replay a plan, or simulate independent flows."""

from __future__ import annotations

import ctypes
import time
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

import numpy as np
import pandas as pd

from hetero_ns3.errors import ScenarioError
from hetero_ns3.network.analytic.config import AnalyticConfig
from hetero_ns3.network.analytic.engine import EngineResult, replay
from hetero_ns3.network.analytic.flows import PlanFlows, plan_flows
from hetero_ns3.network.analytic.native import load_kernel, replay_native, successors_native
from hetero_ns3.network.analytic.prefault import populate
from hetero_ns3.network.analytic.routes import (
    FlowPaths,
    LinkArrays,
    NextHopTable,
    link_arrays,
    resolve_next_hops,
    route_connections,
    route_flows,
)
from hetero_ns3.plan.dag import FLOW, ExecutionPlan, TaskTimes
from hetero_ns3.topology.graph import HOST, NetGraph

FLOW_COLUMNS = ("id", "src", "dst", "size_bytes", "start_s", "finish_s", "fct_s", "label")
Routes = Mapping[int, Sequence[Sequence[int]]]
#: The default settings (RoCEv2 framing, 1000-byte payload, store-and-forward hops).
DEFAULT_CONFIG = AnalyticConfig()


@dataclass(frozen=True)
class AnalyticStats:
    """What a run cost and did."""

    tasks: int
    flows: int
    events: int
    """Distinct event times processed by the event loop."""
    rate_updates: int
    """Max-min recomputations (the active flow set changed)."""
    fill_rounds: int
    """Water-filling rounds over all recomputations."""
    max_active_flows: int
    reused_rates: int
    """Flow rates kept across max-min updates (incremental recomputation)."""
    recomputed_rates: int
    """Flow rates recomputed, summed over updates."""
    routing_s: float
    """Wall seconds spent routing flows (next-hop tables and path walks)."""
    replay_s: float
    """Wall seconds in the event loop."""
    wall_s: float
    """Wall seconds of the whole call."""
    engine: str = "numpy"
    """Event loop that ran: ``native`` or ``numpy``."""

    @property
    def events_per_s(self) -> float:
        return self.events / self.replay_s if self.replay_s > 0 else float("inf")


@dataclass(frozen=True)
class AnalyticResult:
    """Outcome of :func:`simulate_plan`."""

    times: TaskTimes
    """Start and finish of every task (seconds)."""
    flows: pd.DataFrame
    """One row per flow task: id, task (= id, the packet backend's name), src, dst, size_bytes, start_s,
    finish_s, fct_s, ideal_fct_s (alone in the network), category, label. The name columns (src, dst,
    category, label) are categoricals whose categories are the distinct names in sorted order."""
    link_bytes: np.ndarray
    """float64 (n_links, 2): payload bytes carried per link, column 0 from ``a`` to ``b``, 1 from ``b`` to ``a``."""
    stats: AnalyticStats


def _host_nodes(graph: NetGraph, names: Sequence[str], what: str) -> np.ndarray:
    out = np.empty(len(names), np.int64)
    for i, name in enumerate(names):
        try:
            node = graph.index(name)
        except ScenarioError:
            raise ScenarioError(
                f"{what}[{i}] ({name!r}) is not a node of the topology; hosts look like {graph.host_names()[:3]}"
            ) from None
        if graph.nodes[node].kind != HOST:
            raise ScenarioError(f"{what}[{i}] ({name!r}) is a {graph.nodes[node].kind}; flows must end at hosts")
        out[i] = node
    return out


def _strings(values: Sequence[str], codes: np.ndarray) -> pd.Categorical:
    """``values[codes]`` as a categorical column (``""`` everywhere when ``values`` is empty).

    The categories are the distinct ``values`` in sorted order, so the column sorts, groups and prints
    as the strings do; building it is an integer gather, instead of one object pointer per row.
    """
    if not values:
        values, codes = ("",), np.zeros(codes.shape[0], np.int64)
    cats, inverse = np.unique(np.asarray(values, dtype=object), return_inverse=True)
    small = np.int8 if cats.shape[0] <= 127 else np.int16 if cats.shape[0] <= 32767 else np.int32
    dtype = pd.CategoricalDtype(pd.Index(list(cats), dtype="str"))
    return pd.Categorical.from_codes(inverse.astype(small)[codes], dtype=dtype, validate=False)


def _link_bytes(paths: FlowPaths, n_links: int) -> np.ndarray:
    return paths.res_bytes[: 2 * n_links].reshape(n_links, 2)


def _kernel(config: AnalyticConfig) -> ctypes.CDLL | None:
    """The native kernel when ``config.engine`` asks for it and it builds, else None (numpy)."""
    return None if config.engine == "numpy" else load_kernel(required=config.engine == "native")


def _run(lib: ctypes.CDLL | None, config: AnalyticConfig, *args, **kwargs) -> tuple[EngineResult, str]:
    """Run the event loop: native with ``lib``, else numpy; returns the result and the engine used."""
    kwargs.update(tolerance_s=config.time_tolerance_s, incremental=config.incremental)
    if lib is not None:
        # mypy cannot see that *args ends at ``capacity``, before ``keep_drain``
        return replay_native(lib, *args, keep_drain=False, **kwargs), "native"  # type: ignore[misc]
    return replay(*args, **kwargs), "numpy"


def route_plan(
    graph: NetGraph,
    plan: ExecutionPlan,
    flows: PlanFlows,
    size: np.ndarray,
    links: LinkArrays,
    config: AnalyticConfig,
    seed: int,
    routes: NextHopTable,
    lib: ctypes.CDLL | None,
    per_task: bool = False,
) -> FlowPaths:
    """Paths of the plan's flows (``size``: their bytes, per flow, or per task with ``per_task``): one walk
    per connection (``flows.connection``), else one per flow."""
    gpu_node = _host_nodes(graph, plan.gpus, "plan.gpus")
    fl = flows.task
    if flows.connection is None or flows.first is None:
        src, dst = gpu_node[plan.gpu[fl]], gpu_node[plan.dst[fl]]
        return route_flows(graph, links, src, dst, fl, size[fl] if per_task else size, config, seed, routes, lib)
    lead = fl[flows.first]  # the first flow task of each connection
    src, dst = gpu_node[plan.gpu[lead]], gpu_node[plan.dst[lead]]
    key = np.arange(lead.shape[0], dtype=np.int64)  # connection ids are dense
    figures = lib is None  # the native loop computes latencies and ideal FCTs as flows start
    task = fl if per_task else None
    return route_connections(
        graph, links, src, dst, key, flows.connection, size, config, seed, routes, lib, figures=figures, task=task
    )


def _name_columns(plan: ExecutionPlan, fl: np.ndarray, fresh: Sequence[np.ndarray] = ()) -> dict[str, object]:
    """The flows table's columns that depend on the plan only (task, src, dst, category, label); also
    faults in the pages of the ``fresh`` arrays (:func:`~hetero_ns3.network.analytic.prefault.populate`)."""
    populate(fresh)
    return {
        "task": fl.copy(),
        "src": _strings(plan.gpus, plan.gpu[fl]),
        "dst": _strings(plan.gpus, plan.dst[fl]),
        "category": _strings(plan.categories, plan.category[fl]),
        "label": _strings(plan.labels, plan.label[fl]),
    }


def simulate_plan(
    graph: NetGraph,
    plan: ExecutionPlan,
    config: AnalyticConfig = DEFAULT_CONFIG,
    seed: int = 0,
    routes: Routes | None = None,
) -> AnalyticResult:
    """Replay ``plan`` on ``graph`` with max-min fair flows (see docs/analytic.md).

    ``plan.gpus`` name hosts of ``graph``. ``seed`` chooses the ECMP hash; with ``config.ecmp_key ==
    "connection"`` all flows of one connection (:meth:`~hetero_ns3.plan.dag.ExecutionPlan.flow_connections`)
    take one path. ``routes`` (optional) are
    precomputed next-hop tables (:func:`hetero_ns3.topology.routing.routing_tables`) to reuse across runs.
    Two more threads reverse the dependency lists and number the flows (C passes, which release the
    GIL) while the routing tables are searched (Python), and one builds the name columns of the flows
    table while the event loop runs.
    """
    t0 = time.perf_counter()
    lib = _kernel(config)
    with ThreadPoolExecutor(max_workers=2) as pool:
        succ = None if lib is None else pool.submit(successors_native, lib, plan.dep_ptr, plan.dep_idx, True)
        flows_job = pool.submit(plan_flows, plan, config.ecmp_key == "connection", lib, codes=lib is not None)
        table = resolve_next_hops(graph, routes)  # Python searches (GIL) while the two C passes run
        flows = flows_job.result()
        links = link_arrays(graph, config)
        size = plan.size_bytes[flows.task]
        paths = route_plan(graph, plan, flows, size, links, config, seed, table, lib)
        t_route = time.perf_counter() - t0
        successors = None if succ is None else succ.result()
        fct = np.empty(flows.task.shape[0])
        names = pool.submit(_name_columns, plan, flows.task, (fct,))
        out, engine, times = _replay_plan(lib, config, plan, flows, size, paths, links, successors)
        columns = names.result()
    fl = flows.task
    flow_start, flow_finish, ideal = times
    columns.update(id=fl, size_bytes=size, start_s=flow_start, finish_s=flow_finish)
    columns.update(fct_s=np.subtract(flow_finish, flow_start, out=fct), ideal_fct_s=ideal)
    flows_df = pd.DataFrame({k: columns[k] for k in _FLOW_TABLE}, copy=False)  # fresh arrays: no copy
    s = out.stats
    stats = AnalyticStats(
        len(plan),
        int(fl.size),
        s.events,
        s.rate_updates,
        s.fill_rounds,
        s.max_active_flows,
        s.reused_rates,
        s.recomputed_rates,
        t_route,
        s.wall_s,
        time.perf_counter() - t0,
        engine,
    )
    return AnalyticResult(TaskTimes(out.start_s, out.finish_s), flows_df, _link_bytes(paths, len(graph.links)), stats)


#: Columns of :attr:`AnalyticResult.flows`, in order.
_FLOW_TABLE = (
    "id", "task", "src", "dst", "size_bytes", "start_s", "finish_s", "fct_s", "ideal_fct_s", "category", "label",
)  # fmt: skip


def _replay_plan(
    lib: ctypes.CDLL | None,
    config: AnalyticConfig,
    plan: ExecutionPlan,
    flows: PlanFlows,
    size: np.ndarray,
    paths: FlowPaths,
    links: LinkArrays,
    successors: tuple[np.ndarray, ...] | None,
) -> tuple[EngineResult, str, tuple[np.ndarray, np.ndarray, np.ndarray]]:
    """The event loop over the plan (``size``: bytes per flow row); also returns the start, finish and ideal FCT of every flow row."""
    fl = flows.task
    extra: dict[str, object] = {}
    ideal = paths.ideal_fct_s
    if lib is not None:
        flow_times = (np.empty(fl.shape[0]), np.empty(fl.shape[0]))
        extra.update(path_row=paths.row, successors=successors, flow_times_out=flow_times, flow_sizes=size)
        extra.update(task_code=flows.code, finish_out=flows.code)  # the loop writes finish times over the codes
        if ideal is None:  # the loop computes latencies and ideal FCTs
            ideal = np.empty(fl.shape[0])
            extra.update(links=links, store_and_forward=config.store_and_forward, ideal_out=ideal)
    is_flow = None if lib is not None else plan.kind == FLOW
    res = paths.paths if lib is not None else paths.res
    args = (is_flow, plan.duration_s, plan.dep_ptr, plan.dep_idx, flows.row, plan.size_bytes, res)
    out, engine = _run(lib, config, *args, paths.latency_s, links.capacity, **extra)
    if lib is None:
        flow_times = (out.start_s[fl], out.finish_s[fl])
    assert ideal is not None
    return out, engine, (*flow_times, ideal)


def simulate_flows(
    graph: NetGraph,
    flows: pd.DataFrame,
    config: AnalyticConfig = DEFAULT_CONFIG,
    seed: int = 0,
    routes: Routes | None = None,
) -> pd.DataFrame:
    """Independent flows with start times: columns ``src``, ``dst`` (host names), ``size_bytes``, ``start_s``.

    An optional ``label`` column is carried over. Every row is its own connection (ECMP hashes its id). Returns id (row position), src, dst, size_bytes,
    start_s, finish_s, fct_s, ideal_fct_s, label.
    """
    for col in ("src", "dst", "size_bytes", "start_s"):
        if col not in flows.columns:
            raise ScenarioError(f"flows table has no column {col!r}; it needs src, dst, size_bytes, start_s")
    n = len(flows)
    src = _host_nodes(graph, flows["src"].astype(str).tolist(), "flows.src")
    dst = _host_nodes(graph, flows["dst"].astype(str).tolist(), "flows.dst")
    size = flows["size_bytes"].to_numpy()
    start = flows["start_s"].to_numpy(dtype=np.float64)
    if not np.issubdtype(size.dtype, np.integer) or np.any(size <= 0):
        bad = int(np.flatnonzero(~(size > 0))[0]) if np.any(~(size > 0)) else 0
        raise ScenarioError(f"flows.size_bytes[{bad}] ({size[bad]!r}) must be a positive integer number of bytes")
    if np.any(~np.isfinite(start) | (start < 0)):
        bad = int(np.flatnonzero(~np.isfinite(start) | (start < 0))[0])
        raise ScenarioError(f"flows.start_s[{bad}] ({start[bad]!r}) must be a finite time >= 0 s")
    if np.any(src == dst):
        bad = int(np.flatnonzero(src == dst)[0])
        raise ScenarioError(f"flows row {bad} goes from {flows['src'].iloc[bad]!r} to itself; drop it")
    size = size.astype(np.int64)
    links = link_arrays(graph, config)
    ids = np.arange(n, dtype=np.int64)
    lib = _kernel(config)
    paths = route_flows(graph, links, src, dst, ids, size, config, seed, routes, lib)
    out, _ = _run(
        lib,
        config,
        np.ones(n, bool),
        np.zeros(n),
        np.zeros(n + 1, np.int64),
        np.zeros(0, np.int64),
        ids,
        size,
        paths.res,
        paths.latency_s,
        links.capacity,
        release_s=start,
    )
    label = flows["label"].to_numpy(dtype=object) if "label" in flows.columns else np.full(n, "flow", dtype=object)
    return pd.DataFrame(
        {
            "id": ids,
            "src": flows["src"].to_numpy(dtype=object),
            "dst": flows["dst"].to_numpy(dtype=object),
            "size_bytes": size,
            "start_s": out.start_s,
            "finish_s": out.finish_s,
            "fct_s": out.finish_s - out.start_s,
            "ideal_fct_s": paths.ideal_fct_s,
            "label": label,
        }
    )
