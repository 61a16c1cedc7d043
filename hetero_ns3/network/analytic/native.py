"""Build, load and call the C kernel (``kernel/*.c``, ``kernel/flowsim.h``) through ctypes.

The sources ship as package data; :func:`build_kernel` compiles them with the package's native builder
(:func:`hetero_ns3.network.native_build.build_library`: system C compiler ``$CC``, else ``cc``, ``gcc``,
``clang``; cache key over sources, headers, flags and compiler version; lock; atomic publish) into
``$HETERO_NS3_CACHE`` or ``~/.cache/hetero_ns3``. When no compiler works, :func:`load_kernel` returns None
and callers fall back to the numpy engine.

The event loop takes one struct, ``FlowsimReplay`` (:class:`ReplayArgs` here); :func:`load_kernel` checks
its size, field names, offsets and sizes against the library's ``flowsim_replay_layout``.
"""

from __future__ import annotations

import ctypes
import time
import warnings
from pathlib import Path
from typing import Any

import numpy as np

from hetero_ns3.errors import NativeBuildError, SimulationError
from hetero_ns3.network.analytic.engine import REUSE_RTOL, EngineResult, EngineStats
from hetero_ns3.network.analytic.maxmin import LEVEL_RTOL
from hetero_ns3.network.analytic.prefault import populating
from hetero_ns3.network.analytic.routes import LinkArrays
from hetero_ns3.network.native_build import BuiltLibrary, LibrarySpec, build_library

_LIB: ctypes.CDLL | None = None
_TRIED = False
_P = ctypes.c_void_p
_I = ctypes.c_longlong
_D = ctypes.c_double
_C = ctypes.c_int
_U = ctypes.c_ulonglong


#: The kernel's sources (package data).
KERNEL_DIR = Path(__file__).resolve().parent / "kernel"
#: Compiler flags (part of the cache key). -O3 without fast-math: IEEE results as at -O2 (same bits), about
#: 5 % less time in the event loop on the 1024-GPU plan (three paired runs). The kernel compiles without
#: warnings under -Wall -Wextra (tests/unit/test_analytic_kernel.py).
CFLAGS = ("-std=c99", "-O3", "-fPIC", "-Wall", "-Wextra")


class ReplayArgs(ctypes.Structure):
    """``FlowsimReplay`` (kernel/flowsim.h, which documents the fields): the arguments of ``flowsim_replay``.
    Pointers are addresses (None for NULL)."""

    _fields_ = [
        # tasks
        ("n", _I), ("code", _P), ("release", _P), ("dep_ptr", _P), ("succ_ptr", _P), ("succ_idx", _P), ("size", _P),
        # flows and resources
        ("nflows", _I), ("W", _I), ("res", _P), ("path_row", _P), ("lat", _P), ("nres", _I), ("cap", _P),
        ("delay", _P), ("payload", _P), ("overhead", _P), ("rate_bps", _P),
        # settings
        ("tol", _D), ("reuse_rtol", _D), ("level_rtol", _D),
        ("incremental", _C), ("saf", _C), ("size_by_flow", _C), ("start_ready", _C),
        # outputs
        ("start", _P), ("finish", _P), ("drain", _P), ("ideal", _P), ("flow_start", _P), ("flow_finish", _P),
        ("stats", _P),
    ]  # fmt: skip


def _declare(fn: Any, restype: type | None, argtypes: list[type]) -> None:  # fn: a ctypes function pointer
    fn.restype = restype
    fn.argtypes = argtypes


def kernel_spec() -> LibrarySpec:
    """What :func:`build_kernel` compiles: every ``kernel/*.c`` with the headers beside them, linked with libm."""
    return LibrarySpec(
        name="flowsim",
        root=KERNEL_DIR,
        sources=tuple(sorted(KERNEL_DIR.glob("*.c"))),
        headers=tuple(sorted(KERNEL_DIR.glob("*.h"))),
        language="c",
        flags=CFLAGS,
        link_args=("-lm",),
        key_text=("-lm",),
    )


def build_kernel(force: bool = False) -> BuiltLibrary:
    """Compile the kernel if needed (NativeBuildError on failure); ``.library`` is the shared library."""
    return build_library(kernel_spec(), force=force)


def replay_layout(lib: ctypes.CDLL) -> tuple[int, list[tuple[str, int, int]]]:
    """The library's ``sizeof(FlowsimReplay)`` and (name, offset, size) of every field, in order."""
    names = lib.flowsim_replay_fields().decode().split()
    buf = (ctypes.c_longlong * (1 + 2 * len(names)))()
    got = lib.flowsim_replay_layout(buf, len(buf))
    if got != len(buf):
        raise NativeBuildError(f"flowsim_replay_layout wrote {got} of {len(buf)} entries")
    return buf[0], [(name, buf[1 + 2 * k], buf[2 + 2 * k]) for k, name in enumerate(names)]


