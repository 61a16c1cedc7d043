"""Pause Python's cyclic garbage collector around allocation-heavy passes that create no cycles.

Compiling and lowering a large workload allocate millions of small tuples, lists and dataclasses that
stay alive until the pass ends. Each allocation burst triggers collections that walk every live object
(seconds at 1024 GPUs) and free nothing; reference counting still frees everything as usual, and any
cycle made inside the block is collected after it.
"""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager


@contextmanager
def gc_paused() -> Iterator[None]:
    """Disable the cyclic collector inside the block; restore its previous state on exit (also on errors)."""
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()
