"""Up-front resource estimates: refuse a run that cannot fit before spending minutes on it.

Two checkpoints, both cheap next to the work they guard:

1. :func:`estimate_shape` from the scenario alone (before the workload is compiled): per-rank ops from
   the model and parallel shape, then tasks, flows and bytes. It catches a ``global_batch`` of
   hundreds of thousands of microbatches or an enormous ``run.iterations`` in microseconds.
2. :func:`estimate_from_workload` once the workload is compiled (before lowering, the step that allocates
   the execution plan): tasks from the workload's op mix (compute ops, and the ring steps of each
   collective call: their number depends on the group size, so a flat tasks-per-op under-counted
   data-parallel all-reduces over 32 ranks by 2x).

Calibration (measured on this project's runs, see docs/errors.md "Resource limits"):

* ops per microbatch: ``tp x cp x (L + 3 x layers under FSDP + 4 x pp x vpp)`` over all ranks, ``L`` the layer
  programs' own ops (:func:`shape_ops`; demo 8 504 compiled, 9 952 predicted; Llama 3.1 405B on 1024 H100 with CP 2
  35.3 M, 36.3 M predicted, where the earlier ``tp x (2 x layers x 5.4 + 4 x pp x vpp)`` said 6.6 M);
* tasks per op, from the shape alone: 38 with the default collective tuning (demo: 322 664 tasks from
  8 504 ops; a lower bound where large groups dominate: Megatron 7.5B has 75); flows per task 0.48
  (156 352 of 322 664);
* tasks from the op mix: one per compute op, and per member of a collective call
  ``TASKS_PER_RING_STEP`` (16 with the default tuning: channels x slices x a flow and its kernel) per
  ring step: ``2 (n - 1)`` for an all-reduce of ``n`` ranks, ``n - 1`` for reduce-scatter, all-gather,
  all-to-all and broadcast, 1 for send/recv. Demo 319 880 predicted vs 322 664 lowered (-0.9%);
  Megatron 7.5B at ``global_batch = 64`` 10.21 M vs 10.26 M (-0.6%), the full 7.5B row 48.75 M vs
  49.2 M (-0.9%), gpt-1.7b at ``global_batch = 32`` 793 696 vs 795 296 (the flat rate said 34 048);
  plus ``DELAYS_PER_MIXED_RING_REDUCE_STEP`` per member and reduce step of a ring over several nodes
  with several ranks per node (gpt-1.7b at ``global_batch = 32``: 993 696 predicted and lowered); on the run path
  (``call_tasks``: :class:`hetero_ns3.plan.calls.CallTasks`) each call shape is emitted once and counted instead,
  which follows every algorithm the selector may pick: demo and gpt-1.7b exact, Qwen3-30B-A3B on 16 H100 at
  ``global_batch = 64`` 1.648 M for 1.655 M lowered where the ring rule said 4.18 M (its HybridEP exchanges), the
  1024-GPU DeepSeek-V3 row at ``global_batch = 512`` 115 M where the ring rule said 329 M;
* bytes per task at peak, plan plus backend: analytic 150 B (docs/benchmarks.md: 32.6 M tasks in
  4 624 MiB at 1 024 GPUs, 149.7 M in 20.8 GB at 4 096), packet level 660 B above the 681 MB of the ns-3
  import (3.9 M tasks in 3 133 MiB at 128 GPUs); the workload compile itself ~2 kB per op;
* where ``[run] reuse_isolated_collectives`` is active, checkpoint 1 counts one task per op, a lower
  bound (the flat rate assumes every call in detail), and checkpoint 2 counts a call as fused (one task per member
  and a barrier) when its group is one node's GPUs whose node links no other group uses (:func:`fusable_groups`;
  demo 322 664 tasks estimated and lowered, where "any one-node group" said 11 300); a group that the fuser still
  finds not isolated is lowered in detail, above the estimate;
* packet-level events ~1 470 per flow at ~3.2 M events/s (docs/benchmarks.md).

The estimate is refused when it exceeds the memory available now (``MemAvailable`` of /proc/meminfo,
else physical memory); ``--force`` (``force=True``) tries anyway.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass

from hetero_ns3.errors import PlanningError

OPS_PER_LAYER_PASS = 5.4
TASKS_PER_OP = 38.0
TASKS_PER_RING_STEP = 16.0
#: Extra tasks per member and reduce step of a ring over several nodes with several ranks on some node
#: (its steps' latencies differ, so each channel's first slice gets a delay task before the reduction:
#: ``collectives.emit.Emitter.delay``): one per channel, 8 channels with the default tuning.
DELAYS_PER_MIXED_RING_REDUCE_STEP = 8.0
FLOWS_PER_TASK = 0.48
BYTES_PER_OP_WORKLOAD = 2_000
BYTES_PER_TASK = {"analytic": 150, "ns3": 660}
BASE_BYTES = {"analytic": 300 * 2**20, "ns3": 681 * 2**20}
EVENTS_PER_FLOW_NS3 = 1_470
EVENTS_PER_S_NS3 = 3.2e6
#: Above this many per-rank ops the workload compile alone runs for minutes (~10 us per op).
MAX_WORKLOAD_OPS = 50_000_000
#: ``hetero-ns3 plan`` (the compile alone) per op of a TP group's program, measured on `plan` (2026-12-06): Llama 3.1
#: 405B on 256 GB200 (MXFP8, VP 8) 6.23 M program ops in 4.36 GB peak and 75 s; on 1024 H100 (CP 2) 4.41 M in 3.00 GB
#: and 65 s.
BYTES_PER_PROGRAM_OP = 700
SECONDS_PER_PROGRAM_OP = 15e-6
#: Above this many program ops ``plan`` refuses (about 7.5 min of compile).
MAX_PROGRAM_OPS = 30_000_000


@dataclass(frozen=True)
class Estimate:
    """Predicted size of a run (whole run: every iteration)."""

    ops: float
    """Per-rank ops of one iteration (the workload)."""
    iterations: int
    tasks: float
    flows: float
    bytes: float
    """Peak memory of the run (plan + backend), bytes."""
    events: float | None = None
    """Packet-level events (ns3 backend only)."""

    def describe(self) -> str:
        ev = (
            f", ~{self.events:.3g} packet events (~{self.events / EVENTS_PER_S_NS3 / 60:.0f} min)"
            if self.events
            else ""
        )
        return (
            f"~{self.ops:.3g} ops per iteration x {self.iterations} iteration(s) -> ~{self.tasks:.3g} tasks, "
            f"~{self.flows:.3g} flows{ev}, ~{_gib(self.bytes)} of memory"
        )


def _gib(b: float) -> str:
    return f"{b / 2**30:.1f} GiB"


def available_memory_bytes() -> int:
    """Memory available to a new allocation now: MemAvailable (Linux), else physical memory."""
    try:
        with open("/proc/meminfo", encoding="ascii") as fh:
            for line in fh:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    try:
        return int(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES"))
    except (ValueError, OSError, AttributeError):
        return 0


def ring_steps(collective: str, n: int) -> int:
    """Ring steps one member of a ``collective`` over ``n`` ranks takes (what its task count scales with)."""
    if n <= 1:
        return 0
    if collective == "all_reduce":
        return 2 * (n - 1)
    if collective in ("send", "recv"):
        return 1
    return n - 1


CallTaskCount = Callable[[str, tuple[str, ...], float, str], int]
"""(collective, group, bytes, dimension) -> tasks one instance of that call lowers into
(:class:`hetero_ns3.plan.calls.CallTasks`)."""


def workload_tasks(
    workload: object,
    fused: Callable[[tuple[str, ...]], bool] | None = None,
    call_tasks: CallTaskCount | None = None,
) -> float:
    """Tasks the lowering of one iteration of ``workload`` (a compiled ``Workload``) emits, estimated
    from its op mix without lowering it (see the module docstring for the rule and its residuals).

    ``fused(group)``: whether calls over that group (GPU names) will be fused (``[run]
    reuse_isolated_collectives``): then a call costs one task per member and one start barrier.
    ``call_tasks``: the tasks of one call of each shape, counted by emitting it; each member op then counts its
    share (the ring rule without it)."""
    tasks = 0.0
    for prog in getattr(workload, "programs", ()):
        members = len(prog.ranks)
        for op in prog.ops:
            if op.kind == "compute" or not op.groups:
                tasks += members
            elif fused is not None and fused(op.groups[0]):
                tasks += members * (1.0 + 1.0 / max(1, len(op.groups[0])))
            elif call_tasks is not None:
                group = tuple(op.groups[0])
                tasks += members * call_tasks(op.collective, group, op.bytes, op.dim) / len(group)
            else:
                group = op.groups[0]
                tasks += members * TASKS_PER_RING_STEP * ring_steps(op.collective, len(group))
                if op.collective in ("all_reduce", "reduce_scatter") and _mixed(group):
                    tasks += members * DELAYS_PER_MIXED_RING_REDUCE_STEP * (len(group) - 1)
    return tasks


def fusable_groups(
    workload: object, node_of: Callable[[str], str], *, shared: bool = False
) -> Callable[[tuple[str, ...]], bool]:
    """The ``fused`` predicate of :func:`workload_tasks` for ``[run] reuse_isolated_collectives``, before
    lowering: a group of one node's GPUs whose intra-node links no other group of the workload uses.

    What the fuser decides from the routes of every call (:mod:`hetero_ns3.plan.isolation`), approximated
    from the op groups: another group with two or more GPUs on a node (a pipeline send/recv inside the node,
    another collective over some of the same GPUs) shares the node links of those GPUs, and a group touching
    one of them is not isolated. A group's inter-node traffic goes through NICs and does not count. (The
    one-node rule alone counted the demo's tensor-parallel groups as fused, where pipeline send/recv inside
    each node shares their NVLinks: 11.3 k tasks estimated for 322.7 k lowered.) ``shared`` (``[run]
    reuse_isolated_collectives = "shared"``): every group of one node's GPUs, whoever else uses its links."""

    def one_node(group: tuple[str, ...]) -> bool:
        return len({node_of(g) for g in group}) == 1

    if shared:
        return one_node
    groups: set[tuple[str, ...]] = set()
    for prog in getattr(workload, "programs", ()):
        for op in prog.ops:
            if op.kind != "compute" and op.groups:
                groups.update(tuple(g) for g in op.groups)
    users: dict[str, set[tuple[str, ...]]] = {}  # GPU -> the groups that use its node links
    for group in groups:
        per_node: dict[str, list[str]] = {}
        for g in group:
            per_node.setdefault(node_of(g), []).append(g)
        for members in per_node.values():
            if len(members) > 1:
                for g in members:
                    users.setdefault(g, set()).add(group)

    def fused(group: tuple[str, ...]) -> bool:
        return one_node(group) and all(users.get(g, {group}) <= {group} for g in group)

    return fused


