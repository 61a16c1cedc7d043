"""Build, load and call the C event loop (:mod:`hetero_ns3.network.analytic.kernel_c`) through ctypes.

The shared library is compiled once per hash of source and flags with the system C compiler (``$CC``, else
``cc``, ``gcc``, ``clang``) into ``$HETERO_NS3_CACHE`` or ``~/.cache/hetero_ns3/analytic`` and reused. When no
compiler works, :func:`load_kernel` returns None and callers fall back to the numpy engine.
"""

from __future__ import annotations

import ctypes
import hashlib
import os
import shutil
import subprocess
import tempfile
import time
import warnings
from pathlib import Path

import numpy as np

from hetero_ns3.errors import NativeBuildError, SimulationError
from hetero_ns3.network.analytic.engine import REUSE_RTOL, EngineResult, EngineStats
from hetero_ns3.network.analytic.kernel_c import SOURCE
from hetero_ns3.network.analytic.maxmin import LEVEL_RTOL
from hetero_ns3.network.analytic.prefault import populating
from hetero_ns3.network.analytic.routes import LinkArrays

_LIB: ctypes.CDLL | None = None
_TRIED = False
_P = ctypes.c_void_p
_I = ctypes.c_longlong
_D = ctypes.c_double
_C = ctypes.c_int
_U = ctypes.c_ulonglong


#: Compiler flags (part of the cache key). -O3 without fast-math: IEEE results as at -O2 (same bits), about
#: 5 % less time in the event loop on the 1024-GPU plan (three paired runs).
CFLAGS = ("-O3", "-std=c99", "-shared", "-fPIC")


def _declare(fn: ctypes._CFuncPtr, restype: type | None, argtypes: list[type]) -> None:
    fn.restype = restype
    fn.argtypes = argtypes


def cache_dir() -> Path:
    """Where compiled kernels live."""
    env = os.environ.get("HETERO_NS3_CACHE")
    base = Path(env) if env else Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "hetero_ns3"
    return base / "analytic"


def _compiler() -> str | None:
    for cand in (os.environ.get("CC"), "cc", "gcc", "clang"):
        if cand and shutil.which(cand):
            return cand
    return None


def build_kernel() -> Path:
    """Compile the kernel if needed and return the path of the shared library (NativeBuildError on failure)."""
    digest = hashlib.sha256((SOURCE + " ".join(CFLAGS)).encode()).hexdigest()[:16]
    out = cache_dir() / f"flowsim-{digest}.so"
    if out.exists():
        return out
    cc = _compiler()
    if cc is None:
        raise NativeBuildError("no C compiler found for the analytic kernel; install gcc or set $CC")
    out.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=out.parent) as tmp:
        src = Path(tmp) / "flowsim.c"
        src.write_text(SOURCE)
        lib = Path(tmp) / "flowsim.so"
        cmd = [cc, *CFLAGS, "-o", str(lib), str(src), "-lm"]
        proc = subprocess.run(cmd, capture_output=True, text=True)
        if proc.returncode != 0:
            raise NativeBuildError(f"compiling the analytic kernel failed ({' '.join(cmd)})", proc.stderr)
        os.replace(lib, out)  # atomic: parallel builders agree
    return out


def load_kernel(required: bool = False) -> ctypes.CDLL | None:
    """The loaded kernel, building it on first use; None if it cannot be built and not ``required``."""
    global _LIB, _TRIED
    if _LIB is not None:
        return _LIB
    if _TRIED and not required:
        return None
    _TRIED = True
    try:
        lib = ctypes.CDLL(str(build_kernel()))
    except (NativeBuildError, OSError) as err:
        if required:
            raise NativeBuildError(f"analytic kernel unavailable: {err}") from err
        warnings.warn(
            f"analytic backend: C kernel unavailable ({str(err).splitlines()[0]}); using the numpy engine, "
            "which is 30-100x slower. Install a C compiler or set $CC.",
            RuntimeWarning,
            stacklevel=3,
        )
        return None
    fn = lib.flowsim_replay
    fn.restype = ctypes.c_int
    fn.argtypes = [_I, _P, _P, _P, _P, _P, _P, _I, _I, _P, _P, _P, _I, _P, _D, _C, _D, _D, _P, _P, _P, _P]
    fn.argtypes += [_P, _P, _P, _P, _C, _P, _P, _P, _C, _C]
    _declare(
        lib.flowsim_route,
        ctypes.c_int,
        [_I, _P, _P, _P, _I, _I, _P, _P, _P, _P, _P, _P, _C, _U, _I, _C, _P, _P, _P, _P],
    )
    _declare(lib.flowsim_narrow, None, [_I, _I, _I, _P])
    _declare(lib.flowsim_path_stats, None, [_I, _I, _P, _P, _P, _P, _P, _P, _P, _C, _P, _P, _P])
    _declare(lib.flowsim_successors, None, [_I, _P, _P, _P, _P, _P])
    _declare(lib.flowsim_count_flows, _I, [_I, _P, _C])
    _declare(lib.flowsim_flows, _C, [_I, _P, _C, _P, _P, _P, _P, _P, _I, _I, _I, _P, _P, _P, _P, _P, _P, _P])
    _LIB = lib
    return lib


