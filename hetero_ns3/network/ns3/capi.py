"""The native module through its C ABI (``native/helper/hns3-capi.h``), loaded with ctypes.

This is the run path of the ns3 backend: it loads ``libhetero-ns3-native.so`` (built or reused
from the cache by :mod:`hetero_ns3.network.native_build`) with ``dlopen``; the library's run path
finds the ``ns3`` wheel's ``libns3.44-*.so``. Nothing here imports ``ns`` or ``cppyy``, so start-up
costs milliseconds instead of the ~12 s of ``from ns import ns`` (which parses every ns-3 header).

:class:`CapiEngine` offers the operations the simulation front ends need (configure, build a
network from arrays, load a plan, run to a time, read arrays back, free), with the same call order
and arguments as the C++ API, so results are the same bit for bit as through cppyy.
"""

from __future__ import annotations

import ctypes
import os
import threading
from ctypes import c_char_p, c_double, c_int, c_int64, c_uint32, c_uint64, c_void_p
from typing import Any

import numpy as np

from hetero_ns3.errors import NativeBuildError, SimulationError
from hetero_ns3.network.native_build import ROCE_MODULE, BuiltModule, build_module, preload_ns3_libraries

#: The ``hns3_abi_version()`` this wrapper speaks.
ABI_VERSION = 2

_P = c_void_p
_SIGNATURES: dict[str, tuple[Any, list[Any]]] = {
    "hns3_abi_version": (c_int, []),
    "hns3_last_error": (c_char_p, []),
    "hns3_set_default": (c_int, [c_char_p, c_char_p]),
    "hns3_attribute_exists": (c_int, [c_char_p]),
    "hns3_set_seed": (None, [c_uint32, c_uint64]),
    "hns3_set_scheduler": (c_int, [c_char_p]),
    "hns3_simulator_run_for": (None, [c_double]),
    "hns3_simulator_now": (c_double, []),
    "hns3_simulator_event_count": (c_uint64, []),
    "hns3_simulator_destroy": (None, []),
    "hns3_profile_read": (c_int64, [_P, c_int64]),
    "hns3_profile_name": (c_char_p, [c_uint32]),
    "hns3_network_new": (_P, []),
    "hns3_network_free": (None, [_P]),
    "hns3_network_add_nodes": (c_int, [_P, _P, _P, c_uint32]),
    "hns3_network_add_links": (c_int, [_P, _P, _P, _P, _P, _P, c_uint32]),
    "hns3_network_cap_port_rates": (c_int, [_P, _P, _P, c_uint32]),
    "hns3_network_add_routes": (c_int, [_P, _P, _P, _P, c_uint64]),
    "hns3_network_build": (c_int, [_P]),
    "hns3_network_add_flows": (c_int, [_P, _P, _P, _P, _P, _P, c_uint32]),
    "hns3_network_sample_queues": (c_int, [_P, _P, c_uint32, c_double, c_double]),
    "hns3_network_set_link_rate": (c_int, [_P, c_uint32, c_double, c_double]),
    "hns3_network_set_link_up": (c_int, [_P, c_uint32, c_int, c_double]),
    "hns3_network_run": (c_int, [_P, c_double]),
    "hns3_network_count": (c_uint32, [_P, c_char_p]),
    "hns3_network_read": (c_int64, [_P, c_char_p, _P, c_int64]),
    "hns3_replay_new": (_P, [_P]),
    "hns3_replay_free": (None, [_P]),
    "hns3_replay_set_tasks": (c_int, [_P, c_uint32, _P, _P, _P, _P, _P, _P, _P, _P, _P, c_uint32]),
    "hns3_replay_set_connections": (c_int, [_P, _P, c_uint32]),
    "hns3_replay_start": (c_int, [_P]),
    "hns3_replay_completed": (c_uint32, [_P]),
    "hns3_replay_read": (c_int64, [_P, c_char_p, _P, c_int64]),
}

#: dtype of each result array of ``hns3_network_read`` / ``hns3_replay_read`` (``port:*``: uint64).
NETWORK_ARRAYS: dict[str, Any] = {
    "flow_start": np.float64,
    "flow_finish": np.float64,
    "flow_ack": np.float64,
    "flow_base_rtt": np.float64,
    "flow_ideal": np.float64,
    "flow_retransmits": np.uint32,
    "flow_cnps": np.uint32,
    "flow_acks": np.uint32,
    "flow_first_hops": np.uint32,
    "port_paused": np.float64,
    "sample_time": np.float64,
    "sample_port": np.uint32,
    "sample_bytes": np.uint64,
    "sample_tx_bytes": np.uint64,
}
REPLAY_ARRAYS: dict[str, Any] = {"start": np.float64, "finish": np.float64, "flow_ids": np.int64}

