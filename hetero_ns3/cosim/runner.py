"""Run a scenario end to end: plan, lower, repeat per iteration, replay on a backend, write the run directory.

``run_scenario`` is what ``hetero-ns3 run`` calls. Stages are the pure functions of the other
packages; this module only wires them and records what each produced, so that a failure or Ctrl-C
still leaves a partial run directory (``summary.json`` with the status and reason).
"""

from __future__ import annotations

import dataclasses
import logging
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from hetero_ns3.collectives import CollectiveEnv, load_tuning
from hetero_ns3.cosim.iterations import repeat_plan
from hetero_ns3.cosim.lower import Lowered, lower_workload
from hetero_ns3.cosim.scenario_section import CollectivesSection, FaultsSection, RunSection
from hetero_ns3.errors import ScenarioError, SimulationError
from hetero_ns3.netgraph import NetGraph, make_graph
from hetero_ns3.network.config import NetworkConfig
from hetero_ns3.results import GpuMeta, RunPaths, recording_run, summarize, versions_info
from hetero_ns3.topology import ClusterSpec, build_graph, load_cluster

log = logging.getLogger(__name__)

BACKENDS = ("ns3", "analytic")
ProgressFn = Callable[[float, int, int], None]


@dataclass(frozen=True)
class RunOutcome:
    """What :func:`run_scenario` produced."""

    paths: RunPaths
    summary: Any
    """:class:`hetero_ns3.results.Summary` of the run (per-iteration times and steady-state breakdown)."""
    backend: str
    stats: Mapping[str, Any]


def load_run_cluster(scenario: Any) -> ClusterSpec:
    """The scenario's cluster as a topology (``[cluster] topology = ...`` is required to simulate)."""
    cluster = scenario.section("cluster")
    if cluster is None or cluster.topology is None:
        raise ScenarioError(
            "cluster.topology is required to simulate the network (inline [[cluster.groups]] only plan compute); "
            "set cluster.topology to a preset such as 'h0' or a topology file"
        )
    ref: str | Path = cluster.topology
    if (scenario.base_dir / cluster.topology).is_file():
        ref = scenario.base_dir / cluster.topology
    return load_cluster(ref)


def gpu_slowdowns(faults: FaultsSection, cluster: ClusterSpec) -> dict[str, float]:
    """GPU name -> compute-duration multiplier from ``[[faults.gpus]]`` (factors of overlapping rules multiply)."""
    gpus = cluster.gpus()
    out: dict[str, float] = {}
    for i, rule in enumerate(faults.gpus):
        hit = [
            g.name
            for g in gpus
            if (rule.gpu is not None and g.name == rule.gpu)
            or (rule.gpu_type is not None and g.gpu_type == rule.gpu_type)
            or (rule.node is not None and g.node == rule.node)
        ]
        if not hit:
            sel = rule.gpu or rule.gpu_type or rule.node
            raise ScenarioError(f"faults.gpus[{i}] selects no GPU ({sel!r}); GPUs look like {gpus[0].name!r}")
        for name in hit:
            out[name] = out.get(name, 1.0) * rule.factor
    return out


def gpu_meta(cluster: ClusterSpec, wplan: Any, faults: FaultsSection | None = None) -> dict[str, GpuMeta]:
    """GPU name -> :class:`GpuMeta` for the breakdown: type, node and slowdown.

    The slowdown is the GPU type's time per layer (``wplan.layer_time``, forward + backward, from the
    roofline) over the fastest type's, times the GPU's ``[[faults.gpus]]`` factor: 1 for every GPU of a
    homogeneous cluster without faults, so that no wait is straggler wait there.
    """
    layer_time: Mapping[str, float] = getattr(wplan, "layer_time", None) or {}
    fastest = min((t for t in layer_time.values() if t > 0), default=0.0)
    factor = gpu_slowdowns(faults or FaultsSection(), cluster)
    out = {}
    for g in cluster.gpus():
        by_type = (
            layer_time.get(g.gpu_type, 0.0) / fastest if fastest > 0 and layer_time.get(g.gpu_type, 0.0) > 0 else 1.0
        )
        out[g.name] = GpuMeta(g.gpu_type, g.node, by_type * factor.get(g.name, 1.0))
    return out


def apply_static_link_faults(graph: NetGraph, faults: FaultsSection) -> NetGraph:
    """The graph with links degraded from t=0 (used by the analytic backend, which has no time-varying rates)."""
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
    return make_graph(graph.nodes, links)


