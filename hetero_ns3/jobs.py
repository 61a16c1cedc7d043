"""Several training jobs on one cluster and one network (``[[jobs]]``): place, lower, merge, simulate once.

Each job is placed on whole nodes (:func:`~hetero_ns3.topology.job_placement.place_jobs`), compiled and
lowered to its own execution plan on its own GPUs like a single-job scenario, repeated over its iterations,
held back until its ``start``, its labels prefixed with its name; the plans are merged into one DAG
(:func:`~hetero_ns3.plan.merge.merge_plans`) that the backend replays whole, so the jobs contend for
spines, rails and NIC ports. Each job's iteration time and breakdown come from its own tasks; with
``run.job_baselines`` each job is also simulated alone on the same placement and its slowdown reported.
This module is the multi-job branch of :func:`hetero_ns3.pipeline.run_scenario`.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from hetero_ns3.errors import ScenarioError
from hetero_ns3.network.backend import Backend, ProgressFn
from hetero_ns3.pipeline import (
    RunOutcome,
    check_link_faults,
    collective_env,
    gpu_meta,
    gpu_slowdowns,
    load_run_cluster,
    lower_plan,
    mfu_of,
    recording_scenario_run,
    simulate,
)
from hetero_ns3.plan.dag import ExecutionPlan, TaskTimes
from hetero_ns3.plan.iterations import RepeatedPlan, repeat_plan
from hetero_ns3.plan.merge import delay_start, merge_plans, prefix_labels
from hetero_ns3.results import GpuMeta, summarize
from hetero_ns3.results.link_table import job_link_figures, link_table
from hetero_ns3.results.meta import GpuMetaLike
from hetero_ns3.results.summary import Summary
from hetero_ns3.scenario.jobs import JobSection
from hetero_ns3.scenario.loader import Scenario
from hetero_ns3.topology import build_graph
from hetero_ns3.topology.job_placement import place_jobs
from hetero_ns3.workload.planner import CompiledIteration, build_plan, check_plan_inputs


@dataclass(frozen=True)
class JobPlan:
    """One job, lowered: its GPUs, workload plan and its own repeated execution plan (before merging)."""

    job: JobSection
    gpus: tuple[str, ...]
    nodes: tuple[int, ...]
    wplan: CompiledIteration
    repeated: RepeatedPlan
    n_collectives: int

    @property
    def iteration(self) -> np.ndarray | None:
        return self.repeated.iteration if self.job.iterations > 1 else None


def job_summary(jp: JobPlan, times: TaskTimes, meta: Mapping[str, GpuMetaLike]) -> Summary:
    """The iteration time and breakdown of one job from its own tasks' times (start offset excluded)."""
    return summarize(jp.repeated.plan, times, {g: meta[g] for g in jp.gpus}, jp.iteration)


def _job_row(jp: JobPlan, s: Summary, alone: Summary | None) -> dict[str, Any]:
    row: dict[str, Any] = {
        "name": jp.job.name,
        "gpus": len(jp.gpus),
        "nodes": list(jp.nodes),
        "placement": jp.job.placement.policy if not jp.job.placement.nodes else "nodes",
        "start_s": jp.job.start,
        "iterations": jp.job.iterations,
        "iteration_time_s": s.iteration_time_s,
        "iteration_times_s": list(s.iteration_times_s) or [s.iteration_time_s],
        "mfu": mfu_of(jp.wplan, s.iteration_time_s),
        "breakdown": s.overall.as_dict(),
        "tasks": len(jp.repeated.plan),
        "flows": jp.repeated.plan.n_flows,
        "collectives": jp.n_collectives,
    }
    if alone is not None:
        row["alone_iteration_time_s"] = alone.iteration_time_s
        row["slowdown"] = s.iteration_time_s / alone.iteration_time_s if alone.iteration_time_s else float("nan")
    return row


def check_jobs(scenario: Scenario, cluster: Any) -> None:
    """The jobs' placement and parallel plans checked without compiling (milliseconds): run before the run
    directory is touched, so that a bad job neither writes a failed run nor clears a previous one."""
    for i, (job, gpus) in enumerate(zip(scenario.jobs, place_jobs(scenario.jobs, cluster.gpus()), strict=True)):
        try:
            check_plan_inputs(job.model, job.parallelism, gpus, scenario.compute, scenario.base_dir)
        except ScenarioError as err:  # as lower_jobs words it
            raise ScenarioError(f"jobs[{i}] ({job.name}): {err}") from None


def lower_jobs(scenario: Scenario, graph: Any, cluster: Any) -> list[JobPlan]:
    """Place and lower every job (see the module docstring)."""
    env = collective_env(scenario, graph)
    out = []
    for i, (job, gpus) in enumerate(zip(scenario.jobs, place_jobs(scenario.jobs, cluster.gpus()), strict=True)):
        try:
            wplan = build_plan(job.model, job.parallelism, gpus, scenario.compute, scenario.base_dir)
        except ScenarioError as err:  # the planner names fields relative to the job's own sections
            raise ScenarioError(f"jobs[{i}] ({job.name}): {err}") from None
        lowered = lower_plan(wplan, scenario, env, cluster)
        repeated = repeat_plan(lowered.plan, job.iterations)
        nodes = tuple(sorted({g.node for g in gpus}))
        out.append(JobPlan(job, tuple(g.name for g in gpus), nodes, wplan, repeated, lowered.n_collectives))
    return out


