"""Up-front resource estimates: refuse a run that cannot fit before spending minutes on it.

Two checkpoints, both cheap next to the work they guard:

1. :func:`estimate_shape` from the scenario alone (before the workload is compiled): per-rank ops from
   the model and parallel shape, then tasks, flows and bytes. It catches a ``global_batch`` of
   hundreds of thousands of microbatches or an enormous ``run.iterations`` in microseconds.
2. :func:`estimate_from_ops` once the workload is compiled (before lowering, the step that allocates
   the execution plan): the same from the workload's exact op count.

Calibration (measured on this project's runs, see docs/errors.md "Resource limits"):

* ops per microbatch: ``tp x (2 x layers x 5.4 + 4 x pp x vpp)`` over all ranks (scenarios/demo.toml:
  8 504 ops predicted 8 540; at ``global_batch = 32``: 33 368, predicted 33 890);
* tasks per op: 38 with the default collective tuning (demo: 322 664 tasks from 8 504 ops);
  flows per task 0.48 (156 352 of 322 664);
* bytes per task at peak, plan plus backend: analytic 150 B (docs/benchmarks.md: 32.6 M tasks in
  4 624 MiB at 1 024 GPUs, 149.7 M in 20.8 GB at 4 096), packet level 660 B above the 681 MB of the ns-3
  import (3.9 M tasks in 3 133 MiB at 128 GPUs); the workload compile itself ~2 kB per op;
* packet-level events ~1 470 per flow at ~3.2 M events/s (docs/benchmarks.md).

The estimate is refused when it exceeds the memory available now (``MemAvailable`` of /proc/meminfo,
else physical memory); ``--force`` (``force=True``) tries anyway.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from hetero_ns3.errors import PlanningError

OPS_PER_LAYER_PASS = 5.4
TASKS_PER_OP = 38.0
FLOWS_PER_TASK = 0.48
BYTES_PER_OP_WORKLOAD = 2_000
BYTES_PER_TASK = {"analytic": 150, "ns3": 660}
BASE_BYTES = {"analytic": 300 * 2**20, "ns3": 681 * 2**20}
EVENTS_PER_FLOW_NS3 = 1_470
EVENTS_PER_S_NS3 = 3.2e6
#: Above this many per-rank ops the workload compile alone runs for minutes (~10 us per op).
MAX_WORKLOAD_OPS = 50_000_000


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


def estimate_from_ops(ops: float, iterations: int, backend: str) -> Estimate:
    """Tasks, flows, bytes (and packet events) of ``iterations`` iterations of a workload of ``ops`` ops."""
    tasks = ops * TASKS_PER_OP * iterations
    flows = tasks * FLOWS_PER_TASK
    per_task = BYTES_PER_TASK.get(backend, max(BYTES_PER_TASK.values()))
    mem = BASE_BYTES.get(backend, 0) + tasks * per_task + ops * BYTES_PER_OP_WORKLOAD
    events = flows * EVENTS_PER_FLOW_NS3 if backend == "ns3" else None
    return Estimate(ops, iterations, tasks, flows, mem, events)


def shape_ops(scenario: object) -> float | None:
    """Per-rank ops of one iteration from the model and parallel shape (None: not enough to tell)."""
    model = getattr(scenario, "model", None)
    par = getattr(scenario, "parallelism", None)
    if model is None or par is None or not par.global_batch:
        return None
    microbatches = par.global_batch / max(par.micro_batch, 1)
    per_mb = 2 * model.layers * OPS_PER_LAYER_PASS + 4 * par.pp * max(par.vpp, 1)
    return par.tp * microbatches * per_mb


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
    scenario: object, backend: str, *, force: bool = False, iterations: int | None = None
) -> Estimate | None:
    """Checkpoint 1: refuse from the scenario's shape alone; returns the estimate (None: unknown)."""
    ops = shape_ops(scenario)
    if ops is None:
        return None
    its = iterations if iterations is not None else getattr(getattr(scenario, "run", None), "iterations", 1)
    est = estimate_from_ops(ops, its, backend)
    check_estimate(est, "this scenario", force=force)
    return est


def check_plan_shape(scenario: object, *, force: bool = False) -> None:
    """For ``hetero-ns3 plan`` (the workload compile only): refuse a workload too large to compile."""
    ops = shape_ops(scenario)
    if ops is None or force:
        return
    est = Estimate(ops, 1, 0.0, 0.0, ops * BYTES_PER_OP_WORKLOAD)
    if ops > MAX_WORKLOAD_OPS:
        check_estimate(est, "this scenario")
    avail = available_memory_bytes()
    if avail and est.bytes > avail:
        raise PlanningError(
            f"this scenario's workload would hold ~{ops:.3g} per-rank ops (~{_gib(est.bytes)}), more than the "
            f"{_gib(avail)} available; use fewer microbatches (parallelism.global_batch), or --force"
        )