def _mixed(group: tuple[str, ...]) -> bool:
    """Whether ``group`` (GPU names ``node.gJ``) spans several nodes with several ranks on some node."""
    nodes = {g.rpartition(".")[0] for g in group}
    return 1 < len(nodes) < len(group)


def estimate_from_workload(
    workload: object,
    iterations: int,
    backend: str,
    fused: Callable[[tuple[str, ...]], bool] | None = None,
    call_tasks: CallTaskCount | None = None,
) -> Estimate:
    """:func:`estimate_from_ops` with the task count of the workload's op mix (:func:`workload_tasks`)."""
    ops = float(getattr(workload, "n_ops", 0))
    tasks = workload_tasks(workload, fused, call_tasks)
    return estimate_from_ops(ops, iterations, backend, tasks_per_iteration=tasks)


def estimate_from_ops(ops: float, iterations: int, backend: str, tasks_per_iteration: float | None = None) -> Estimate:
    """Tasks, flows, bytes (and packet events) of ``iterations`` iterations of a workload of ``ops`` ops
    (``tasks_per_iteration``: known from the op mix; else ``ops x TASKS_PER_OP``)."""
    per_it = ops * TASKS_PER_OP if tasks_per_iteration is None else tasks_per_iteration
    tasks = per_it * iterations
    flows = tasks * FLOWS_PER_TASK
    per_task = BYTES_PER_TASK.get(backend, max(BYTES_PER_TASK.values()))
    mem = BASE_BYTES.get(backend, 0) + tasks * per_task + ops * BYTES_PER_OP_WORKLOAD
    events = flows * EVENTS_PER_FLOW_NS3 if backend == "ns3" else None
    return Estimate(ops, iterations, tasks, flows, mem, events)


