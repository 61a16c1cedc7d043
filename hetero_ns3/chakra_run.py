"""A scenario whose workload is a Chakra trace (``[workload] chakra = ...``): import, repeat, simulate.

The per-rank ET files are imported into the plan of one iteration
(:func:`~hetero_ns3.workload.chakra_import.import_chakra`) with rank r on the r-th GPU of the cluster,
repeated over ``run.iterations`` and replayed on the backend like a compiled workload. This module is the
Chakra branch of :func:`hetero_ns3.pipeline.run_scenario`. See docs/chakra.md.
"""

from __future__ import annotations

import logging
import time
from pathlib import Path
from typing import Any

import numpy as np

from hetero_ns3.compute.gpus import get_gpu
from hetero_ns3.errors import ScenarioError
from hetero_ns3.network.backend import Backend, ProgressFn
from hetero_ns3.pipeline import (
    RunOutcome,
    check_link_faults,
    collective_env,
    gpu_slowdowns,
    load_run_cluster,
    recording_scenario_run,
    simulate,
)
from hetero_ns3.plan.dag import COMPUTE, ExecutionPlan
from hetero_ns3.plan.iterations import repeat_plan
from hetero_ns3.results import GpuMeta, summarize
from hetero_ns3.scenario.loader import Scenario
from hetero_ns3.topology import ClusterSpec, build_graph
from hetero_ns3.topology.graph import NetGraph
from hetero_ns3.workload.chakra_format import RankTrace
from hetero_ns3.workload.chakra_import import ChakraImport, ImportOptions, import_chakra, load_chakra

log = logging.getLogger(__name__)


def compute_only_s(plan: ExecutionPlan) -> float:
    """The iteration if communication were free: the longest path through ``plan`` with only the trace's
    compute nodes (category ``compute``) taking time (flows and the collective planner's latency and
    reduction tasks zero); stream order is in the dependencies, so the compute streams stay in order."""
    if "compute" not in plan.categories or not len(plan):
        return 0.0
    cat = plan.categories.index("compute")
    dur = np.where((plan.kind == COMPUTE) & (plan.category == cat), plan.duration_s, 0.0).tolist()
    ptr, idx = plan.dep_ptr.tolist(), plan.dep_idx.tolist()
    finish = [0.0] * len(dur)
    for t, d in enumerate(dur):  # task ids are a topological order
        a, b = ptr[t], ptr[t + 1]
        finish[t] = d + (max(finish[i] for i in idx[a:b]) if b > a else 0.0)
    return max(finish)


def _check_ranks(scenario: Scenario, n_ranks: int, n_gpus: int) -> None:
    if n_gpus != n_ranks:
        section = scenario.workload
        raise ScenarioError(
            f"workload.chakra ({section.chakra if section else None!r}) has {n_ranks} ranks but the cluster "
            f"({scenario.cluster.topology if scenario.cluster else '?'}) has {n_gpus} GPUs; rank r runs on the "
            "r-th GPU, so use a topology with as many GPUs as the trace has ranks"
        )


def check_chakra(scenario: Scenario, cluster: ClusterSpec) -> None:
    """What a Chakra run can check before the run directory is touched (ms): the rank files exist and are as
    many as the cluster's GPUs, and the ``[[faults.gpus]]`` selectors match."""
    from hetero_ns3.workload.chakra_format import find_rank_files

    section = scenario.workload
    if section is None or section.chakra is None:
        raise ScenarioError("workload.chakra is not set; name a directory or glob of per-rank ET files")
    _check_ranks(scenario, len(find_rank_files(section.chakra, Path(scenario.base_dir))), len(cluster.gpus()))
    gpu_slowdowns(scenario.faults, cluster)


def read_chakra(scenario: Scenario) -> tuple[list[RankTrace], dict[str, tuple[int, ...]]]:
    """The scenario's rank files and communicator groups, read and decoded (a corrupt or truncated file, a
    schema version we do not read, a comm-group JSON that does not parse: ScenarioError naming the file)."""
    section = scenario.workload
    if section is None or section.chakra is None:
        raise ScenarioError("workload.chakra is not set; name a directory or glob of per-rank ET files")
    return load_chakra(section.chakra, section.comm_groups, scenario.base_dir)


def lower_chakra(
    scenario: Scenario,
    graph: NetGraph,
    cluster: ClusterSpec,
    loaded: tuple[list[RankTrace], dict[str, tuple[int, ...]]] | None = None,
) -> ChakraImport:
    """Import the scenario's Chakra trace onto the cluster's GPUs, in order (one GPU per rank); ``loaded``:
    what :func:`read_chakra` returned (read here if None)."""
    section = scenario.workload
    if section is None or section.chakra is None:
        raise ScenarioError("workload.chakra is not set; name a directory or glob of per-rank ET files")
    traces, groups = loaded if loaded is not None else read_chakra(scenario)
    infos = cluster.gpus()
    _check_ranks(scenario, len(traces), len(infos))
    extra = scenario.compute.extra_gpus()
    gpus = [(g.name, get_gpu(g.gpu_type, extra)) for g in infos]
    colls = scenario.collectives
    opts = ImportOptions(
        durations=section.durations,
        cpu_ops=section.cpu_ops,
        ctrl_deps=section.ctrl_deps,
        roofline=scenario.compute.roofline(scenario.base_dir),
        slowdown=gpu_slowdowns(scenario.faults, cluster),
        overrides=colls.overrides(),
        priority=colls.priorities(),
    )
    imp = import_chakra(traces, groups, gpus, collective_env(scenario, graph), opts)
    if imp.untimed:
        log.warning(
            "chakra: %d compute nodes have no duration (durations=%s) and no num_ops / tensor_size: zero time",
            imp.untimed,
            section.durations,
        )
    if imp.dropped_deps:
        log.info("chakra: dropped %d dependencies on ids absent from their file", imp.dropped_deps)
    return imp