_lock = threading.Lock()
_lib: ctypes.CDLL | None = None
_built: BuiltModule | None = None


def load_library() -> ctypes.CDLL:
    """Build (or reuse) the native module and ``dlopen`` it; idempotent."""
    global _lib, _built
    with _lock:
        if _lib is not None:
            return _lib
        built = build_module(ROCE_MODULE)
        try:
            preload_ns3_libraries(ROCE_MODULE)  # this venv's ns-3, whichever venv linked the cached module
            # RTLD_GLOBAL: cppyy (if the process also uses it) resolves the module's C++ symbols from it.
            lib = ctypes.CDLL(str(built.library), mode=os.RTLD_NOW | os.RTLD_GLOBAL)
        except OSError as exc:
            raise NativeBuildError(f"loading {built.library} with ctypes failed: {exc}") from exc
        for name, (restype, argtypes) in _SIGNATURES.items():
            fn = getattr(lib, name)
            fn.restype = restype
            fn.argtypes = argtypes
        if lib.hns3_abi_version() != ABI_VERSION:
            raise NativeBuildError(
                f"{built.library} speaks C ABI {lib.hns3_abi_version()}, this package {ABI_VERSION}; "
                "rebuild with: hetero-ns3 build --force"
            )
        _lib, _built = lib, built
    return lib


def built_module() -> BuiltModule | None:
    """The build record of the loaded library (None before :func:`load_library`)."""
    return _built


def _ptr(arr: np.ndarray) -> int:
    return arr.ctypes.data


def _check(lib: ctypes.CDLL, rc: int, what: str) -> None:
    if rc != 0:
        msg = (lib.hns3_last_error() or b"").decode(errors="replace")
        raise SimulationError(f"native {what} failed: {msg}")


def _read(lib: ctypes.CDLL, fn: Any, handle: int, name: str, dtype: Any) -> np.ndarray:
    key = name.encode()
    n = int(fn(handle, key, None, 0))
    if n < 0:
        raise SimulationError(f"native read of {name!r} failed: {(lib.hns3_last_error() or b'').decode()}")
    out = np.empty(n, dtype=dtype)
    if n:
        got = int(fn(handle, key, _ptr(out), n))
        if got != n:  # pragma: no cover - the array cannot change between two reads
            raise SimulationError(f"native read of {name!r}: length changed from {n} to {got}")
    return out


class CapiNetwork:
    """An ``ns3::RdmaNetwork`` behind a C handle (see ``hns3-capi.h``)."""

    def __init__(self, lib: ctypes.CDLL) -> None:
        self._lib = lib
        self.handle: int = lib.hns3_network_new()

    def add_nodes(self, is_host: np.ndarray, buffers: np.ndarray) -> None:
        h = np.ascontiguousarray(is_host, dtype=np.uint8)
        b = np.ascontiguousarray(buffers, dtype=np.uint64)
        _check(self._lib, self._lib.hns3_network_add_nodes(self.handle, _ptr(h), _ptr(b), len(h)), "AddNodes")

    def add_links(self, a: np.ndarray, b: np.ndarray, rate: np.ndarray, delay: np.ndarray, seg: np.ndarray) -> None:
        arrs = [np.ascontiguousarray(x, dtype=t) for x, t in zip((a, b, rate, delay, seg), _LINK_DTYPES, strict=True)]
        rc = self._lib.hns3_network_add_links(self.handle, *map(_ptr, arrs), len(arrs[0]))
        _check(self._lib, rc, "AddLinks")

    def cap_port_rates(self, port: np.ndarray, rate: np.ndarray) -> None:
        ports = np.ascontiguousarray(port, dtype=np.uint32)
        rates = np.ascontiguousarray(rate, dtype=np.float64)
        rc = self._lib.hns3_network_cap_port_rates(self.handle, _ptr(ports), _ptr(rates), len(ports))
        _check(self._lib, rc, "CapPortRates")

    def add_routes(self, node: np.ndarray, dst: np.ndarray, link: np.ndarray) -> None:
        arrs = [np.ascontiguousarray(x, dtype=np.uint32) for x in (node, dst, link)]
        _check(self._lib, self._lib.hns3_network_add_routes(self.handle, *map(_ptr, arrs), len(arrs[0])), "AddRoutes")

    def build(self) -> None:
        _check(self._lib, self._lib.hns3_network_build(self.handle), "Build")

    def add_flows(self, src: Any, dst: Any, size: Any, prio: Any, start: Any) -> None:
        arrs = [
            np.ascontiguousarray(x, dtype=t) for x, t in zip((src, dst, size, prio, start), _FLOW_DTYPES, strict=True)
        ]
        _check(self._lib, self._lib.hns3_network_add_flows(self.handle, *map(_ptr, arrs), len(arrs[0])), "AddFlows")

    def sample_queues(self, ports: np.ndarray, interval_s: float, until_s: float) -> None:
        p = np.ascontiguousarray(ports, dtype=np.uint32)
        rc = self._lib.hns3_network_sample_queues(self.handle, _ptr(p), len(p), float(interval_s), float(until_s))
        _check(self._lib, rc, "SampleQueues")

    def set_link_rate(self, link: int, rate_bps: float, at_s: float) -> None:
        rc = self._lib.hns3_network_set_link_rate(self.handle, int(link), float(rate_bps), float(at_s))
        _check(self._lib, rc, "SetLinkRate")

    def set_link_up(self, link: int, up: bool, at_s: float) -> None:
        _check(self._lib, self._lib.hns3_network_set_link_up(self.handle, int(link), int(up), float(at_s)), "SetLinkUp")

    def run(self, stop_s: float) -> None:
        _check(self._lib, self._lib.hns3_network_run(self.handle, float(stop_s)), "Run")

    def read(self, name: str) -> np.ndarray:
        dtype = np.uint64 if name.startswith("port:") else NETWORK_ARRAYS[name]
        return _read(self._lib, self._lib.hns3_network_read, self.handle, name, dtype)

    def free(self) -> None:
        if self.handle:
            self._lib.hns3_network_free(self.handle)
            self.handle = 0


