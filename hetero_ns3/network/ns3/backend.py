"""The packet-level backend behind the :class:`~hetero_ns3.network.backend.Backend` interface."""

from __future__ import annotations

from hetero_ns3.network.backend import BackendRun, ProgressFn
from hetero_ns3.network.config import NetworkConfig
from hetero_ns3.plan.dag import ExecutionPlan
from hetero_ns3.scenario.faults import FaultsSection
from hetero_ns3.topology.graph import NetGraph


class Ns3Backend:
    """Our RoCE module inside ns-3: the whole DAG replayed in ns-3's event loop (docs/cosim.md)."""

    name = "ns3"

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
        from hetero_ns3.network.ns3.replay import LinkFault, run_plan

        link_faults = [LinkFault(f.a, f.b, f.at, f.rate_factor) for f in (faults.links if faults else ())]
        res = run_plan(
            graph, plan, config, seed, link_faults=link_faults, progress=progress, stall_limit_s=stall_limit_s,
            profile=True,
        )  # fmt: skip
        return BackendRun(
            res.times,
            res.flows,
            completed=res.completed,
            interrupted=res.interrupted,
            sim_time_s=res.sim_time_s,
            stats={
                "events": res.events,
                "simulated_s": res.sim_time_s,
                "ns3_wall_s": res.wall_s,
                "events_by_kind": res.profile,
            },
            raw=res,
        )
