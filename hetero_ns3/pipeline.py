"""The spine: a scenario through every stage to a run directory. Nothing else composes the stages.

    load (scenario/) -> compile workload + compute (workload/, compute/) -> lower to an ExecutionPlan and
    repeat per iteration (plan/, collectives/) -> backend.run (network/) -> summary, tables, trace (results/)

``run_scenario`` is what ``hetero-ns3 run`` (and the benchmarks and sweeps) call. Each stage is a pure
function of its package; this module only wires them and records what each produced, so that a failure
or Ctrl-C still leaves a partial run directory (``summary.json`` with the status and reason).
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from hetero_ns3.collectives import CollectiveEnv, load_tuning
from hetero_ns3.errors import ScenarioError, SimulationError, field_error
from hetero_ns3.limits import check_estimate, check_shape, estimate_from_workload, fusable_groups
from hetero_ns3.network.backend import Backend, BackendRun, ProgressFn, get_backend
from hetero_ns3.plan.calls import CallTasks
from hetero_ns3.plan.dag import ExecutionPlan
from hetero_ns3.plan.fuse import AUTO_BACKENDS, FORCED_REUSE_MODES, Fuser
from hetero_ns3.plan.iterations import repeat_plan
from hetero_ns3.plan.lower import Lowered, lower_workload
from hetero_ns3.results import GpuMeta, RunPaths, recording_run, summarize, versions_info
from hetero_ns3.results.recorder import RunRecorder
from hetero_ns3.scenario.cluster import topology_path
from hetero_ns3.scenario.faults import FaultsSection
from hetero_ns3.scenario.loader import Scenario
from hetero_ns3.signals import Interrupted, last_signal
from hetero_ns3.topology import ClusterSpec, build_graph, load_cluster
from hetero_ns3.topology.fabric import (
    PCIE_ROOT_NOTE,
    gpus_across_pcie_switches,
    resolve_nic_attach,
    with_nic_attach,
)
from hetero_ns3.topology.graph import NetGraph
from hetero_ns3.workload.planner import CompiledIteration, check_scenario_plan, plan_scenario

log = logging.getLogger(__name__)

BACKENDS = ("ns3", "analytic")


@dataclass(frozen=True)
class RunOutcome:
    """What :func:`run_scenario` produced."""

    paths: RunPaths
    summary: Any
    """:class:`hetero_ns3.results.Summary` of the run (per-iteration times and steady-state breakdown)."""
    backend: str
    stats: Mapping[str, Any]


def load_run_cluster(scenario: Scenario, backend: str | None = None) -> ClusterSpec:
    """The scenario's cluster as a topology (``[cluster] topology = ...`` is required to simulate).

    ``backend``: the backend that will run it, which resolves ``nic_attach = "auto"`` (its
    ``nic_attach_auto``: ``direct`` where it applies on the packet level); None resolves it to ``pcie``
    (the flow level's graph).
    """
    cluster = scenario.cluster
    if cluster is None or cluster.topology is None:
        raise ScenarioError(
            "cluster.topology is required to simulate the network (inline [[cluster.groups]] only plan compute); "
            "set cluster.topology to a preset such as 'h0' or a topology file"
        )
    spec = load_cluster(topology_path(cluster.topology, scenario.base_dir))
    if cluster.nic_attach is not None:
        spec = with_nic_attach(spec, cluster.nic_attach, "cluster.nic_attach")
    spec = spec.with_routing(cluster.routing)
    lean = backend is not None and get_backend(backend).nic_attach_auto == "direct"
    _note_pcie_root(spec)
    return resolve_nic_attach(spec, lean)


_NOTED_PCIE: set[tuple[str, str]] = set()


def _note_pcie_root(spec: ClusterSpec) -> None:
    """Warn once per process and group where GPUs of a node sit behind different PCIe switches (a model limit)."""
    for g in spec.groups:
        key = (spec.name, g.name)
        if key not in _NOTED_PCIE and gpus_across_pcie_switches(g):
            _NOTED_PCIE.add(key)
            log.warning("cluster group %r (%s): %s", g.name, g.fabric.kind, PCIE_ROOT_NOTE)


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
            raise _no_gpu_selected(rule, f"faults.gpus[{i}]", gpus, cluster.name)
        for name in hit:
            out[name] = out.get(name, 1.0) * rule.factor
    return out


def check_link_faults(faults: FaultsSection, graph: NetGraph, backend: str) -> None:
    """``[[faults.links]]`` checked against ``graph``, the network ``backend`` simulates, before any work:
    each rule names two linked nodes of it, and the flow level gets only what it models (a rate from t = 0).
    The backends check the same when they apply the faults; this finds it before the run directory is
    touched and names the nodes a rule may use."""
    if not faults.links:
        return
    names = {nd.name for nd in graph.nodes}
    for i, lf in enumerate(faults.links):
        for key, name in (("a", lf.a), ("b", lf.b)):
            if name not in names:
                raise ScenarioError(
                    f"faults.links[{i}].{key} ({name!r}) is not a node of the network the {backend} backend "
                    f"simulates; {_fault_node_hint(name, graph, backend)}"
                )
        if not any({lk.a, lk.b} == {lf.a, lf.b} for lk in graph.links):
            near = sorted({lk.b if lk.a == lf.a else lk.a for lk in graph.links if lf.a in (lk.a, lk.b)})
            raise ScenarioError(
                f"faults.links[{i}]: no link between {lf.a!r} and {lf.b!r}; name two adjacent nodes: {lf.a!r} is "
                f"linked to {near[:8]}{' ...' if len(near) > 8 else ''}"
            )
    if backend == "analytic":  # at > 0 and rate_factor = 0 are the packet level's only
        from hetero_ns3.network.analytic.backend import apply_static_link_faults

        apply_static_link_faults(graph, faults)


def _fault_node_hint(name: str, graph: NetGraph, backend: str) -> str:
    """Where a link fault's node names come from, with examples from ``graph``."""
    hosts = graph.gpu_names()[:2]
    fabric = [nd.name for nd in graph.nodes if nd.kind == "switch" and nd.zone == ""][:3]
    inside = [nd.name for nd in graph.nodes if nd.kind == "switch" and nd.zone and nd.role != "nvls"][:3]
    hint = f"its nodes are GPUs (e.g. {hosts}), network switches (e.g. {fabric})"
    hint += f" and switches inside a server (e.g. {inside})" if inside else ""
    zone, _, part = name.rpartition(".")
    if backend == "ns3" and part.startswith(("nic", "pcie")) and f"{zone}.g0" in graph.gpu_names():
        hint += (
            "; the packet level folds a GPU's own NIC and PCIe switch into the GPU's port (cluster.nic_attach "
            "'auto' = 'direct' there), so name the GPU (e.g. 'n0.g0' for 'n0.nic0') or set cluster.nic_attach = 'pcie'"
        )
    return hint


def _no_gpu_selected(rule: Any, where: str, gpus: Sequence[Any], cluster: str) -> ScenarioError:
    """The error of a ``[[faults.gpus]]`` rule that matches no GPU: its selector field and the valid values."""
    if rule.gpu_type is not None:
        types = sorted({g.gpu_type for g in gpus})
        return field_error(
            f"{where}.gpu_type", rule.gpu_type, f"is not a GPU type of topology {cluster!r}", f"use one of {types}"
        )
    if rule.node is not None:
        nodes = sorted({g.node for g in gpus})
        return field_error(
            f"{where}.node", rule.node, f"is not a node of topology {cluster!r}", f"use {nodes[0]}..{nodes[-1]}"
        )
    return field_error(
        f"{where}.gpu",
        rule.gpu,
        f"is not a GPU of topology {cluster!r}",
        f"GPUs are named like {gpus[0].name!r} .. {gpus[-1].name!r}",
    )


def gpu_meta(cluster: ClusterSpec, wplan: CompiledIteration, faults: FaultsSection | None = None) -> dict[str, GpuMeta]:
    """GPU name -> :class:`GpuMeta` for the breakdown: type, node and slowdown.

    The slowdown is the GPU type's time per layer (``wplan.layer_time``, forward + backward, from the
    roofline) over the fastest type's, times the GPU's ``[[faults.gpus]]`` factor: 1 for every GPU of a
    homogeneous cluster without faults, so that no wait is straggler wait there (issue 19).
    """
    layer_time: Mapping[str, float] = wplan.layer_time or {}
    fastest = min((t for t in layer_time.values() if t > 0), default=0.0)
    factor = gpu_slowdowns(faults or FaultsSection(), cluster)
    out = {}
    for g in cluster.gpus():
        t = layer_time.get(g.gpu_type, 0.0)
        by_type = t / fastest if fastest > 0 and t > 0 else 1.0
        out[g.name] = GpuMeta(g.gpu_type, g.node, by_type * factor.get(g.name, 1.0))
    return out


def collective_env(scenario: Scenario, graph: NetGraph) -> CollectiveEnv:
    """The collective planner's view of ``graph`` with the scenario's tuning (``[collectives]``)."""
    colls = scenario.collectives
    tuning_path = colls.tuning
    if tuning_path is not None and (scenario.base_dir / tuning_path).is_file():
        tuning_path = str(scenario.base_dir / tuning_path)
    tuning = load_tuning(tuning_path)
    if colls.tuning_overrides():
        tuning = dataclasses.replace(tuning, **colls.tuning_overrides())  # type: ignore[arg-type]
    return CollectiveEnv.from_graph(graph, tuning)


def recording_scenario_run(
    out_dir: str | Path, scenario: Scenario, resolved: Mapping[str, Any] | None = None
) -> contextlib.AbstractContextManager[RunRecorder]:
    """:func:`~hetero_ns3.results.recording_run` for ``scenario``: its resolved form (``resolved``, or computed), the
    versions with its seed, and the files its ``[run]`` section asks for (``tables``, ``trace``)."""
    run = scenario.run
    doc = scenario.resolved() if resolved is None else resolved
    return recording_run(
        out_dir, scenario_resolved=doc, versions=versions_info(run.seed), tables=run.tables, trace=run.trace
    )


def reuse_active(scenario: Scenario, backend: str) -> bool:
    """Whether isolated collectives are fused for ``scenario`` on ``backend`` (``[run]
    reuse_isolated_collectives``): ``on`` and ``shared`` always (combinations they cannot serve are refused
    where they arise), ``off`` never, ``auto`` on the backends of :data:`~hetero_ns3.plan.fuse.AUTO_BACKENDS`
    for a compiled workload of one job without link faults."""
    mode = scenario.run.reuse_isolated_collectives
    if mode != "auto":
        return mode in FORCED_REUSE_MODES
    chakra = scenario.workload is not None and scenario.workload.chakra is not None
    return backend in AUTO_BACKENDS and not (scenario.faults.links or scenario.jobs or chakra)


def isolated_fuser(engine: Backend, graph: NetGraph, scenario: Scenario, env: CollectiveEnv) -> Fuser | None:
    """The :class:`~hetero_ns3.plan.fuse.Fuser` of ``[run] reuse_isolated_collectives`` when it is active on
    ``engine`` (:func:`reuse_active`; None otherwise): isolated calls timed by ``engine`` replaying them alone
    on ``graph`` with the scenario's settings."""
    if not reuse_active(scenario, engine.name):
        return None
    mode = scenario.run.reuse_isolated_collectives
    if scenario.faults.links:
        raise ScenarioError(
            f"run.reuse_isolated_collectives ({mode!r}) cannot be combined with [[faults.links]] (a fault changes "
            "links over time, which a call timed alone does not see); set run.reuse_isolated_collectives = 'off'"
        )

    def runner(plan: ExecutionPlan) -> np.ndarray:
        return simulate(engine, plan, graph, scenario).times.finish_s

    return Fuser(env, runner, switches=bool(getattr(engine, "shares_switch_state", True)), shared=mode == "shared")


def lower_plan(
    wplan: CompiledIteration,
    scenario: Scenario,
    env: CollectiveEnv,
    cluster: ClusterSpec,
    *,
    reuse: bool = True,
    fuser: Fuser | None = None,
) -> Lowered:
    """Lower a compiled workload into one iteration's execution plan (faults and ``[collectives]`` applied;
    ``fuser``: isolated calls fused, :func:`isolated_fuser`)."""
    colls = scenario.collectives
    return lower_workload(
        wplan.workload,
        env,
        slowdown=gpu_slowdowns(scenario.faults, cluster),
        overrides=colls.overrides(),
        priority=colls.priorities(),
        reuse=reuse,
        fuser=fuser,
    )


def lower_scenario(
    scenario: Scenario, graph: NetGraph, cluster: ClusterSpec, *, reuse: bool = True, engine: Backend | None = None
) -> tuple[CompiledIteration, Lowered]:
    """Plan the workload and lower it into one execution plan (``reuse``: see :func:`lower_workload`).

    Where ``[run] reuse_isolated_collectives`` is active (:func:`reuse_active`) isolated calls are fused and
    timed on ``engine`` (default: the scenario's ``run.backend``), see :func:`isolated_fuser`."""
    wplan = plan_scenario(scenario)
    env = collective_env(scenario, graph)
    fuser = isolated_fuser(engine or get_backend(scenario.run.backend), graph, scenario, env)
    return wplan, lower_plan(wplan, scenario, env, cluster, reuse=reuse, fuser=fuser)


def simulate(
    engine: Backend,
    plan: ExecutionPlan,
    graph: NetGraph,
    scenario: Scenario,
    progress: ProgressFn | None = None,
    rec: RunRecorder | None = None,
) -> BackendRun:
    """Replay ``plan`` on ``engine``; keep what finished in ``rec``; raise on interrupt or stall."""
    run = scenario.run
    res = engine.run(
        plan, graph, scenario.network, seed=run.seed, faults=scenario.faults, progress=progress,
        stall_limit_s=run.stall_limit,
    )  # fmt: skip
    if rec is not None:
        rec.times, rec.flows_df = res.times, res.flows
    if res.interrupted:
        # recording_run writes the partial times with status "interrupted" (the reason names the signal)
        raise Interrupted(last_signal() or "KeyboardInterrupt")
    if not res.completed:
        done = int(np.isfinite(res.times.finish_s).sum())
        raise SimulationError(
            f"the {engine.name} replay stalled: {done} of {len(plan)} tasks finished by "
            f"{res.sim_time_s:.6f} s simulated (a link down with no alternative path?)"
        )
    return res


def run_scenario(
    scenario: Scenario,
    out_dir: str | Path,
    *,
    backend: str | None = None,
    progress: ProgressFn | None = None,
    force: bool = False,
) -> RunOutcome:
    """Simulate ``run.iterations`` training iterations of ``scenario`` and write the run directory ``out_dir``.

    The workload is lowered once into the plan of one iteration, which is repeated
    (:func:`~hetero_ns3.plan.iterations.repeat_plan`) and replayed whole on the backend. A scenario with
    ``[[jobs]]`` goes through :func:`~hetero_ns3.jobs.run_jobs` (one plan per job, merged), one with
    ``[workload] chakra`` through :func:`~hetero_ns3.chakra_run.run_chakra` (the plan imported from the trace).

    Before any work, and again once the workload is compiled (before lowering), the run's size is
    estimated (:mod:`hetero_ns3.limits`); one that would not fit in memory raises PlanningError naming
    the estimate and the knob to turn, unless ``force``. Each phase is logged (INFO) as it starts.
    """
    run = scenario.run
    backend = backend or run.backend
    engine = get_backend(backend)
    if scenario.jobs and run.reuse_isolated_collectives in FORCED_REUSE_MODES:
        raise ScenarioError(
            f"run.reuse_isolated_collectives ({run.reuse_isolated_collectives!r}) is not supported with [[jobs]] "
            "(isolation is decided per job, and jobs share the network); set run.reuse_isolated_collectives = 'off'"
        )
    if scenario.jobs:
        from hetero_ns3.jobs import run_jobs

        return run_jobs(scenario, out_dir, engine, progress)
    reuse = reuse_active(scenario, backend)
    check_shape(scenario, backend, force=force, fused=reuse)
    if scenario.workload is not None and scenario.workload.chakra is not None:
        from hetero_ns3.chakra_run import run_chakra

        if run.reuse_isolated_collectives in FORCED_REUSE_MODES:
            raise ScenarioError(
                f"run.reuse_isolated_collectives ({run.reuse_isolated_collectives!r}) applies to compiled workloads, "
                "not to a Chakra trace (workload.chakra); set run.reuse_isolated_collectives = 'off'"
            )

        return run_chakra(scenario, out_dir, engine, progress)
    stats: dict[str, Any] = {"backend": backend, "seed": run.seed}
    resolved = scenario.resolved()
    t0 = time.perf_counter()
    # bad input fails here, before recording_run clears out_dir (a previous run's results stay)
    cluster = load_run_cluster(scenario, backend)
    graph = build_graph(cluster)
    gpu_slowdowns(scenario.faults, cluster)
    check_link_faults(scenario.faults, graph, backend)
    check_scenario_plan(scenario)
    with recording_scenario_run(out_dir, scenario, resolved) as rec:
        log.info("planning the workload ...")
        wplan = plan_scenario(scenario)
        env = collective_env(scenario, graph)
        fused = (
            fusable_groups(wplan.workload, env.node_of, shared=run.reuse_isolated_collectives == "shared")
            if reuse
            else None
        )
        routing = wplan.workload.meta.get("moe_routing")
        call_tasks = CallTasks(env, scenario.collectives.overrides(), routing)
        est = estimate_from_workload(wplan.workload, run.iterations, backend, fused, call_tasks)
        log.info("estimate: %s", est.describe())
        check_estimate(est, "this run", force=force)
        log.info("lowering %d ops into tasks and flows ...", wplan.workload.n_ops)
        fuser = isolated_fuser(engine, graph, scenario, env)
        lowered = lower_plan(wplan, scenario, env, cluster, fuser=fuser)
        if run.iterations > 1:
            log.info("repeating %d tasks over %d iterations ...", len(lowered.plan), run.iterations)
        repeated = repeat_plan(lowered.plan, run.iterations)
        plan = repeated.plan
        rec.plan, rec.iteration = plan, (repeated.iteration if run.iterations > 1 else None)
        rec.gpu_meta = gpu_meta(cluster, wplan, scenario.faults)
        stats.update(
            plan_s=time.perf_counter() - t0,
            iterations=run.iterations,
            tasks_per_iteration=repeated.tasks_per_iteration,
            tasks=len(plan),
            flows=plan.n_flows,
            collectives=lowered.n_collectives,
            collective_choices=dict(lowered.choices),
            fused_collectives=dict(lowered.fused),
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
        log.info("simulating on the %s backend ...", backend)
        res = simulate(engine, plan, graph, scenario, progress, rec)
        stats.update(res.stats)
        times, flows_df = res.times, res.flows
        stats["backend_wall_s"] = time.perf_counter() - t1
        summary = summarize(plan, times, rec.gpu_meta, rec.iteration)
        stats["mfu"] = mfu_of(wplan, summary.iteration_time_s)
        log.info("writing the run directory %s (%d tasks) ...", out_dir, len(plan))
        paths = rec.finish(times, flows_df, extra_summary={"run": stats})
    return RunOutcome(paths, summary, backend, stats)


def mfu_of(wplan: CompiledIteration, iteration_time_s: float) -> float:
    """Model FLOPs of one iteration over the time of one (steady-state) iteration at the GPUs' peak."""
    return wplan.model_flops / (iteration_time_s * wplan.peak_flops) if iteration_time_s else 0.0