def shape_ops(scenario: object) -> float | None:
    """Per-rank ops of one iteration from the model and parallel shape (None: not enough to tell).

    Each micro-batch passes every stage on ``tp x cp`` ranks (the ``cp`` ranks of a replica all run it); per pass the
    layer programs' own ops (:func:`hetero_ns3.workload.compiler.layer_pass_ops`: their collectives and compute runs,
    which TP overlap, sequence and context parallelism multiply), under FSDP three collectives per layer, and
    ``4 x pp x vpp`` pipeline ops. A shape the layer programs cannot be built for (it fails validation later) falls
    back to ``OPS_PER_LAYER_PASS`` per layer and pass."""
    model = getattr(scenario, "model", None)
    par = getattr(scenario, "parallelism", None)
    if model is None or par is None or not par.global_batch:
        return None
    microbatches = par.global_batch / max(par.micro_batch, 1)
    compute = getattr(scenario, "compute", None)
    try:
        from hetero_ns3.workload.compiler import layer_pass_ops

        flash = getattr(compute, "flash_attention", True)
        layer_ops = float(layer_pass_ops(model, par, flash, getattr(compute, "cross_entropy", "unfused")))
    except Exception:  # noqa: BLE001 - an invalid shape: its own check reports it
        layer_ops = 2 * model.layers * OPS_PER_LAYER_PASS
    fsdp = 3 * model.layers if par.zero_stage >= 3 else 0
    per_mb = layer_ops + fsdp + 4 * par.pp * max(par.vpp, 1)
    return par.tp * par.cp * microbatches * per_mb