def lower_scenario(scenario: Any, graph: NetGraph, cluster: ClusterSpec) -> tuple[Any, Lowered]:
    """Plan the workload and lower it into one execution plan."""
    from hetero_ns3.workload.planner import plan_scenario

    faults = scenario.section("faults") or FaultsSection()
    colls = scenario.section("collectives") or CollectivesSection()
    wplan = plan_scenario(scenario)
    tuning_path = colls.tuning
    if tuning_path is not None and (scenario.base_dir / tuning_path).is_file():
        tuning_path = str(scenario.base_dir / tuning_path)
    tuning = load_tuning(tuning_path)
    if colls.tuning_overrides():
        tuning = dataclasses.replace(tuning, **colls.tuning_overrides())
    env = CollectiveEnv.from_graph(graph, tuning)
    lowered = lower_workload(
        wplan.workload,
        env,
        slowdown=gpu_slowdowns(faults, cluster),
        overrides=colls.overrides(),
        priority=colls.priorities(),
    )
    return wplan, lowered


def run_scenario(
    scenario: Any,
    out_dir: str | Path,
    *,
    backend: str | None = None,
    progress: ProgressFn | None = None,
) -> RunOutcome:
    """Simulate ``run.iterations`` training iterations of ``scenario`` and write the run directory ``out_dir``.

    The workload is lowered once into the plan of one iteration, which is repeated
    (:func:`~hetero_ns3.cosim.iterations.repeat_plan`) and replayed whole on the backend.
    """
    run = scenario.section("run") or RunSection()
    backend = backend or run.backend
    if backend not in BACKENDS:
        raise ScenarioError(f"run.backend ({backend!r}) is not a backend; use one of {list(BACKENDS)}")
    network: NetworkConfig = scenario.section("network") or NetworkConfig()
    faults: FaultsSection = scenario.section("faults") or FaultsSection()
    stats: dict[str, Any] = {"backend": backend, "seed": run.seed}
    resolved = scenario.resolved()
    with recording_run(out_dir, scenario_resolved=resolved, versions=versions_info(run.seed)) as rec:
        t0 = time.perf_counter()
        cluster = load_run_cluster(scenario)
        graph = build_graph(cluster)
        wplan, lowered = lower_scenario(scenario, graph, cluster)
        repeated = repeat_plan(lowered.plan, run.iterations)
        plan = repeated.plan
        rec.plan, rec.iteration = plan, (repeated.iteration if run.iterations > 1 else None)
        rec.gpu_meta = gpu_meta(cluster, wplan, faults)
        stats.update(
            plan_s=time.perf_counter() - t0,
            iterations=run.iterations,
            tasks_per_iteration=repeated.tasks_per_iteration,
            tasks=len(plan),
            flows=plan.n_flows,
            collectives=lowered.n_collectives,
            collective_choices=dict(lowered.choices),
            compute_only_iteration_s=wplan.compute_time,
            model_flops=wplan.model_flops,
            peak_flops=wplan.peak_flops,
        )
        log.info(
            "plan: %d tasks, %d flows, %d collective calls per iteration; %d iteration(s)",
            len(lowered.plan),
            lowered.plan.n_flows,
            lowered.n_collectives,
            run.iterations,
        )
        t1 = time.perf_counter()
        if backend == "analytic":
            from hetero_ns3.analytic import AnalyticConfig, simulate_plan

            res = simulate_plan(
                apply_static_link_faults(graph, faults),
                plan,
                config=AnalyticConfig.like_nic(network.nic, ecmp_key=network.routing.ecmp_key),
                seed=run.seed,
            )
            times, flows_df = res.times, res.flows
            stats.update(events=int(getattr(res.stats, "events", 0)))
        else:
            from hetero_ns3.network.replay import LinkFault, run_plan

            link_faults = [LinkFault(f.a, f.b, f.at, f.rate_factor) for f in faults.links]
            res = run_plan(
                graph,
                plan,
                network,
                run.seed,
                link_faults=link_faults,
                progress=progress,
                stall_limit_s=run.stall_limit,
            )
            rec.times, rec.flows_df = res.times, res.flows
            stats.update(events=res.events, simulated_s=res.sim_time_s, ns3_wall_s=res.wall_s)
            if res.interrupted:
                raise KeyboardInterrupt  # recording_run writes the partial times with status "interrupted"
            if not res.completed:
                done = int(np.isfinite(res.times.finish_s).sum())
                raise SimulationError(
                    f"the packet-level replay stalled: {done} of {len(plan)} tasks finished by "
                    f"{res.sim_time_s:.6f} s simulated (a link down with no alternative path?)"
                )
            times, flows_df = res.times, res.flows
        stats["backend_wall_s"] = time.perf_counter() - t1
        summary = summarize(plan, times, rec.gpu_meta, rec.iteration)
        # Model FLOPs of one iteration over the time of one (steady-state) iteration.
        mfu = wplan.model_flops / (summary.iteration_time_s * wplan.peak_flops) if summary.iteration_time_s else 0.0
        stats["mfu"] = mfu
        paths = rec.finish(times, flows_df, extra_summary={"run": stats})
    return RunOutcome(paths, summary, backend, stats)