_LINK_DTYPES = (np.uint32, np.uint32, np.float64, np.float64, np.uint32)
_FLOW_DTYPES = (np.uint32, np.uint32, np.uint64, np.uint8, np.float64)


class CapiReplay:
    """An ``ns3::DagReplay`` behind a C handle."""

    def __init__(self, lib: ctypes.CDLL, net: CapiNetwork) -> None:
        self._lib = lib
        self.handle: int = lib.hns3_replay_new(net.handle)

    def set_tasks(self, n: int, arrays: tuple[np.ndarray, ...], gpu_nodes: np.ndarray) -> None:
        """``arrays``: kind u8, gpu i32, dst i32, bytes i64, duration f64, priority u8, dep_ptr i64, dep_idx i32."""
        g = np.ascontiguousarray(gpu_nodes, dtype=np.uint32)
        rc = self._lib.hns3_replay_set_tasks(self.handle, n, *map(_ptr, arrays), _ptr(g), len(g))
        _check(self._lib, rc, "DagReplay::SetTasks")

    def set_connections(self, connections: np.ndarray) -> None:
        c = np.ascontiguousarray(connections, dtype=np.int64)
        _check(self._lib, self._lib.hns3_replay_set_connections(self.handle, _ptr(c), len(c)), "SetConnections")

    def start(self) -> None:
        _check(self._lib, self._lib.hns3_replay_start(self.handle), "DagReplay::Start")

    def completed(self) -> int:
        return int(self._lib.hns3_replay_completed(self.handle))

    def read(self, name: str) -> np.ndarray:
        return _read(self._lib, self._lib.hns3_replay_read, self.handle, name, REPLAY_ARRAYS[name])

    def free(self) -> None:
        if self.handle:
            self._lib.hns3_replay_free(self.handle)
            self.handle = 0


class CapiEngine:
    """Process-wide simulator operations plus factories for networks and replays."""

    name = "capi"

    def __init__(self) -> None:
        self._lib = load_library()

    def set_seed(self, seed: int, run: int) -> None:
        self._lib.hns3_set_seed(seed, run)

    def set_default(self, name: str, value: str) -> None:
        _check(self._lib, self._lib.hns3_set_default(name.encode(), value.encode()), "Config::SetDefault")

    def attribute_exists(self, name: str) -> bool:
        return bool(self._lib.hns3_attribute_exists(name.encode()))

    def set_scheduler(self, type_id: str) -> None:
        _check(self._lib, self._lib.hns3_set_scheduler(type_id.encode()), "Simulator::SetScheduler")

    def network(self) -> CapiNetwork:
        return CapiNetwork(self._lib)

    def replay(self, net: CapiNetwork) -> CapiReplay:
        return CapiReplay(self._lib, net)

    def run_for(self, step_s: float) -> None:
        self._lib.hns3_simulator_run_for(float(step_s))

    def now_s(self) -> float:
        return float(self._lib.hns3_simulator_now())

    def event_count(self) -> int:
        return int(self._lib.hns3_simulator_event_count())

    def destroy(self) -> None:
        self._lib.hns3_simulator_destroy()

    def profile(self) -> dict[str, int]:
        """Events of the current network by kind, and ``data_frames`` (``hns3_profile_read``)."""
        n = int(self._lib.hns3_profile_read(None, 0))
        out = np.zeros(n, dtype=np.uint64)
        self._lib.hns3_profile_read(_ptr(out), n)
        return {self._lib.hns3_profile_name(k).decode(): int(out[k]) for k in range(n)}
