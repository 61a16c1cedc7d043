"""The flow-level backend behind the :class:`~hetero_ns3.network.backend.Backend` interface."""

from __future__ import annotations

import dataclasses

import numpy as np

from hetero_ns3.errors import ScenarioError
from hetero_ns3.network.analytic.api import simulate_plan
from hetero_ns3.network.analytic.config import AnalyticConfig
from hetero_ns3.network.analytic.times_only import PreparedTimes, prepare_times
from hetero_ns3.network.backend import BackendRun, ProgressFn
from hetero_ns3.network.config import NetworkConfig
from hetero_ns3.network.link_load import routed_link_bytes
from hetero_ns3.plan.dag import ExecutionPlan
from hetero_ns3.scenario.faults import FaultsSection
from hetero_ns3.topology.graph import NetGraph, make_graph


def config_for(network: NetworkConfig) -> AnalyticConfig:
    """The analytic settings matching ``[network]``: the packet backend's framing per link kind (same goodput
    on both backends) and its ECMP key."""
    return AnalyticConfig.like_nic(network.nic, ecmp_key=network.routing.ecmp_key, ecmp_hash="packet")


def apply_static_link_faults(graph: NetGraph, faults: FaultsSection | None) -> NetGraph:
    """The graph with links degraded from t = 0 (the flow level has fixed link rates); ``graph`` itself when
    there are no link faults."""
    if faults is None or not faults.links:
        return graph
    links = list(graph.links)
    for i, lf in enumerate(faults.links):
        if lf.at > 0:
            raise ScenarioError(
                f"faults.links[{i}].at ({lf.at} s) > 0 needs the ns3 backend (the analytic backend has fixed link "
                "rates); use --backend ns3 or at = 0"
            )
        if lf.rate_factor == 0:
            raise ScenarioError(
                f"faults.links[{i}].rate_factor (0) takes the link down: only the ns3 backend simulates that"
            )
        j = next((k for k, lk in enumerate(links) if {lk.a, lk.b} == {lf.a, lf.b}), None)
        if j is None:
            raise ScenarioError(f"faults.links[{i}]: no link between {lf.a!r} and {lf.b!r}; name two adjacent nodes")
        links[j] = dataclasses.replace(links[j], rate_bps=links[j].rate_bps * lf.rate_factor)
    return make_graph(graph.nodes, links, graph.routing)


class AnalyticBackend:
    """Max-min fair flows on routed paths (docs/analytic.md)."""

    name = "analytic"
    shares_switch_state = False
    """Flows interact only through links (no switch buffers): isolation needs disjoint links only."""
    nic_attach_auto = "pcie"
    """What ``fabric.nic_attach = "auto"`` becomes here: the detailed segment, the graph (and results) of
    before ``auto`` (max-min sharing is the same either way up to the PCIe links' latency)."""

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
        res = simulate_plan(
            apply_static_link_faults(graph, faults), plan, config=config_for(config), seed=config.routing.ecmp_seed
        )
        return BackendRun(
            res.times,
            res.flows,
            completed=True,
            interrupted=False,
            sim_time_s=float(res.times.makespan_s),
            stats={"events": int(getattr(res.stats, "events", 0))},
            raw=res,
        )

    def prepare_times(
        self,
        plan: ExecutionPlan,
        graph: NetGraph,
        config: NetworkConfig,
        *,
        seed: int,
        faults: FaultsSection | None = None,
    ) -> PreparedTimes:
        """:meth:`run`'s task times without its flows table, in less memory, in two steps: this routes;
        ``.run()`` replays. In between the caller may drop the plan's durations, priorities and channels
        (:func:`~hetero_ns3.network.analytic.times_only.prepare_times`; what ``hetero-ns3 validate`` does)."""
        return prepare_times(
            apply_static_link_faults(graph, faults), plan, config=config_for(config), seed=config.routing.ecmp_seed
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
        """Bytes per group and directed link on the paths :meth:`run` uses (same hash, key and seed)."""
        return routed_link_bytes(graph, plan, group, n_groups, config_for(config), config.routing.ecmp_seed)