def merged_plan(jobs: list[JobPlan]) -> tuple[ExecutionPlan, np.ndarray]:
    """The jobs' plans, each delayed to its start and labelled ``<job>.``, in one DAG; also where each job's
    own tasks begin in it (after its wait tasks)."""
    parts = [prefix_labels(delay_start(jp.repeated.plan, jp.job.start), f"{jp.job.name}.") for jp in jobs]
    plan, first = merge_plans(parts)
    own = first + np.array([len(p) - len(jp.repeated.plan) for p, jp in zip(parts, jobs, strict=True)], np.int64)
    return plan, own


def job_of_task(jobs: list[JobPlan], own: np.ndarray, n_tasks: int) -> np.ndarray:
    """int64 per task of the merged plan (:func:`merged_plan`): the index of its job. The parts are
    concatenated in job order, each job's start-wait tasks before its ``own`` tasks, so a job's tasks end
    where its own tasks end."""
    ends = np.asarray([int(a) + len(jp.repeated.plan) for jp, a in zip(jobs, own, strict=True)], np.int64)
    return np.searchsorted(ends, np.arange(n_tasks), side="right").astype(np.int64)


def run_jobs(scenario: Scenario, out_dir: str | Path, engine: Backend, progress: ProgressFn | None) -> RunOutcome:
    """Simulate every job of ``scenario`` together and write one run directory (``summary.json`` ``jobs``)."""
    run = scenario.run
    stats: dict[str, Any] = {"backend": engine.name, "seed": run.seed}
    t0 = time.perf_counter()
    cluster = load_run_cluster(scenario, engine.name)  # bad input fails before recording_run clears out_dir
    graph = build_graph(cluster)
    gpu_slowdowns(scenario.faults, cluster)
    check_link_faults(scenario.faults, graph, engine.name)
    check_jobs(scenario, cluster)
    with recording_scenario_run(out_dir, scenario) as rec:
        jobs = lower_jobs(scenario, graph, cluster)
        plan, own = merged_plan(jobs)
        rec.plan = plan
        meta: dict[str, GpuMeta] = {}
        for jp in jobs:  # slowdowns relative to the fastest GPU type of each job (issue 19)
            job_meta = gpu_meta(cluster, jp.wplan, scenario.faults)
            meta.update({g: job_meta[g] for g in jp.repeated.plan.gpus if g in job_meta})
        rec.gpu_meta = {
            g.name: meta.get(g.name, GpuMeta(g.gpu_type, g.node)) for g in cluster.gpus() if g.name in set(plan.gpus)
        }
        stats.update(
            plan_s=time.perf_counter() - t0,
            iterations=max(jp.job.iterations for jp in jobs),
            tasks_per_iteration=len(plan),
            tasks=len(plan),
            flows=plan.n_flows,
            collectives=sum(jp.n_collectives for jp in jobs),
            compute_only_iteration_s=max(jp.wplan.compute_time for jp in jobs),
        )
        t1 = time.perf_counter()
        res = simulate(engine, plan, graph, scenario, progress, rec)
        stats.update(res.stats)
        stats["backend_wall_s"] = time.perf_counter() - t1
        rows = []
        for jp, a in zip(jobs, own, strict=True):
            b = int(a) + len(jp.repeated.plan)
            shared = job_summary(jp, TaskTimes(res.times.start_s[a:b], res.times.finish_s[a:b]), rec.gpu_meta)
            alone = None
            if run.job_baselines:
                solo = simulate(engine, jp.repeated.plan, graph, scenario)
                alone = job_summary(jp, solo.times, rec.gpu_meta)
            rows.append(_job_row(jp, shared, alone))
        names = [jp.job.name for jp in jobs]
        job_of = job_of_task(jobs, own, len(plan))
        by_job = engine.link_load(
            plan, graph, scenario.network, seed=run.seed, group=job_of, n_groups=len(jobs)
        )  # fmt: skip
        span = float(np.max(res.times.finish_s) - np.min(res.times.start_s)) if len(plan) else 0.0
        rec.links_df = link_table(graph, by_job, names, span)
        for row in rows:
            row["links"] = job_link_figures(rec.links_df, row["name"])
        stats["jobs"] = rows
        stats["mfu"] = float(np.mean([r["mfu"] for r in rows]))
        flows = res.flows
        if "task" in flows.columns:
            flows = flows.assign(job=np.asarray(names, dtype=object)[job_of[flows["task"].to_numpy()]])
        summary = summarize(plan, res.times, rec.gpu_meta, None)
        paths = rec.finish(res.times, flows, extra_summary={"run": stats, "jobs": rows})
    return RunOutcome(paths, summary, engine.name, stats)
