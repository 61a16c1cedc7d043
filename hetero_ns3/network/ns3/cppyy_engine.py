"""The native module through cppyy (``from ns import ns``): the interactive path, not the run path.

:class:`CppyyEngine` has the interface of :class:`hetero_ns3.network.ns3.capi.CapiEngine` but calls
the C++ classes through cppyy, so a run can go either way with the same Python code in between
(the tests compare the two bit for bit). Importing ns-3 this way costs ~12 s and ~700 MB; the
simulation front ends (:func:`~hetero_ns3.network.ns3.roce.simulate_flows`,
:func:`~hetero_ns3.network.ns3.replay.run_plan`) use it only when asked (``engine="cppyy"``).
``raw`` of a network or replay is the cppyy object, for interactive use of its C++ methods.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from hetero_ns3.network.ns3 import ns3env
from hetero_ns3.network.ns3.capi import NETWORK_ARRAYS, REPLAY_ARRAYS


def vector_to_numpy(vec: Any, dtype: Any) -> np.ndarray:
    """Copy a cppyy ``std::vector`` into a numpy array."""
    n = int(vec.size())
    if n == 0:
        return np.empty(0, dtype=dtype)
    return np.frombuffer(vec.data(), dtype=dtype, count=n).copy()


_FLOW_DTYPES = (np.uint32, np.uint32, np.uint64, np.uint8, np.float64)

_NETWORK_GETTERS: dict[str, str] = {
    "flow_start": "GetFlowStartTimes",
    "flow_finish": "GetFlowFinishTimes",
    "flow_ack": "GetFlowAckTimes",
    "flow_base_rtt": "GetFlowBaseRtts",
    "flow_ideal": "GetFlowIdealFcts",
    "flow_retransmits": "GetFlowRetransmits",
    "flow_cnps": "GetFlowCnps",
    "flow_acks": "GetFlowAcks",
    "flow_first_hops": "GetFlowFirstHops",
    "port_paused": "GetPortPausedSeconds",
    "sample_time": "GetQueueSampleTimes",
    "sample_port": "GetQueueSamplePorts",
    "sample_bytes": "GetQueueSampleBytes",
    "sample_tx_bytes": "GetQueueSampleTxBytes",
}
_REPLAY_GETTERS: dict[str, str] = {"start": "GetStartTimes", "finish": "GetFinishTimes", "flow_ids": "GetFlowIds"}


class CppyyNetwork:
    """An ``ns3::RdmaNetwork`` created through cppyy; ``raw`` is the cppyy object."""

    def __init__(self, ns: Any) -> None:
        self._ns = ns
        self.raw = ns.CreateObject[ns.RdmaNetwork]()

    def add_nodes(self, is_host: np.ndarray, buffers: np.ndarray) -> None:
        self.raw.AddNodes(is_host, buffers, len(is_host))

    def add_links(self, a: np.ndarray, b: np.ndarray, rate: np.ndarray, delay: np.ndarray, seg: np.ndarray) -> None:
        self.raw.AddLinks(a, b, rate, delay, seg, len(a))

    def cap_port_rates(self, port: np.ndarray, rate: np.ndarray) -> None:
        port, rate = np.ascontiguousarray(port, dtype=np.uint32), np.ascontiguousarray(rate, dtype=np.float64)
        self.raw.CapPortRates(port, rate, len(port))

    def add_routes(self, node: np.ndarray, dst: np.ndarray, link: np.ndarray) -> None:
        self.raw.AddRoutes(node, dst, link, len(node))

    def build(self) -> None:
        self.raw.Build()

    def add_flows(self, src: Any, dst: Any, size: Any, prio: Any, start: Any) -> None:
        arrs = [
            np.ascontiguousarray(x, dtype=t) for x, t in zip((src, dst, size, prio, start), _FLOW_DTYPES, strict=True)
        ]
        self.raw.AddFlows(*arrs, len(arrs[0]))

    def sample_queues(self, ports: np.ndarray, interval_s: float, until_s: float) -> None:
        s = self._ns.Seconds
        self.raw.SampleQueues(ports, len(ports), s(float(interval_s)), s(float(until_s)))

    def set_link_rate(self, link: int, rate_bps: float, at_s: float) -> None:
        self.raw.SetLinkRate(link, rate_bps, self._ns.Seconds(float(at_s)))

    def set_link_up(self, link: int, up: bool, at_s: float) -> None:
        self.raw.SetLinkUp(link, up, self._ns.Seconds(float(at_s)))

    def run(self, stop_s: float) -> None:
        self.raw.Run(self._ns.Seconds(float(stop_s)))

    def read(self, name: str) -> np.ndarray:
        if name.startswith("port:"):
            return vector_to_numpy(self.raw.GetPortCounter(name[5:]), np.uint64)
        return vector_to_numpy(getattr(self.raw, _NETWORK_GETTERS[name])(), NETWORK_ARRAYS[name])

    def free(self) -> None:
        self.raw.Dispose()


class CppyyReplay:
    """An ``ns3::DagReplay`` created through cppyy."""

    def __init__(self, ns: Any, net: CppyyNetwork) -> None:
        self.raw = ns.CreateObject[ns.DagReplay]()
        self.raw.SetNetwork(net.raw)

    def set_tasks(self, n: int, arrays: tuple[np.ndarray, ...], gpu_nodes: np.ndarray) -> None:
        self.raw.SetTasks(n, *arrays, gpu_nodes, len(gpu_nodes))

    def set_connections(self, connections: np.ndarray) -> None:
        self.raw.SetConnections(connections, len(connections))

    def start(self) -> None:
        self.raw.Start()

    def completed(self) -> int:
        return int(self.raw.GetNCompleted())

    def read(self, name: str) -> np.ndarray:
        return vector_to_numpy(getattr(self.raw, _REPLAY_GETTERS[name])(), REPLAY_ARRAYS[name])

    def free(self) -> None:
        self.raw.Dispose()


class CppyyEngine:
    """Simulator operations through cppyy (imports ns-3 and loads the native module on creation)."""

    name = "cppyy"

    def __init__(self) -> None:
        self.ns = ns3env.import_ns()
        ns3env.load_module()
        ns3env.cppyy().include("dag-replay.h")

    def set_seed(self, seed: int, run: int) -> None:
        self.ns.RngSeedManager.SetSeed(seed)
        self.ns.RngSeedManager.SetRun(run)

    def set_default(self, name: str, value: str) -> None:
        self.ns.Config.SetDefault(name, self.ns.StringValue(value))

    def set_scheduler(self, type_id: str) -> None:
        factory = self.ns.ObjectFactory()
        factory.SetTypeId(type_id)
        self.ns.Simulator.SetScheduler(factory)

    def network(self) -> CppyyNetwork:
        return CppyyNetwork(self.ns)

    def replay(self, net: CppyyNetwork) -> CppyyReplay:
        return CppyyReplay(self.ns, net)

    def run_for(self, step_s: float) -> None:
        self.ns.Simulator.Stop(self.ns.Seconds(step_s))
        self.ns.Simulator.Run()

    def now_s(self) -> float:
        return float(self.ns.Simulator.Now().GetSeconds())

    def event_count(self) -> int:
        return int(self.ns.Simulator.GetEventCount())

    def destroy(self) -> None:
        self.ns.Simulator.Destroy()

    def profile(self) -> dict[str, int]:
        """Events of the current network by kind, and ``data_frames`` (``RoceProfile``)."""
        ns3env.cppyy().include("roce-profile.h")
        prof = self.ns.RoceProfile
        n = int(self.ns.EV_KIND_COUNT)
        out = {str(prof.Name(k)): int(prof.Get(k)) for k in range(n)}
        out["data_frames"] = int(prof.GetDataFrames())
        return out
