"""Process-wide access to ns-3 and to our compiled native modules.

``from ns import ns`` costs about 12 s (cppyy parses every ns-3 header), so it happens once per
process, on first call of :func:`import_ns`. :func:`load_module` builds (or reuses from the cache)
a native module, then makes it visible to Python: ``cppyy.include`` of its umbrella header and
``cppyy.load_library`` of the shared library. Both calls are idempotent.

The ns-3 simulator is a process-wide singleton: run simulations one after another in a process
(each ending in ``Simulator::Destroy()``), and use separate processes for parallel runs.
"""

from __future__ import annotations

import contextlib
import io
import os
import sys
import threading
import time
from typing import Any

from hetero_ns3.errors import NativeBuildError
from hetero_ns3.network.native_build import ROCE_MODULE, BuiltModule, ModuleSpec, build_module

_lock = threading.Lock()
_ns: Any = None
_ns_import_seconds: float = 0.0
_loaded: dict[str, BuiltModule] = {}


@contextlib.contextmanager
def _quiet_fd2() -> Any:
    """Silence C-level stderr (cppyy prints harmless 'Failed to materialize symbols' lines)."""
    if os.environ.get("HETERO_NS3_VERBOSE_IMPORT"):
        yield
        return
    sys.stderr.flush()
    saved = os.dup(2)
    try:
        with open(os.devnull, "w") as devnull:
            os.dup2(devnull.fileno(), 2)
            yield
    finally:
        os.dup2(saved, 2)
        os.close(saved)


def import_ns() -> Any:
    """Return the ``ns`` namespace (``from ns import ns``), importing ns-3 on first call."""
    global _ns, _ns_import_seconds
    with _lock:
        if _ns is None:
            t0 = time.perf_counter()
            try:
                with _quiet_fd2(), contextlib.redirect_stdout(io.StringIO()):
                    from ns import ns as _imported  # noqa: PLC0415 (deliberately lazy: 12 s)
            except Exception as exc:  # pragma: no cover - depends on the installation
                raise NativeBuildError(f"importing ns-3 (from ns import ns) failed: {exc}") from exc
            _ns = _imported
            _ns_import_seconds = time.perf_counter() - t0
    return _ns


def ns_import_seconds() -> float:
    """Wall time the ns-3 import took in this process (0 before it happened)."""
    return _ns_import_seconds


def cppyy() -> Any:
    """The ``cppyy`` module, after ns-3 is imported."""
    import_ns()
    import cppyy as _cppyy  # noqa: PLC0415

    return _cppyy


def load_module(spec: ModuleSpec = ROCE_MODULE, force_build: bool = False) -> BuiltModule:
    """Build (or reuse) ``spec`` and load it into this process; return the build record."""
    with _lock:
        done = _loaded.get(spec.name)
    if done is not None:
        return done
    built = build_module(spec, force=force_build)
    cp = cppyy()
    with _lock:
        if spec.name in _loaded:
            return _loaded[spec.name]
        for inc in spec.include_dirs():
            cp.add_include_path(str(inc))
        try:
            cp.load_library(str(built.library))
            cp.include(str(spec.root / spec.umbrella_header))
        except Exception as exc:
            raise NativeBuildError(f"loading {built.library} into cppyy failed: {exc}") from exc
        _loaded[spec.name] = built
    return built


def loaded_modules() -> dict[str, BuiltModule]:
    """Modules loaded in this process, by name."""
    with _lock:
        return dict(_loaded)