def binding_layout() -> tuple[int, list[tuple[str, int, int]]]:
    """:func:`replay_layout` as :class:`ReplayArgs` has it."""
    fields = [(name, getattr(ReplayArgs, name)) for name, *_ in ReplayArgs._fields_]
    return ctypes.sizeof(ReplayArgs), [(name, f.offset, f.size) for name, f in fields]


def _check_layout(lib: ctypes.CDLL) -> None:
    c_side, py_side = replay_layout(lib), binding_layout()
    if c_side != py_side:
        raise NativeBuildError(
            "ReplayArgs does not match FlowsimReplay in kernel/flowsim.h; update hetero_ns3/network/analytic/native.py",
            f"C: {c_side}\nPython: {py_side}",
        )


def load_kernel(required: bool = False) -> ctypes.CDLL | None:
    """The loaded kernel, building it on first use; None if it cannot be built and not ``required``."""
    global _LIB, _TRIED
    if _LIB is not None:
        return _LIB
    if _TRIED and not required:
        return None
    _TRIED = True
    try:
        lib = ctypes.CDLL(str(build_kernel().library))
        _declare(lib.flowsim_replay_fields, ctypes.c_char_p, [])
        _declare(lib.flowsim_replay_layout, _I, [_P, _I])
        _check_layout(lib)
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
    _declare(lib.flowsim_replay, ctypes.c_int, [ctypes.POINTER(ReplayArgs)])
    _declare(
        lib.flowsim_route,
        ctypes.c_int,
        [_I, _P, _P, _P, _I, _I, _P, _P, _P, _P, _P, _P, _C, _U, _I, _C, _P, _P, _P, _P],
    )
    _declare(lib.flowsim_narrow, None, [_I, _I, _I, _P])
    _declare(lib.flowsim_path_stats, None, [_I, _I, _P, _P, _P, _P, _P, _P, _P, _C, _P, _P, _P])
    _declare(lib.flowsim_successors, None, [_I, _P, _P, _P, _P, _P])
    _declare(lib.flowsim_count_flows, _I, [_I, _P, _C])
    _declare(lib.flowsim_flows, _C, [_I, _P, _C, _P, _P, _P, _P, _I, _I, _I, _P, _P, _P, _P, _P, _P, _P])
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
    finish_out: np.ndarray | None = None,
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
    ``finish_out`` (contiguous float64, one entry per task, optional): where the finish times go instead of
    a new array; it may be ``task_code`` itself, which the loop then consumes: it reads a task's code only
    until the task starts, and writes its finish after that (one array of n floats less).
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
    arrs = {  # the input arrays, by their names in ReplayArgs
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
    res, cap = arrs["res"], arrs["cap"]
    assert res is not None and cap is not None
    hops = _hop_figures(latency_s, links, store_and_forward, int(res.shape[1]), ideal_out)
    fl_times = (None, None) if flow_times_out is None else tuple(map(_ptr, _checked(flow_times_out)))
    start = np.empty(n) if counters is None else counters
    if finish_out is not None:
        _checked((finish_out,))
        if finish_out.shape != (n,):
            raise SimulationError(f"finish_out has shape {finish_out.shape}; it needs one entry per task ({n})")
    finish = np.empty(n) if finish_out is None else finish_out
    drain = np.empty(n) if keep_drain else None
    stats = np.zeros(8, np.int64)
    delay, payload, overhead, rate_bps, saf = hops
    args = ReplayArgs(
        n=n,
        **{name: _ptr(a) for name, a in arrs.items()},
        nflows=int(res.shape[0]),
        W=int(res.shape[1]),
        nres=int(cap.shape[0]),
        delay=_ptr(delay),
        payload=_ptr(payload),
        overhead=_ptr(overhead),
        rate_bps=_ptr(rate_bps),
        tol=float(tolerance_s),
        reuse_rtol=REUSE_RTOL,
        level_rtol=LEVEL_RTOL,
        incremental=int(incremental),
        saf=saf,
        size_by_flow=int(flow_sizes is not None),
        start_ready=int(counters is not None),
        start=_ptr(start),
        finish=_ptr(finish),
        drain=_ptr(drain),
        ideal=_ptr(ideal_out),
        flow_start=fl_times[0],
        flow_finish=fl_times[1],
        stats=_ptr(stats),
    )
    with populating([finish, drain, ideal_out, *(flow_times_out or ())]):  # faults on the other core
        rc = lib.flowsim_replay(ctypes.byref(args))
    if rc == 1:
        stuck = np.flatnonzero(np.isnan(finish))
        raise SimulationError(f"{stuck.size} tasks never became ready (first: task {int(stuck[0])})")
    if rc == 2:
        raise SimulationError("a flow got a zero rate; check link rates in the topology")
    if rc == 3:
        raise MemoryError("the analytic kernel ran out of memory")
    ev, up, rd, mx, ru, rc_ = (int(x) for x in stats[:6])
    return EngineResult(start, finish, drain, EngineStats(ev, up, rd, mx, ru, rc_, time.perf_counter() - t0))
