"""The packet-level backend behind the :class:`~hetero_ns3.network.backend.Backend` interface."""

from __future__ import annotations

import numpy as np

from hetero_ns3.network.backend import BackendRun, ProgressFn
from hetero_ns3.network.config import NetworkConfig
from hetero_ns3.plan.dag import ExecutionPlan
from hetero_ns3.scenario.faults import FaultsSection
from hetero_ns3.topology.graph import NetGraph


class Ns3Backend:
    """Our RoCE module inside ns-3: the whole DAG replayed in ns-3's event loop (docs/cosim.md)."""

    name = "ns3"
    shares_switch_state = True
    """Ports of a switch share its buffer (and PFC state): isolation needs unshared switches too."""
    nic_attach_auto = "direct"
    """What ``fabric.nic_attach = "auto"`` becomes here (``topology.fabric.resolve_nic_attach``): a GPU with a
    NIC of its own is its own network port (2 hops GPU to GPU instead of 6; docs/topologies.md)."""

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
        """Bytes per group and directed link as the switches route them: their per-flow hash (``packet``) on
        each connection (or flow) with ``routing.ecmp_seed``, or the expected even split with packet
        spraying. Paths after a link fault at t > 0 (the switches then avoid the link) are not followed."""
        from hetero_ns3.network.analytic.config import AnalyticConfig
        from hetero_ns3.network.link_load import routed_link_bytes, sprayed_link_bytes

        if config.routing.packet_spray:
            return sprayed_link_bytes(graph, plan, group, n_groups)
        acfg = AnalyticConfig(ecmp_hash="packet", ecmp_key=config.routing.ecmp_key)
        return routed_link_bytes(graph, plan, group, n_groups, acfg, config.routing.ecmp_seed)
