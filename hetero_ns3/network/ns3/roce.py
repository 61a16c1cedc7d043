"""Python front of the native RoCE module: build a network from a NetGraph, run flows, read results.

All per-packet and per-flow work runs in C++ (``ns3::RdmaNetwork``). Python hands the graph, the
forwarding tables and the flows over as numpy arrays, runs the simulator once, reads results back
as arrays and turns them into DataFrames. Each run ends with ``Simulator::Destroy()``, so runs can
follow one another in one process.

Runs go through the module's C ABI (:mod:`hetero_ns3.network.ns3.capi`, ctypes: no ``import ns``).
``engine="cppyy"`` runs the same calls through cppyy instead (same results bit for bit), and
:func:`build_network` / :func:`open_network` hand out the cppyy object for interactive use.

Typical use::

    from hetero_ns3.network.ns3.roce import simulate_flows
    res = simulate_flows(graph, flows_df, NetworkConfig(cc=CcConfig(kind="hpcc")), seed=1)
    res.flows, res.ports, res.queues
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterator, Sequence
from typing import Any

import numpy as np
import pandas as pd

from hetero_ns3.errors import ScenarioError, SimulationError, field_error
from hetero_ns3.network.config import NetworkConfig
from hetero_ns3.network.flows_io import FlowArrays, flow_arrays
from hetero_ns3.network.ns3.attributes import attribute_settings
from hetero_ns3.network.ns3.base_rtt import resolve_hpcc_base_rtt
from hetero_ns3.network.ns3.pacing import nic_paced_ports, port_rates
from hetero_ns3.network.ns3.profile import event_profile
from hetero_ns3.network.ns3.results import CC_TRACE_KINDS, DROP_REASONS, PORT_COUNTERS, FlowResults
from hetero_ns3.topology.graph import HOST, NetGraph
from hetero_ns3.topology.routing import routing_tables


def port_id(graph: NetGraph, link: int, node: str) -> int:
    """Port id of link ``link`` at node ``node``: ``2*link`` at end ``a``, ``2*link+1`` at end ``b``."""
    if not 0 <= link < len(graph.links):
        raise field_error("link", link, f"is not a link index of this graph (0..{len(graph.links) - 1})")
    lk = graph.links[link]
    if node == lk.a:
        return 2 * link
    if node == lk.b:
        return 2 * link + 1
    raise field_error("node", node, f"is not an end of link {link} ({lk.a!r} - {lk.b!r})")


def egress_port(graph: NetGraph, src: str, dst: str) -> int:
    """Port id of the (first) link from ``src`` to its neighbour ``dst``."""
    for li, lk in enumerate(graph.links):
        if (lk.a, lk.b) == (src, dst) or (lk.b, lk.a) == (src, dst):
            return port_id(graph, li, src)
    raise ScenarioError(f"no link between {src!r} and {dst!r}")


ENGINES: tuple[str, ...] = ("capi", "cppyy")
"""Ways into the native module: its C ABI through ctypes (the run path) or cppyy (interactive)."""


def make_engine(engine: str = "capi") -> Any:
    """A :class:`~hetero_ns3.network.ns3.capi.CapiEngine` or :class:`~hetero_ns3.network.ns3.cppyy_engine.CppyyEngine`."""
    if engine == "capi":
        from hetero_ns3.network.ns3.capi import CapiEngine  # noqa: PLC0415

        return CapiEngine()
    if engine == "cppyy":
        from hetero_ns3.network.ns3.cppyy_engine import CppyyEngine  # noqa: PLC0415 (imports ns-3: ~12 s)

        return CppyyEngine()
    raise field_error("engine", engine, "is not a way into the native module", f"use one of {list(ENGINES)}")


def vector_to_numpy(vec: Any, dtype: Any) -> np.ndarray:
    """Copy a cppyy ``std::vector`` into a numpy array (for interactive use of :func:`open_network`)."""
    from hetero_ns3.network.ns3.cppyy_engine import vector_to_numpy as convert  # noqa: PLC0415

    return convert(vec, dtype)


def _route_arrays(graph: NetGraph) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    nodes: list[int] = []
    dsts: list[int] = []
    links: list[int] = []
    for dst, per_node in routing_tables(graph).items():
        for node, hops in enumerate(per_node):
            for li in hops:
                nodes.append(node)
                dsts.append(dst)
                links.append(li)
    return (
        np.asarray(nodes, dtype=np.uint32),
        np.asarray(dsts, dtype=np.uint32),
        np.asarray(links, dtype=np.uint32),
    )


FAST_SCHEDULER = "ns3::RoceScheduler"
"""Event scheduler for our runs (``native/model/roce-scheduler.h``: 4-ary heap, O(1) removal of pending
events): the same event order as every ns-3 scheduler (time, then insertion id), so the same results;
measured faster than ns-3's map, calendar and priority-queue schedulers on the packet-level benchmark
(docs/benchmarks.md, "Packet level at scale"). Simulator::Destroy resets it, so it is set per run."""


def use_fast_scheduler(ns: Any) -> None:
    """Switch the current simulator (cppyy namespace ``ns``) to :data:`FAST_SCHEDULER` (results are unchanged)."""
    factory = ns.ObjectFactory()
    factory.SetTypeId(FAST_SCHEDULER)
    ns.Simulator.SetScheduler(factory)


def apply_config(config: NetworkConfig, seed: int, engine: Any = None) -> None:
    """Set the ns-3 RNG seed and every mapped attribute default (``Config::SetDefault``).

    ``engine``: from :func:`make_engine` (default: the C ABI).
    """
    if isinstance(seed, bool) or not isinstance(seed, int) or not 1 <= seed < 2**32:
        raise field_error("seed", seed, "must be an integer in [1, 2**32)")
    engine = engine or make_engine()
    engine.set_seed(seed, 1)
    for name, value in attribute_settings(config):
        engine.set_default(name, value)


def check_buffers(graph: NetGraph, config: NetworkConfig) -> None:
    """Raise ScenarioError when a switch's PFC headroom reserve leaves no shared buffer.

    Mirrors RoceSwitch::Setup: per port 2 x rate x delay + 3 x (segment + 128) + 64 bytes, or
    ``pfc.headroom_bytes`` when set; reserved only when PFC is on.
    """
    if not config.pfc.enabled or not config.pfc.lossless_classes:
        return
    reserve = [0.0] * len(graph.nodes)
    idx = {nd.name: i for i, nd in enumerate(graph.nodes)}
    for lk in graph.links:
        seg = getattr(lk, "mtu_bytes", 0) or config.nic.segment_for(lk.kind)
        auto = 2 * lk.rate_bps * lk.delay_s / 8 + 3 * (seg + 128) + 64
        for end in (lk.a, lk.b):
            reserve[idx[end]] += config.pfc.headroom_bytes or int(auto)
    for i, nd in enumerate(graph.nodes):
        if nd.kind == HOST:
            continue
        buf = nd.buffer_bytes or config.buffer.switch_buffer_bytes
        if reserve[i] >= buf:
            path = f"nodes[{i}].buffer_bytes" if nd.buffer_bytes else "buffer.switch_buffer_bytes"
            raise field_error(
                path,
                buf,
                f"leaves no shared buffer at switch {nd.name!r}: its PFC headroom needs {int(reserve[i])} bytes",
                "raise the buffer, lower pfc.headroom_bytes or disable PFC",
            )


def make_network(engine: Any, graph: NetGraph, config: NetworkConfig | None = None, seed: int = 1) -> Any:
    """Configure the simulator and build an ``ns3::RdmaNetwork`` for ``graph`` through ``engine`` (no flows yet).

    Node ids are graph node indices; link l has ports 2l (end a) and 2l+1 (end b). The caller owns
    the returned network: add flows, run, read, then ``engine.destroy()`` and ``net.free()``.
    """
    config = resolve_hpcc_base_rtt(config or NetworkConfig(), graph)
    check_buffers(graph, config)
    apply_config(config, seed, engine)
    engine.set_scheduler(FAST_SCHEDULER)
    net = engine.network()
    kinds = np.asarray([1 if nd.kind == HOST else 0 for nd in graph.nodes], dtype=np.uint8)
    buffers = np.asarray([nd.buffer_bytes or config.buffer.switch_buffer_bytes for nd in graph.nodes], dtype=np.uint64)
    net.add_nodes(kinds, buffers)
    idx = {nd.name: i for i, nd in enumerate(graph.nodes)}
    if graph.links:
        a = np.asarray([idx[lk.a] for lk in graph.links], dtype=np.uint32)
        b = np.asarray([idx[lk.b] for lk in graph.links], dtype=np.uint32)
        rate = np.asarray([lk.rate_bps for lk in graph.links], dtype=np.float64)
        delay = np.asarray([lk.delay_s for lk in graph.links], dtype=np.float64)
        seg = np.asarray(
            [getattr(lk, "mtu_bytes", 0) or config.nic.segment_for(lk.kind) for lk in graph.links], dtype=np.uint32
        )
        net.add_links(a, b, rate, delay, seg)
        paced, caps = nic_paced_ports(graph)
        if len(paced):
            net.cap_port_rates(paced, caps)
    rn, rd, rl = _route_arrays(graph)
    if len(rn):
        net.add_routes(rn, rd, rl)
    net.build()
    return net


@contextlib.contextmanager
def network_session(
    graph: NetGraph, config: NetworkConfig | None = None, seed: int = 1, engine: str = "capi"
) -> Iterator[tuple[Any, Any]]:
    """Yields ``(engine, net)`` from :func:`make_network`; destroys the simulator and frees the network after."""
    eng = make_engine(engine)
    net = make_network(eng, graph, config, seed)
    try:
        yield eng, net
    finally:
        eng.destroy()
        net.free()


def build_network(graph: NetGraph, config: NetworkConfig | None = None, seed: int = 1) -> Any:
    """Create and ``Build()`` an ``ns3::RdmaNetwork`` for ``graph`` through cppyy; return the cppyy object.

    For interactive use of the C++ API (imports ns-3). The caller owns the object: add flows, run,
    read, then ``ns.Simulator.Destroy()`` and ``net.Dispose()``.
    """
    return make_network(make_engine("cppyy"), graph, config, seed).raw


@contextlib.contextmanager
def open_network(graph: NetGraph, config: NetworkConfig | None = None, seed: int = 1) -> Iterator[tuple[Any, Any]]:
    """Context manager around :func:`build_network`: yields the cppyy ``(ns, net)``; destroys the simulator after.

    For interactive use of ``ns3::RdmaNetwork`` from Python (C++ callbacks, single objects)::

        with open_network(graph, cfg) as (ns, net):
            fid = net.CreateFlow(0, 1, 10**6, 3)
            net.ScheduleFlow(fid, ns.Seconds(0.0))
            net.Run(ns.Seconds(0.0))
            finish = net.GetFlowFinishTimes()
    """
    with network_session(graph, config, seed, engine="cppyy") as (eng, net):
        yield eng.ns, net.raw


def _check_routes(graph: NetGraph, arrays: FlowArrays) -> None:
    tables = routing_tables(graph)
    for r in range(len(arrays)):
        s, d = int(arrays.src[r]), int(arrays.dst[r])
        if not tables[d][s]:
            raise ScenarioError(
                f"flows row {r}: no route from {graph.nodes[s].name!r} to {graph.nodes[d].name!r}; connect them"
            )


def simulate_flows(
    graph: NetGraph,
    flows: pd.DataFrame | FlowArrays,
    config: NetworkConfig | None = None,
    seed: int = 1,
    stop_time_s: float | None = None,
    sample_ports: Sequence[int] = (),
    sample_interval_s: float = 1e-6,
    *,
    engine: str = "capi",
    trace_cc: bool = False,
) -> FlowResults:
    """Simulate ``flows`` on ``graph`` with the native RoCE module and return DataFrames.

    ``flows``: a DataFrame with ``src, dst, size_bytes, start_s`` (+ ``priority``) or FlowArrays.
    ``stop_time_s``: stop the simulation at this time (None: when every flow is done).
    ``sample_ports``: port ids (see :func:`port_id`) whose queue bytes are sampled every
    ``sample_interval_s`` while flows are unfinished. Same seed and inputs give the same results.
    ``engine``: ``capi`` (the C ABI, no ns-3 import) or ``cppyy``; both give the same results.
    ``trace_cc``: record every congestion-control state change, CNP and ECN mark in
    ``FlowResults.cc_trace`` (``ns3::RdmaCcProbe``, reached through cppyy: this runs on the cppyy engine).
    """
    config = config or NetworkConfig()
    arrays = flows if isinstance(flows, FlowArrays) else flow_arrays(graph, flows)
    _check_routes(graph, arrays)
    if stop_time_s is not None and not stop_time_s > 0:
        raise field_error("stop_time_s", stop_time_s, "must be > 0 seconds or None")
    n_ports = 2 * len(graph.links)
    for i, p in enumerate(sample_ports):
        if not 0 <= int(p) < n_ports:
            raise field_error(f"sample_ports[{i}]", p, f"is not a port id (0..{n_ports - 1})")
    if sample_ports and not sample_interval_s > 0:
        raise field_error("sample_interval_s", sample_interval_s, "must be > 0 seconds")
    eng = make_engine("cppyy" if trace_cc else engine)
    t0 = time.perf_counter()
    net = make_network(eng, graph, config, seed)
    try:
        if len(arrays):
            net.add_flows(arrays.src, arrays.dst, arrays.size_bytes, arrays.priority, arrays.start_s)
        probe = _attach_probe(graph, net) if trace_cc else None
        if sample_ports:
            net.sample_queues(np.asarray(sample_ports, dtype=np.uint32), float(sample_interval_s), 0.0)
        ev0 = eng.event_count()
        net.run(float(stop_time_s or 0.0))
        events = eng.event_count() - ev0
        sim_time = eng.now_s()
        profile = event_profile(eng.profile(), events)
        flows_df = _flows_frame(graph, arrays, net)
        ports_df = ports_frame(graph, net)
        queues_df = pd.DataFrame(
            {
                "time_s": net.read("sample_time"),
                "port": net.read("sample_port"),
                "bytes": net.read("sample_bytes"),
                "tx_bytes": net.read("sample_tx_bytes"),
            }
        )
        cc_trace = _probe_frame(probe) if probe is not None else None
    except SimulationError:
        raise
    except Exception as exc:  # pragma: no cover - C++ errors surface here
        raise SimulationError(f"native RoCE simulation failed: {exc}") from exc
    finally:
        eng.destroy()
        net.free()
    wall = time.perf_counter() - t0
    return FlowResults(flows_df, ports_df, queues_df, wall, events, sim_time, seed, cc_trace, profile)


def _attach_probe(graph: NetGraph, net: Any) -> Any:
    """An ``ns3::RdmaCcProbe`` watching every NIC and switch of ``net`` (before any flow starts)."""
    from hetero_ns3.network.ns3 import ns3env

    ns = ns3env.import_ns()
    probe = ns.CreateObject[ns.RdmaCcProbe]()
    for i, nd in enumerate(graph.nodes):
        if nd.kind == HOST:
            probe.WatchNic(net.raw.GetNic(i))
        else:
            probe.WatchSwitch(net.raw.GetSwitch(i))
    return probe


def _probe_frame(probe: Any) -> pd.DataFrame:
    kinds = np.asarray(CC_TRACE_KINDS, dtype=object)
    return pd.DataFrame(
        {
            "time_s": vector_to_numpy(probe.GetTimes(), np.float64),
            "flow_id": vector_to_numpy(probe.GetFlows(), np.uint32).astype(np.int64),
            "kind": kinds[vector_to_numpy(probe.GetKinds(), np.uint8)],
            "value": vector_to_numpy(probe.GetValues(), np.float64),
        }
    )


def _flows_frame(graph: NetGraph, arrays: FlowArrays, net: Any) -> pd.DataFrame:
    names = np.asarray([nd.name for nd in graph.nodes], dtype=object)
    finish = net.read("flow_finish")
    ack = net.read("flow_ack")
    ideal = net.read("flow_ideal")
    finish[finish < 0] = np.nan
    ack[ack < 0] = np.nan
    ideal[ideal < 0] = np.nan
    fct = finish - arrays.start_s
    return pd.DataFrame(
        {
            "flow_id": np.arange(len(arrays), dtype=np.int64),
            "src": names[arrays.src],
            "dst": names[arrays.dst],
            "size_bytes": arrays.size_bytes.astype(np.int64),
            "start_s": arrays.start_s,
            "priority": arrays.priority.astype(np.int64),
            "finish_s": finish,
            "fct_s": fct,
            "ack_s": ack,
            "ideal_fct_s": ideal,
            "slowdown": fct / ideal,
            "base_rtt_s": net.read("flow_base_rtt"),
            "retransmits": net.read("flow_retransmits").astype(np.int64),
            "first_switch_port": net.read("flow_first_hops").astype(np.int64),
            "cnps": net.read("flow_cnps").astype(np.int64),
            "acks": net.read("flow_acks").astype(np.int64),
        }
    )


def ports_frame(graph: NetGraph, net: Any) -> pd.DataFrame:
    m = len(graph.links)
    node: list[str | None] = [None] * (2 * m)
    peer: list[str | None] = [None] * (2 * m)
    rate = port_rates(graph)
    kind = [""] * (2 * m)
    for li, lk in enumerate(graph.links):
        node[2 * li], peer[2 * li] = lk.a, lk.b
        node[2 * li + 1], peer[2 * li + 1] = lk.b, lk.a
        kind[2 * li] = kind[2 * li + 1] = lk.kind
    cols: dict[str, Any] = {
        "port": np.arange(2 * m, dtype=np.int64),
        "link": np.arange(2 * m, dtype=np.int64) // 2,
        "node": node,
        "peer": peer,
        "kind": kind,
        "rate_bps": rate,
    }
    for c in PORT_COUNTERS:
        cols[c] = net.read(f"port:{c}").astype(np.int64)
    cols["paused_s"] = net.read("port_paused")
    total = np.zeros(2 * m, dtype=np.int64)
    for r in DROP_REASONS:
        v = net.read(f"port:drops_{r}").astype(np.int64)
        cols[f"drops_{r}"] = v
        total += v
    cols["drops_total"] = total
    return pd.DataFrame(cols)