def _ptr(a: np.ndarray | None) -> int | None:
    return None if a is None else a.ctypes.data


def successors_native(
    lib: ctypes.CDLL, dep_ptr: np.ndarray, dep_idx: np.ndarray, with_counters: bool = False
) -> tuple[np.ndarray, ...]:
    """:func:`hetero_ns3.network.analytic.engine.successors` by a counting sort in C (linear time; int32 task ids,
    uint32 offsets: SimulationError with 2**32 dependencies or more). ``with_counters``: a third array,
    the event loop's initial start array (minus each task's dependency count), which
    :func:`replay_native` then uses as its start output instead of filling a new one."""
    n = int(dep_ptr.shape[0]) - 1
    ptr = np.ascontiguousarray(dep_ptr, np.int64)
    idx = np.ascontiguousarray(dep_idx, np.int32)
    if idx.shape[0] >= 2**32:
        raise SimulationError(f"the plan has {idx.shape[0]} dependencies; the native event loop takes fewer than 2**32")
    succ_ptr = np.empty(n + 1, np.uint32)
    succ_idx = np.empty(idx.shape[0], np.int32)
    start = np.empty(n) if with_counters else None
    lib.flowsim_successors(n, _ptr(ptr), _ptr(idx), _ptr(succ_ptr), _ptr(succ_idx), _ptr(start))
    return (succ_ptr, succ_idx) if start is None else (succ_ptr, succ_idx, start)


def _hop_figures(
    latency_s: np.ndarray | None, links: LinkArrays | None, saf: bool, width: int, ideal_out: np.ndarray | None
) -> tuple:
    """The per-resource arrays and the store-and-forward flag of ``flowsim_replay`` (Nones when latencies
    are given); the caller keeps the arrays alive during the call."""
    if latency_s is not None:
        return (None, None, None, None, 0)
    if links is None or width > 128:
        raise SimulationError("the native loop computes latencies for paths of up to 128 hops given the links")
    if ideal_out is not None:
        _checked((ideal_out,))
    per_res = (links.delay_s, links.payload_bytes, links.overhead_bytes, links.rate_bps)
    return (*(np.ascontiguousarray(a, np.float64) for a in per_res), int(saf))


def _checked(out: tuple[np.ndarray, ...]) -> tuple[np.ndarray, ...]:
    """Output arrays the kernel writes into: contiguous float64, else SimulationError."""
    if any(a.dtype != np.float64 or not a.flags.c_contiguous for a in out):
        raise SimulationError("native output arrays must be contiguous float64 arrays, one entry per flow row")
    return out


def _task_code(duration_s: np.ndarray, flow_row: np.ndarray | None) -> np.ndarray:
    """The kernel's task codes: ``duration_s`` for compute tasks, ``-(flow row + 1)`` for flows."""
    if flow_row is None:
        raise SimulationError("replay_native needs flow_row or task_code")
    return np.where(flow_row >= 0, -(flow_row.astype(np.float64) + 1.0), duration_s).astype(np.float64)