def _refuse(what: str, est: Estimate, avail: int, knobs: str) -> PlanningError:
    return PlanningError(
        f"{what} would need {est.describe()}, more than the {_gib(avail)} available on this machine; "
        f"{knobs}; or --force to try anyway"
    )


_KNOBS = (
    "make it smaller: fewer microbatches (parallelism.global_batch), run.iterations = 1, a coarser plan "
    "([collectives] max_channels = 1, max_slices = 1), or --backend analytic (flow level, ~4x less memory)"
)


def check_estimate(est: Estimate, what: str, *, force: bool = False, avail: int | None = None) -> None:
    """Raise PlanningError when ``est`` does not fit in memory (or the workload is too large to compile)."""
    if force:
        return
    if est.ops > MAX_WORKLOAD_OPS:
        raise PlanningError(
            f"{what} has ~{est.ops:.3g} per-rank ops per iteration (limit {MAX_WORKLOAD_OPS:.3g}; compiling it "
            f"alone would take ~{est.ops * 1e-5 / 60:.0f} min); use fewer microbatches "
            "(parallelism.global_batch / micro_batch), or --force to try anyway"
        )
    avail = available_memory_bytes() if avail is None else avail
    if avail and est.bytes > avail:
        knobs = _KNOBS if est.events is not None else _KNOBS.rsplit(", or --backend", 1)[0]
        raise _refuse(what, est, avail, knobs)


def check_shape(
    scenario: object, backend: str, *, force: bool = False, iterations: int | None = None, fused: bool = False
) -> Estimate | None:
    """Checkpoint 1: refuse from the scenario's shape alone; returns the estimate (None: unknown).

    ``fused``: isolated collectives will be fused (``[run] reuse_isolated_collectives``), so the flat
    per-op task rate does not hold; the check then uses one task per op, a lower bound (every op emits at
    least one task), and checkpoint 2 estimates from the op mix."""
    ops = shape_ops(scenario)
    if ops is None:
        return None
    its = iterations if iterations is not None else getattr(getattr(scenario, "run", None), "iterations", 1)
    est = estimate_from_ops(ops, its, backend, tasks_per_iteration=ops if fused else None)
    check_estimate(est, "this scenario", force=force)
    return est


def check_plan_shape(scenario: object, *, force: bool = False) -> None:
    """For ``hetero-ns3 plan`` (the workload compile only): refuse a workload too large to compile. The compile holds
    one op per TP group (the per-rank ops over tp): ``BYTES_PER_PROGRAM_OP`` each, ``MAX_PROGRAM_OPS`` at most."""
    ops = shape_ops(scenario)
    if ops is None or force:
        return
    program_ops = ops / max(1, getattr(getattr(scenario, "parallelism", None), "tp", 1))
    if program_ops > MAX_PROGRAM_OPS:
        raise PlanningError(
            f"this scenario has ~{ops:.3g} per-rank ops per iteration, ~{program_ops:.3g} per TP group (limit "
            f"{MAX_PROGRAM_OPS:.3g}; compiling it alone would take ~{program_ops * SECONDS_PER_PROGRAM_OP / 60:.0f} "
            "min); use fewer microbatches (parallelism.global_batch / micro_batch), or --force to try anyway"
        )
    need = program_ops * BYTES_PER_PROGRAM_OP
    avail = available_memory_bytes()
    if avail and need > avail:
        raise PlanningError(
            f"this scenario's workload would hold ~{ops:.3g} per-rank ops (~{_gib(need)}), more than the "
            f"{_gib(avail)} available; use fewer microbatches (parallelism.global_batch), or --force"
        )
