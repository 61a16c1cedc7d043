"""Algorithm registry: every algorithm is one module in ``hetero_ns3/collectives/algorithms/``.

An algorithm is an object with

* ``name`` (the ``--algo`` value), ``ops`` (the collectives it implements), ``family`` (``ring`` or
  ``tree``: which NCCL latency table it uses) and ``auto`` (whether the selector considers it);
* ``check(call, env) -> str | None``: why it cannot run this call (None: it can);
* ``cost(call, env, protocol, channels) -> (seconds, Hop | None)``: the cost-model time and the
  bottleneck hop;
* ``plan(em: Emitter) -> None``: write the call's tasks through the emitter.

User schedules (``collectives/schedules/*.toml``) register as further algorithms on first lookup.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Protocol

from hetero_ns3.errors import field_error

if TYPE_CHECKING:
    from hetero_ns3.collectives.emit import Emitter
    from hetero_ns3.collectives.env import CollectiveEnv
    from hetero_ns3.collectives.types import CollectiveCall, Hop


class Algorithm(Protocol):
    name: str
    ops: frozenset[str]
    family: str
    auto: bool

    def check(self, call: CollectiveCall, env: CollectiveEnv) -> str | None: ...

    def cost(
        self, call: CollectiveCall, env: CollectiveEnv, protocol: str, channels: int
    ) -> tuple[float, Hop | None]: ...

    def plan(self, em: Emitter) -> None: ...


_REGISTRY: dict[str, Algorithm] = {}
_loaded_dirs: set[str] = set()


def register(algo: Algorithm, replace: bool = False) -> Algorithm:
    """Add ``algo`` under ``algo.name``; a second registration of a name needs ``replace=True``."""
    if algo.name in _REGISTRY and not replace:
        raise field_error("algorithm.name", algo.name, "is already registered", "choose another name")
    _REGISTRY[algo.name] = algo
    return algo


def _ensure_builtins() -> None:
    if not _REGISTRY:
        import hetero_ns3.collectives.algorithms  # noqa: F401  (registers on import)


def load_schedule_dir(directory: Path | None = None) -> list[str]:
    """Register every user schedule in ``directory`` (default ``collectives/schedules``); returns names."""
    from hetero_ns3.collectives.schedules import default_schedule_dir, load_schedule_file

    d = Path(directory) if directory is not None else default_schedule_dir()
    key = str(d.resolve()) if d.exists() else str(d)
    names: list[str] = []
    if key in _loaded_dirs or not d.is_dir():
        return names
    _ensure_builtins()
    for f in sorted(d.glob("*.toml")):
        algo = load_schedule_file(f)
        register(algo, replace=algo.name in _REGISTRY and getattr(_REGISTRY[algo.name], "source", None) == str(f))
        names.append(algo.name)
    _loaded_dirs.add(key)
    return names


def get_algorithm(name: str) -> Algorithm:
    """The algorithm called ``name``; ScenarioError listing the known names otherwise."""
    _ensure_builtins()
    algo = _REGISTRY.get(name)
    if algo is None:
        load_schedule_dir()
        algo = _REGISTRY.get(name)
    if algo is None:
        raise field_error("call.algo", name, "is not a known algorithm", f"use one of {sorted(_REGISTRY)}")
    return algo


def algorithms() -> dict[str, Algorithm]:
    """All registered algorithms by name (built-ins and loaded schedules)."""
    _ensure_builtins()
    return dict(_REGISTRY)


def auto_candidates(op: str) -> list[Algorithm]:
    """Algorithms the selector compares for ``op`` (those marked ``auto``), in registration order."""
    _ensure_builtins()
    return [a for a in _REGISTRY.values() if a.auto and op in a.ops]