def replay_native(
    lib: ctypes.CDLL,
    is_flow: np.ndarray | None,
    duration_s: np.ndarray,
    dep_ptr: np.ndarray,
    dep_idx: np.ndarray,
    flow_row: np.ndarray | None,
    size_bytes: np.ndarray,
    path_res: np.ndarray,
    latency_s: np.ndarray | None,
    capacity: np.ndarray,
    release_s: np.ndarray | None = None,
    tolerance_s: float = 1e-12,
    incremental: bool = True,
    keep_drain: bool = True,
    path_row: np.ndarray | None = None,
    successors: tuple[np.ndarray, ...] | None = None,
    links: LinkArrays | None = None,
    store_and_forward: bool = True,
    ideal_out: np.ndarray | None = None,
    flow_times_out: tuple[np.ndarray, np.ndarray] | None = None,
    flow_sizes: np.ndarray | None = None,
    task_code: np.ndarray | None = None,
) -> EngineResult:
    """Same contract as :func:`hetero_ns3.network.analytic.engine.replay`, run in C.

    The kernel tells tasks apart by ``task_code`` (float64 per task: ``duration_s`` for a compute task,
    ``-(f + 1)`` for the task of flow row ``f``; :func:`hetero_ns3.network.analytic.flows.plan_flows` makes it),
    built here from ``flow_row`` (which may then be None) and ``duration_s`` when not given; ``is_flow``
    (which must agree) is not used and may be None.
    ``keep_drain=False`` skips the per-task drain times (``drain_s`` is then None), one array of n floats less.
    ``path_row`` (int32 per flow row, optional): the row of ``path_res`` that flow row ``f`` takes (flows
    sharing a path share a row); without it flow row ``f`` takes row ``f``. ``successors``: the output of
    :func:`successors_native` for ``dep_ptr`` / ``dep_idx`` when already computed (with its counters, the
    returned start times are written into that third array). ``latency_s=None``: the
    loop computes each flow's latency from its path as it starts (the figures of
    :func:`hetero_ns3.network.analytic.routes.route_flows`, bit for bit, from ``links`` and ``store_and_forward``;
    paths of at most 128 entries), and writes the ideal FCT of flow row ``f`` to ``ideal_out[f]`` if given.
    ``flow_times_out`` (two contiguous float64 arrays, one entry per flow row): filled with the start and
    finish of each flow row (the per-task times of its task). ``flow_sizes`` (int64 per flow row, optional):
    the flows' bytes, read instead of ``size_bytes`` (which is per task), for locality.
    """
    t0 = time.perf_counter()
    code = _task_code(duration_s, flow_row) if task_code is None else np.ascontiguousarray(task_code, np.float64)
    n = int(code.shape[0])
    if n >= 2**31 - 1:
        raise SimulationError(f"the plan has {n} tasks; the native event loop takes fewer than 2**31")
    prepared = successors_native(lib, dep_ptr, dep_idx) if successors is None else successors
    succ_ptr, succ_idx = prepared[:2]
    counters = prepared[2] if len(prepared) > 2 else None
    if counters is not None and (counters.shape != (n,) or counters.dtype != np.float64):
        raise SimulationError("successors[2] must be the float64 start counters of successors_native")
    arrs = {
        "code": code,
        "release": None if release_s is None else np.ascontiguousarray(release_s, np.float64),
        "dep_ptr": np.ascontiguousarray(dep_ptr, np.int64),
        "succ_ptr": np.ascontiguousarray(succ_ptr, np.uint32),
        "succ_idx": succ_idx,
        "size": np.ascontiguousarray(size_bytes if flow_sizes is None else flow_sizes, np.int64),
        "res": np.ascontiguousarray(path_res, np.int32),
        "path_row": None if path_row is None else np.ascontiguousarray(path_row, np.int32),
        "lat": None if latency_s is None else np.ascontiguousarray(latency_s, np.float64),
        "cap": np.ascontiguousarray(capacity, np.float64),
    }
    hops = _hop_figures(latency_s, links, store_and_forward, int(arrs["res"].shape[1]), ideal_out)
    fl_times = (None, None) if flow_times_out is None else tuple(map(_ptr, _checked(flow_times_out)))
    start = np.empty(n) if counters is None else counters
    finish = np.empty(n)
    drain = np.empty(n) if keep_drain else None
    stats = np.zeros(8, np.int64)
    a = arrs
    with populating([finish, drain, ideal_out, *(flow_times_out or ())]):  # faults on the other core
        rc = lib.flowsim_replay(
            n, _ptr(a["code"]), _ptr(a["release"]), _ptr(a["dep_ptr"]), _ptr(a["succ_ptr"]),
            _ptr(a["succ_idx"]), _ptr(a["size"]), int(a["res"].shape[0]), int(a["res"].shape[1]),
            _ptr(a["res"]), _ptr(a["path_row"]), _ptr(a["lat"]), int(a["cap"].shape[0]), _ptr(a["cap"]), float(tolerance_s), int(incremental),
            REUSE_RTOL, LEVEL_RTOL, _ptr(start), _ptr(finish), _ptr(drain), _ptr(stats), *map(_ptr, hops[:4]), hops[4], _ptr(ideal_out), *fl_times, int(flow_sizes is not None), int(counters is not None),
        )  # fmt: skip
    if rc == 1:
        stuck = np.flatnonzero(np.isnan(finish))
        raise SimulationError(f"{stuck.size} tasks never became ready (first: task {int(stuck[0])})")
    if rc == 2:
        raise SimulationError("a flow got a zero rate; check link rates in the topology")
    if rc == 3:
        raise MemoryError("the analytic kernel ran out of memory")
    ev, up, rd, mx, ru, rc_ = (int(x) for x in stats[:6])
    return EngineResult(start, finish, drain, EngineStats(ev, up, rd, mx, ru, rc_, time.perf_counter() - t0))