def chakra_gpu_meta(scenario: Scenario, cluster: ClusterSpec, traces: list[RankTrace]) -> dict[str, GpuMeta]:
    """GPU name -> :class:`GpuMeta` for the breakdown, as :func:`~hetero_ns3.pipeline.gpu_meta` sets it for a
    compiled workload: the slowdown is the GPU type's time for the work over the fastest type's, times the
    GPU's ``[[faults.gpus]]`` factor. A trace has no layer time; its work is its GPU compute nodes' ``num_ops``
    and ``tensor_size`` (every rank), timed on each GPU type by the roofline
    (:func:`~hetero_ns3.workload.chakra_import.roofline_time`). Without such nodes, or on one GPU type, the
    type part is 1 (waits on a slower GPU then come from faults only)."""
    from hetero_ns3.workload.chakra_format import attr_value, chakra_modules
    from hetero_ns3.workload.chakra_import import roofline_time

    gpus = cluster.gpus()
    types = sorted({g.gpu_type for g in gpus})
    work: list[tuple[float, float]] = []
    if len(types) > 1:
        pb, _ = chakra_modules()
        for trace in traces:
            for n in trace.nodes:
                if n.type != pb.COMP_NODE or attr_value(n, "is_cpu_op", False):
                    continue
                flops, nbytes = float(attr_value(n, "num_ops", 0) or 0), float(attr_value(n, "tensor_size", 0) or 0)
                if flops > 0 or nbytes > 0:
                    work.append((flops, nbytes))
    extra, roof = scenario.compute.extra_gpus(), scenario.compute.roofline(scenario.base_dir)
    time_of = {t: sum(roofline_time(f, b, get_gpu(t, extra), roof) for f, b in work) for t in types} if work else {}
    fastest = min(time_of.values(), default=0.0)
    factor = gpu_slowdowns(scenario.faults, cluster)
    by_type = {t: v / fastest if fastest > 0 else 1.0 for t, v in time_of.items()}
    return {g.name: GpuMeta(g.gpu_type, g.node, by_type.get(g.gpu_type, 1.0) * factor.get(g.name, 1.0)) for g in gpus}


def run_chakra(scenario: Scenario, out_dir: str | Path, engine: Backend, progress: ProgressFn | None) -> RunOutcome:
    """Simulate ``run.iterations`` iterations of the trace and write the run directory ``out_dir``."""
    run = scenario.run
    stats: dict[str, Any] = {"backend": engine.name, "seed": run.seed}
    t0 = time.perf_counter()
    cluster = load_run_cluster(scenario, engine.name)  # bad input fails before recording_run clears out_dir
    graph = build_graph(cluster)
    check_chakra(scenario, cluster)
    check_link_faults(scenario.faults, graph, engine.name)
    loaded = read_chakra(scenario)  # a file that does not decode is refused before out_dir is cleared too
    with recording_scenario_run(out_dir, scenario) as rec:
        imp = lower_chakra(scenario, graph, cluster, loaded)
        repeated = repeat_plan(imp.plan, run.iterations)
        plan = repeated.plan
        rec.plan, rec.iteration = plan, (repeated.iteration if run.iterations > 1 else None)
        rec.gpu_meta = chakra_gpu_meta(scenario, cluster, loaded[0])
        stats.update(
            plan_s=time.perf_counter() - t0,
            iterations=run.iterations,
            tasks_per_iteration=repeated.tasks_per_iteration,
            tasks=len(plan),
            flows=plan.n_flows,
            collectives=imp.n_collectives,
            collective_choices=dict(imp.choices),
            compute_only_iteration_s=compute_only_s(imp.plan),
            chakra={
                "ranks": imp.n_ranks,
                "nodes": dict(imp.node_counts),
                "dropped_deps": imp.dropped_deps,
                "untimed_compute_nodes": imp.untimed,
                "flops": imp.flops,
            },
        )
        t1 = time.perf_counter()
        res = simulate(engine, plan, graph, scenario, progress, rec)
        stats.update(res.stats)
        stats["backend_wall_s"] = time.perf_counter() - t1
        summary = summarize(plan, res.times, rec.gpu_meta, rec.iteration)
        peak = sum(get_gpu(g.gpu_type, scenario.compute.extra_gpus()).peak_flops(scenario.compute.precision)
                   for g in cluster.gpus())  # fmt: skip
        t = summary.iteration_time_s
        stats["mfu"] = imp.flops / (t * peak) if t and peak else 0.0
        paths = rec.finish(res.times, res.flows, extra_summary={"run": stats})
    return RunOutcome(paths, summary, engine.name, stats)
