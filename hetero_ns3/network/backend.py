"""One interface for network backends, and the registry every caller dispatches through.

A backend replays an :class:`~hetero_ns3.plan.dag.ExecutionPlan` on a
:class:`~hetero_ns3.topology.graph.NetGraph` with the ``[network]`` settings and returns per-task times and
per-flow records (:class:`BackendRun`). Framing (payload and header bytes per link kind) and fault
handling live inside each backend, so every caller configures a backend the same way.

Adding a backend: a module with a class satisfying :class:`Backend`, and one line in :data:`_REGISTRY`.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

from hetero_ns3.errors import field_error

if TYPE_CHECKING:
    import numpy as np
    import pandas as pd

    from hetero_ns3.network.config import NetworkConfig
    from hetero_ns3.plan.dag import ExecutionPlan, TaskTimes
    from hetero_ns3.scenario.faults import FaultsSection
    from hetero_ns3.topology.graph import NetGraph

#: ``progress(sim_time_s, tasks_done, tasks_total)``, called between slices of simulated time (packet level).
ProgressFn = Callable[[float, int, int], None]


@dataclass(frozen=True)
class BackendRun:
    """What a backend returns for one plan.

    Attributes:
        times: start and finish of every task, seconds (NaN where a task never ran).
        flows: one row per flow task (task, src, dst, size_bytes, start_s, finish_s, fct_s, ...).
        completed: every task finished.
        interrupted: the run stopped on Ctrl-C / SIGTERM between two slices; ``times`` are partial.
        sim_time_s: simulated time reached, seconds.
        stats: backend figures for ``summary.json`` (``events`` at least; e.g. ``ns3_wall_s``).
        raw: the backend's own result object (port counters, link bytes, ...), for callers that want more.
    """

    times: TaskTimes
    flows: pd.DataFrame
    completed: bool
    interrupted: bool
    sim_time_s: float
    stats: Mapping[str, Any] = field(default_factory=dict)
    raw: Any = None


class Backend(Protocol):
    """A network backend: stateless, one :meth:`run` per plan."""

    name: str
    """Registry name (``ns3``, ``analytic``). A backend refuses, with a clear error, faults it cannot model
    (the flow level: links that change after t = 0 or go down)."""
    nic_attach_auto: str
    """What ``fabric.nic_attach = "auto"`` becomes on this backend (``topology.fabric.resolve_nic_attach``):
    ``direct`` (a GPU with a NIC of its own is its own port) or ``pcie`` (the detailed segment)."""

    def run(
        self,
        plan: ExecutionPlan,
        graph: NetGraph,
        config: NetworkConfig,
        *,
        seed: int,
        faults: FaultsSection | None = None,
        progress: ProgressFn | None = None,
        stall_limit_s: float = 60.0,
    ) -> BackendRun:
        """Replay ``plan`` on ``graph`` (hosts named as ``plan.gpus``); see :class:`BackendRun`."""
        ...

    def link_load(
        self,
        plan: ExecutionPlan,
        graph: NetGraph,
        config: NetworkConfig,
        *,
        seed: int,
        group: np.ndarray,
        n_groups: int,
    ) -> np.ndarray:
        """float64 (n_groups, n_links, 2): payload bytes each group of tasks (``group``: one id per task, e.g.
        its job) puts on each directed link (column 0: ``a`` to ``b``), routed as this backend routes
        (:mod:`hetero_ns3.network.link_load`)."""
        ...


#: name -> "module:Class"; modules are imported on first use (the ns-3 one is heavy).
_REGISTRY: Mapping[str, str] = {
    "ns3": "hetero_ns3.network.ns3.backend:Ns3Backend",
    "analytic": "hetero_ns3.network.analytic.backend:AnalyticBackend",
}


def backend_names() -> tuple[str, ...]:
    """Names of the registered backends."""
    return tuple(_REGISTRY)


def get_backend(name: str, where: str = "run.backend") -> Backend:
    """The backend registered as ``name``; a ScenarioError naming ``where`` and the valid names otherwise."""
    ref = _REGISTRY.get(name)
    if ref is None:
        raise field_error(where, name, "is not a backend", f"use one of {list(_REGISTRY)}")
    module, _, cls = ref.partition(":")
    backend: Backend = getattr(importlib.import_module(module), cls)()
    return backend
