"""Planner: resolve a scenario's model, plan and cluster into a partitioned, compiled, checked CompiledIteration
(one training iteration compiled for the cluster; "plan" names only the ExecutionPlan of hetero_ns3.plan).

Steps: place ranks on GPUs; time one layer (forward + backward) on each GPU type with the roofline;
split layers over pipeline stages and microbatches over replicas (proportional to throughput, or
uniform, or as given); estimate per-GPU memory and fail on overflow (:mod:`hetero_ns3.workload.memory_plan`);
compile the Workload; replay it with free communication for the compute-only iteration time and MFU.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

from hetero_ns3.compute.config import ComputeConfig
from hetero_ns3.compute.gpus import GpuSpec, get_gpu
from hetero_ns3.compute.roofline import require_block_scaling
from hetero_ns3.errors import ScenarioError, field_error
from hetero_ns3.workload import layers as L
from hetero_ns3.workload.artefact import Workload
from hetero_ns3.workload.compiler import CompileSpec, StepPrograms, compile_workload
from hetero_ns3.workload.gcpause import gc_paused
from hetero_ns3.workload.memory import GIB, MemoryEstimate
from hetero_ns3.workload.memory_plan import check_memory, estimate_memory, saved_activations
from hetero_ns3.workload.models import ModelSpec
from hetero_ns3.workload.offload import offload_spec
from hetero_ns3.workload.parallel import ParallelismSpec
from hetero_ns3.workload.partition import chunk_layers, minmax_split, uniform_split
from hetero_ns3.workload.placement import GpuLike, Placement, place
from hetero_ns3.workload.plan_checks import check_plan, resolve_dp
from hetero_ns3.workload.timing import replay


@dataclass(frozen=True)
class CompiledIteration:
    """A resolved, compiled training iteration.

    Attributes:
        model, plan: inputs (``plan.dp`` resolved).
        placement: rank -> GPU.
        stage_layers: layers per virtual stage (v = chunk x pp + stage).
        replica_microbatches: microbatches per data-parallel replica.
        layer_time: seconds of one layer forward + backward per GPU type (compute only).
        memory: per-rank memory estimates.
        workload: the compiled per-rank ops.
        model_flops: model FLOPs per iteration (no recomputation; Narayanan et al.).
        executed_flops: FLOPs the ops execute (recomputation included).
        compute_time: iteration time if communication were free, seconds.
        peak_flops: sum of the GPUs' dense peaks at the plan's precision, FLOP/s.
    """

    model: ModelSpec
    plan: ParallelismSpec
    placement: Placement
    stage_layers: tuple[int, ...]
    replica_microbatches: tuple[int, ...]
    layer_time: dict[str, float]
    memory: tuple[MemoryEstimate, ...]
    workload: Workload
    model_flops: float
    executed_flops: float
    compute_time: float
    peak_flops: float

    @property
    def mfu(self) -> float:
        """Model FLOPs utilization if compute were the only cost."""
        return self.model_flops / (self.compute_time * self.peak_flops) if self.compute_time > 0 else 0.0

    @property
    def hfu(self) -> float:
        """Hardware FLOPs utilization (recomputation counted) if compute were the only cost."""
        return self.executed_flops / (self.compute_time * self.peak_flops) if self.compute_time > 0 else 0.0

    def summary(self) -> dict[str, Any]:
        """JSON-ready facts of the plan (no per-op data)."""
        p = self.plan
        mem_by_type: dict[str, float] = {}
        for m in self.memory:
            mem_by_type[m.gpu_type] = max(mem_by_type.get(m.gpu_type, 0.0), m.total)
        return {
            "model": self.model.name,
            "gpus": len(self.placement.slots),
            "gpu_types": dict(Counter(s.gpu_type for s in self.placement.slots)),
            "parallelism": {
                "tp": p.tp,
                "pp": p.pp,
                "dp": self.placement.dp,
                "ep": p.ep,
                "etp": p.expert_tp,
                "cp": p.cp,
                "cp_comm_type": p.cp_comm_type,
                "vpp": p.chunks,
                "schedule": p.schedule,
                "sequence_parallel": p.sequence_parallel,
                "recompute": p.recompute,
                "recomputed": sorted(p.recomputed),
                "zero_stage": p.zero_stage,
                "micro_batch": p.micro_batch,
                "global_batch": p.global_batch,
                "order": p.order,
                # only under PEFT, so that every earlier plan.json stays as it was
                **(
                    {"peft": p.peft, "lora_rank": p.lora_rank, "lora_modules": sorted(p.lora)}
                    if p.peft != "none"
                    else {}
                ),
            },
            "stage_layers": list(self.stage_layers),
            "replica_microbatches": list(self.replica_microbatches),
            "layer_time_s": self.layer_time,
            "max_memory_GiB_by_type": {k: v / GIB for k, v in mem_by_type.items()},
            "ops": self.workload.n_ops,
            "program_ops": self.workload.n_program_ops,
            "model_flops": self.model_flops,
            "executed_flops": self.executed_flops,
            "compute_only_iteration_time_s": self.compute_time,
            "peak_flops": self.peak_flops,
            "mfu_compute_only": self.mfu,
            "hfu_compute_only": self.hfu,
        }

    def write(self, out: str | Path) -> list[Path]:
        """Write plan.json (summary + per-GPU memory), workload.json and programs.csv (compact form); return paths."""
        d = Path(out)
        d.mkdir(parents=True, exist_ok=True)
        doc = {**self.summary(), "memory": [{**asdict(m), "total": m.total} for m in self.memory]}
        paths = [d / "plan.json", d / "workload.json", d / "programs.csv"]
        paths[0].write_text(json.dumps(doc, indent=1))
        self.workload.to_json(paths[1])
        self.workload.programs_dataframe().to_csv(paths[2], index=False)
        return paths


def program_time(progs: StepPrograms, gpu_type: str, what: Sequence[str], layer: int = 0) -> float:
    t = 0.0
    for w in what:
        for st in progs.program(w, layer):
            if isinstance(st, L.Compute):
                t += progs.cost(gpu_type, st.kernels)[2]
    return t


def _avg_layer_time(progs: StepPrograms, model: ModelSpec, gpu_type: str) -> float:
    total = 0.0
    for _, (first, n) in sorted(model.layer_kinds().items()):  # (dense before MoE, full before windowed): fixed order
        total += program_time(progs, gpu_type, ("layer_f", "layer_b"), first) * n
    return total / model.layers


def partition(
    model: ModelSpec, plan: ParallelismSpec, placement: Placement, progs: StepPrograms
) -> tuple[tuple[int, ...], tuple[int, ...], dict[str, float]]:
    """(layers per virtual stage, microbatches per replica, layer time per GPU type)."""
    pp, dp, chunks = plan.pp, placement.dp, plan.chunks
    types = sorted({s.gpu_type for s in placement.slots})
    layer_t = {g: _avg_layer_time(progs, model, g) for g in types}
    emb_t = {g: program_time(progs, g, ("emb_f", "emb_b")) for g in types}
    head_t = {g: program_time(progs, g, ("head_f", "head_b")) for g in types}
    # slowest GPU of each stage across replicas sets that stage's pace (DP syncs the replicas)
    stage_t = [max(layer_t[placement.slot(0, s, d).gpu_type] for d in range(dp)) for s in range(pp)]
    fixed = [0.0] * pp
    fixed[0] += max(emb_t[placement.slot(0, 0, d).gpu_type] for d in range(dp))
    fixed[-1] += max(head_t[placement.slot(0, pp - 1, d).gpu_type] for d in range(dp))
    if plan.stage_layers is not None:
        vlayers = tuple(plan.stage_layers)
    elif plan.accounted_slots:
        vlayers = plan.accounted_split(model.layers)
    elif plan.partition == "uniform":
        vlayers = uniform_split(model.layers, pp * chunks)
    else:
        per_stage = minmax_split(model.layers, stage_t, fixed, minimum=chunks)
        vlayers = chunk_layers(per_stage, chunks) if chunks > 1 else per_stage
    m_total = plan.microbatches
    if plan.replica_microbatches is not None:
        reps = tuple(plan.replica_microbatches)
    elif plan.partition == "uniform" or plan.ep > 1 or plan.cp > 1 or dp == 1:
        groups = dp // plan.cp  # the CP ranks of a replica run the same microbatches
        if m_total % groups:
            raise ScenarioError(
                f"parallelism.global_batch ({plan.global_batch}) is not a multiple of micro_batch x dp "
                f"({plan.micro_batch} x {groups}); uniform microbatches need it"
            )
        reps = (m_total // groups,) * dp
    else:
        stage_layers = [sum(vlayers[c * pp + s] for c in range(chunks)) for s in range(pp)]
        rep_t = []
        for d in range(dp):
            stage_s = []
            for s in range(pp):
                g = placement.slot(0, s, d).gpu_type
                extra = (emb_t[g] if s == 0 else 0.0) + (head_t[g] if s == pp - 1 else 0.0)
                stage_s.append(stage_layers[s] * layer_t[g] + extra)
            rep_t.append(max(stage_s))
        minimum = pp if plan.schedule in ("1f1b", "interleaved") and pp > 1 else 1
        if plan.schedule == "interleaved":
            if m_total % pp:
                raise ScenarioError(
                    f"parallelism.global_batch ({plan.global_batch}) must give a multiple of pp ({pp}) microbatches "
                    "for the interleaved schedule"
                )
            reps = tuple(pp * n for n in minmax_split(m_total // pp, [t * pp for t in rep_t], minimum=1))
        else:
            reps = minmax_split(m_total, rep_t, minimum=minimum)
    return vlayers, reps, layer_t


@dataclass(frozen=True)
class Resolved:
    """A validated, placed and partitioned plan, before compilation.

    Attributes:
        plan: the parallel plan with ``dp`` resolved.
        placement: rank -> GPU.
        spec: compiler input (model, plan, stage layers, replica microbatches, roofline, GPU lookup).
        layer_time: seconds of one layer forward + backward per GPU type.
        memory: per-rank memory estimates.
    """

    plan: ParallelismSpec
    placement: Placement
    spec: CompileSpec
    layer_time: dict[str, float]
    memory: tuple[MemoryEstimate, ...]


def resolve(
    model: ModelSpec,
    plan: ParallelismSpec,
    gpus: Sequence[GpuLike],
    compute: ComputeConfig | None = None,
    base_dir: Path | None = None,
    gpu_of: Callable[[str], GpuSpec] | None = None,
) -> Resolved:
    """Validate, place, partition and estimate memory (no compilation, no memory check)."""
    compute = compute or ComputeConfig()
    extra = compute.extra_gpus()
    lookup = gpu_of or (lambda name: get_gpu(name, extra))
    if not gpus:
        raise ScenarioError("the cluster has no GPUs")
    recipe = compute.recipe()
    for t in sorted({g.gpu_type for g in gpus}):
        lookup(t).peak_flops(compute.precision)
        if recipe is not None and recipe.gemm_factor:
            require_block_scaling(lookup(t), recipe=recipe.name)
    dp = resolve_dp(plan, len(gpus))
    check_plan(plan, model, dp)
    plan = replace(plan, dp=dp)
    placement = place(gpus, plan.tp, plan.pp, dp, plan.ep, plan.order, plan.cp, plan.etp)
    if plan.cp > 1 and not compute.flash_attention:
        raise field_error(
            "parallelism.cp",
            plan.cp,
            "needs fused attention (compute.flash_attention = false)",
            "set compute.flash_attention = true or cp = 1",
        )
    if model.document_len and (plan.cp > 1 or not compute.flash_attention):
        what, val, fix = (
            ("parallelism.cp", plan.cp, "set cp = 1")
            if plan.cp > 1
            else ("compute.flash_attention", False, "set compute.flash_attention = true")
        )
        raise field_error(
            what, val, f"is not modelled with packed sequences (model.document_len = {model.document_len})",
            f"{fix}, or model.document_len = 0",
        )  # fmt: skip
    if plan.cp > 1 and any(model.layer_window(i) for i in range(model.layers)):
        raise field_error(
            "parallelism.cp",
            plan.cp,
            f"is not modelled with sliding-window attention (model.window = {model.window})",
            "set cp = 1, or model.window = 0 to simulate full attention",
        )
    roofline = compute.roofline(base_dir)
    flash = compute.flash_attention
    host = compute.host_overhead
    ce = compute.cross_entropy
    probe = CompileSpec(model, plan, (1,) * plan.pp * plan.chunks, (1,) * dp, roofline, lookup, flash, host, ce)
    vlayers, reps, layer_t = partition(model, plan, placement, StepPrograms(probe))
    spec = CompileSpec(
        model, plan, vlayers, reps, roofline, lookup, flash, host, ce, compute.host_model(),
        param_gather_bytes=compute.param_gather_bytes(),
    )  # fmt: skip
    if plan.cpu_offload_layers:
        acts = saved_activations(model, plan, compute)
        spec = replace(spec, offload=offload_spec(plan.cpu_offload_layers, acts, gpus, lookup))
    memory = estimate_memory(model, plan, placement, spec, compute)
    return Resolved(plan, placement, spec, layer_t, memory)


def build_plan(
    model: ModelSpec,
    plan: ParallelismSpec,
    gpus: Sequence[GpuLike],
    compute: ComputeConfig | None = None,
    base_dir: Path | None = None,
    gpu_of: Callable[[str], GpuSpec] | None = None,
) -> CompiledIteration:
    """Validate, place, partition, check memory, compile and time one iteration.

    Raises ScenarioError for inconsistent inputs (naming fields and values) and PlanningError when
    a valid plan cannot run (HBM overflow, TP group across GPU types).
    """
    compute = compute or ComputeConfig()
    r = resolve(model, plan, gpus, compute, base_dir, gpu_of)
    if compute.check_memory:
        check_memory(r.memory, r.plan)
    with gc_paused():  # many small acyclic objects (see gcpause.py)
        wl = compile_workload(r.spec, r.placement)
        timeline = replay(wl)
    lookup = r.spec.gpu_of
    peak = sum(lookup(s.gpu_type).peak_flops(compute.precision) for s in r.placement.slots)
    return CompiledIteration(
        model,
        r.plan,
        r.placement,
        r.spec.stage_layers,
        r.spec.replica_microbatches,
        r.layer_time,
        r.memory,
        wl,
        model.iteration_flops(r.plan.global_batch, "none", r.plan.tp, frozen=r.plan.peft != "none"),
        wl.flops,
        timeline.iteration_time,
        peak,
    )


def _scenario_gpus(scenario: Any) -> tuple[ComputeConfig, tuple[GpuLike, ...]]:
    """A loaded scenario's ``[compute]`` section and its cluster's GPUs, after checking it has what planning needs."""
    from hetero_ns3.scenario.cluster import resolve_cluster_gpus

    scenario.require("model", "parallelism", "cluster", purpose="planning")
    compute = scenario.compute
    return compute, resolve_cluster_gpus(scenario.cluster, scenario.base_dir, compute.extra_gpus())


def plan_scenario(scenario: Any) -> CompiledIteration:
    """Build the CompiledIteration of a loaded :class:`~hetero_ns3.scenario.Scenario` ([model], [parallelism], [cluster])."""
    compute, gpus = _scenario_gpus(scenario)
    return build_plan(scenario.model, scenario.parallelism, gpus, compute, scenario.base_dir)


def scenario_step_programs(scenario: Any) -> tuple[StepPrograms, list[str]]:
    """The step programs of a loaded scenario's plan and its GPU types in placement order (what ``hetero-ns3 plan
    --kernels`` lists, :mod:`hetero_ns3.workload.kernel_table`); nothing is compiled."""
    compute, gpus = _scenario_gpus(scenario)
    r = resolve(scenario.model, scenario.parallelism, gpus, compute, scenario.base_dir)
    return StepPrograms(r.spec), list(dict.fromkeys(s.gpu_type for s in r.placement.slots))


def check_scenario_plan(scenario: Any) -> None:
    """The input checks of :func:`plan_scenario` that compile nothing: GPU types, parallel layout against the
    cluster and the model, partition and HBM fit. Milliseconds; ``run_scenario`` calls it before it touches
    the run directory, so that a bad input neither writes a failed run nor clears a previous one."""
    compute, gpus = _scenario_gpus(scenario)
    check_plan_inputs(scenario.model, scenario.parallelism, gpus, compute, scenario.base_dir)


def check_plan_inputs(
    model: ModelSpec,
    plan: ParallelismSpec,
    gpus: Sequence[GpuLike],
    compute: ComputeConfig | None = None,
    base_dir: Path | None = None,
) -> None:
    """What :func:`build_plan` checks before compiling (layout, partition, HBM fit), without compiling."""
    compute = compute or ComputeConfig()
    r = resolve(model, plan, gpus, compute, base_dir)
    if compute.check_memory:
        check_memory(r.memory, r.plan)
