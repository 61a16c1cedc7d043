"""Fault in the pages of fresh output arrays on another core while a long C call fills them.

A fresh array costs nothing until it is first written; then every page faults, and the kernel zeroes it
(on the VMs this runs on, memory the host has taken back costs about 2 s per GiB to touch again). The
event loop writes its outputs (finish times, per-flow times, ideal FCTs: about 600 MB at 1024 GPUs) a
few bytes at a time over its whole run, paying those faults on its own critical path. Linux's
``madvise(MADV_POPULATE_WRITE)`` (5.14+) faults a range in as if written, without changing any byte
already there, so a second thread can do it while the loop runs. Best effort: where the call is
unavailable or fails, nothing happens and the loop faults the pages itself, as before.
"""

from __future__ import annotations

import ctypes
import sys
import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any

import numpy as np

_MADV_POPULATE_WRITE = 23
_PAGE = 4096
_MIN_BYTES = 1 << 22  # smaller arrays are not worth a thread
_libc: ctypes.CDLL | None = None


def _madvise() -> Any:
    global _libc
    if not sys.platform.startswith("linux"):
        return None
    if _libc is None:
        try:
            _libc = ctypes.CDLL(None, use_errno=True)
        except OSError:
            return None
    fn = _libc.madvise
    fn.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
    fn.restype = ctypes.c_int
    return fn


def populate(arrays: Sequence[np.ndarray]) -> int:
    """Fault in the whole pages of ``arrays`` (contents unchanged); returns how many bytes were populated."""
    madvise = _madvise()
    done = 0
    if madvise is None:
        return 0
    for a in arrays:
        lo = (a.ctypes.data + _PAGE - 1) // _PAGE * _PAGE
        hi = (a.ctypes.data + a.nbytes) // _PAGE * _PAGE
        if hi > lo and madvise(lo, hi - lo, _MADV_POPULATE_WRITE) == 0:
            done += hi - lo
    return done


@contextmanager
def populating(arrays: Sequence[np.ndarray | None]) -> Iterator[None]:
    """Populate ``arrays`` (Nones skipped) on a second thread for the duration of the ``with`` block."""
    big = [a for a in arrays if a is not None and a.nbytes >= _MIN_BYTES and a.flags.c_contiguous]
    if not big:
        yield
        return
    worker = threading.Thread(target=populate, args=(big,), name="hetero-ns3-prefault", daemon=True)
    worker.start()
    try:
        yield
    finally:
        worker.join()
