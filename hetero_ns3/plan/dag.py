"""The execution plan: one DAG of compute tasks and flow tasks, stored as arrays.

This is the contract between the planners (workload compiler, collective planner) and the two
network backends (packet-level ``ns3`` and flow-level ``analytic``). It is pure data: numpy arrays
in struct-of-arrays form so that millions of tasks cost megabytes, not gigabytes, and so that the
C++ replay can take them without a Python loop.

Semantics (both backends implement exactly this):

* A task starts when all its dependencies have finished (``deps``).
* A **compute** task occupies its GPU's ``stream`` for ``duration_s`` seconds. Streams are in-order
  queues like CUDA streams: the builder (:class:`~hetero_ns3.plan.builder.PlanBuilder`) adds, for
  every compute task, an implicit dependency on the previous compute task issued to the same (gpu,
  stream). So the replay needs only ``deps``. A compute task on stream -1 occupies no stream: a
  barrier (0 s) or a delay on a dependency edge (:meth:`~hetero_ns3.plan.builder.PlanBuilder.add_delay`).
  Stream :data:`HOST_STREAM` (-2) is the GPU's host thread issuing its kernels (category ``host``; only with
  the host issue model on, :mod:`hetero_ns3.workload.host`).
* A **flow** task moves ``size_bytes`` from GPU ``gpu`` to GPU ``dst`` through the network (an RDMA
  queue pair in the packet backend). Flows do not occupy a stream: the channels of a collective run
  concurrently, as NCCL's do. ``priority`` is the traffic class (0..7).
* Task ids are positions; a task may only depend on tasks with smaller ids, which makes every plan
  acyclic by construction (checked by :meth:`ExecutionPlan.validate`).

Units: seconds, bytes. GPU indices refer to ``ExecutionPlan.gpus`` (names as in the topology,
e.g. ``n3.g5``).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from hetero_ns3.errors import PlanningError

COMPUTE = 0
FLOW = 1

#: What a flow task hashes by for ECMP in both backends: its connection
#: (:meth:`ExecutionPlan.flow_connections`, NCCL's persistent queue pairs) or the flow task itself.
ECMP_KEYS: tuple[str, ...] = ("connection", "flow")

#: Tasks per block in :meth:`ExecutionPlan.validate`'s dependency check.
_VALIDATE_BLOCK = 1 << 20

#: Label ending of a fused collective call's per-rank task (``plan/fuse.py``): a compute task of a
#: communication category that stands for a whole one-node call, flows included; the breakdown counts
#: its time as intra-node communication, as it would count the call's NVLink flows.
FUSED_LABEL_SUFFIX = " fused"

#: Conventional stream ids. Collectives may use further ids (>= COMM_STREAM) per channel.
COMPUTE_STREAM = 0
COMM_STREAM = 1
#: The host thread that issues a GPU's kernels (:mod:`hetero_ns3.workload.host`): its tasks (category
#: ``"host"``) are in program order on this stream; a GPU's compute task waits for its host task.
HOST_STREAM = -2


@dataclass(frozen=True)
class ExecutionPlan:
    """A DAG of compute and flow tasks (struct of arrays, one row per task)."""

    gpus: tuple[str, ...]
    """GPU (host) names; ``gpu`` and ``dst`` index into this."""
    kind: np.ndarray
    """int8: COMPUTE or FLOW."""
    gpu: np.ndarray
    """int32: the GPU of a compute task; the source GPU of a flow."""
    dst: np.ndarray
    """int32: destination GPU of a flow; -1 for compute tasks."""
    size_bytes: np.ndarray
    """int64: bytes of a flow; 0 for compute tasks."""
    duration_s: np.ndarray
    """float64: duration of a compute task in seconds; 0 for flows."""
    stream: np.ndarray
    """int16: stream of a compute task; -1 for flows."""
    priority: np.ndarray
    """int8: traffic class of a flow (0..7); 0 for compute tasks."""
    dep_ptr: np.ndarray
    """int64, len n+1: deps of task i are ``dep_idx[dep_ptr[i]:dep_ptr[i+1]]`` (CSR)."""
    dep_idx: np.ndarray
    """int32: dependency task ids."""
    label: np.ndarray
    """int32: index into ``labels`` (what the task is, e.g. ``dp.all_reduce[3] ring ch1 step2``)."""
    labels: tuple[str, ...]
    category: np.ndarray
    """int16: index into ``categories`` (breakdown class, e.g. ``compute``, ``tp``, ``pp``, ``dp``)."""
    categories: tuple[str, ...]
    channel: np.ndarray
    """int16: the collective channel of the task (NCCL's ``ch<c>``, set by the collective planner); -1 for
    tasks that belong to no collective."""

    def __len__(self) -> int:
        return int(self.kind.shape[0])

    def deps(self, i: int) -> np.ndarray:
        return self.dep_idx[self.dep_ptr[i] : self.dep_ptr[i + 1]]

    @property
    def n_flows(self) -> int:
        return int(np.count_nonzero(self.kind == FLOW))

    def flow_connections(self) -> np.ndarray:
        """int64 per task: the connection (queue pair) a flow travels on; -1 for compute tasks.

        A connection is one (source GPU, destination GPU, category, channel) combination, the channel
        from the ``channel`` column (0 for a flow of no collective). It stands for NCCL's persistent
        connections: a communicator (approximated by the category: ``tp``, ``pp``, ``dp``, ``ep``) keeps
        one queue pair per channel and peer for the whole run, so every message of it carries the same
        RoCEv2 UDP source port and takes the same ECMP path. Ids are dense, numbered in order of first
        appearance. Cost: numpy over the tasks.
        """
        flows = self.kind == FLOW
        out = np.full(len(self), -1, dtype=np.int64)
        if not flows.any():
            return out
        n_gpu = max(1, len(self.gpus))
        key = self.gpu[flows].astype(np.int64) * n_gpu + self.dst[flows].astype(np.int64)
        key = key * max(1, len(self.categories)) + self.category[flows].astype(np.int64)
        chan = np.maximum(self.channel[flows], 0).astype(np.int64)
        key = key * (int(chan.max(initial=0)) + 1) + chan
        # First occurrence per key by a scatter over the key range (no sort over all flows): numpy
        # keeps the last write for repeated indices, so writing in reverse leaves the first position.
        n = key.shape[0]
        first = np.full(int(key.max()) + 1, n, dtype=np.int64)
        first[key[::-1]] = np.arange(n - 1, -1, -1, dtype=np.int64)
        present = np.flatnonzero(first < n)
        dense = np.full(first.shape[0], -1, dtype=np.int64)
        dense[present[np.argsort(first[present], kind="stable")]] = np.arange(present.shape[0], dtype=np.int64)
        out[flows] = dense[key]
        return out

    def validate(self) -> None:
        """Check array shapes, index ranges and acyclicity (deps point to earlier tasks)."""
        n = len(self)
        for name in ("gpu", "dst", "size_bytes", "duration_s", "stream", "priority", "label", "category", "channel"):
            if getattr(self, name).shape != (n,):
                raise PlanningError(f"ExecutionPlan.{name} has shape {getattr(self, name).shape}, expected ({n},)")
        if self.dep_ptr.shape != (n + 1,) or self.dep_ptr[0] != 0 or self.dep_ptr[-1] != len(self.dep_idx):
            raise PlanningError("ExecutionPlan.dep_ptr is not a valid CSR index")
        # In blocks of tasks, so that the temporaries stay small next to plans of 10^8 tasks.
        for lo in range(0, n, _VALIDATE_BLOCK):
            hi = min(n, lo + _VALIDATE_BLOCK)
            ptr = self.dep_ptr[lo : hi + 1]
            owner = np.repeat(np.arange(lo, hi, dtype=np.int64), np.diff(ptr))
            dep = self.dep_idx[ptr[0] : ptr[-1]]
            bad = np.flatnonzero((dep >= owner) | (dep < 0))
            if bad.size:
                i = int(owner[bad[0]])
                raise PlanningError(f"task {i} depends on task {int(dep[bad[0]])}: deps must be earlier tasks")
        flows = self.kind == FLOW
        if np.any((self.gpu < 0) | (self.gpu >= len(self.gpus))):
            raise PlanningError("a task names a GPU index outside ExecutionPlan.gpus")
        if np.any(flows & ((self.dst < 0) | (self.dst >= len(self.gpus)))):
            raise PlanningError("a flow names a destination GPU outside ExecutionPlan.gpus")
        if np.any(flows & (self.size_bytes <= 0)):
            raise PlanningError("a flow task has size_bytes <= 0")
        if np.any(~flows & (self.duration_s < 0)):
            raise PlanningError("a compute task has a negative duration")
        if np.any(self.channel < -1):
            raise PlanningError("a task has a channel below -1 (-1 means: part of no collective)")


@dataclass(frozen=True)
class TaskTimes:
    """What a backend returns for a plan: when each task started and finished (seconds)."""

    start_s: np.ndarray
    finish_s: np.ndarray

    @property
    def makespan_s(self) -> float:
        return float(self.finish_s.max()) if self.finish_s.size else 0.0


def critical_path_s(plan: ExecutionPlan, flow_time_s: np.ndarray | float = 0.0) -> TaskTimes:
    """Replay ``plan`` with fixed flow durations (default 0: an infinitely fast network).

    ``flow_time_s`` is a scalar or a per-task array (used for flows only). Since deps point to
    earlier ids and streams are already dependencies, one pass in id order is exact.
    """
    n = len(plan)
    ft = np.broadcast_to(np.asarray(flow_time_s, dtype=np.float64), (n,))
    start = np.zeros(n)
    finish = np.zeros(n)
    ptr, idx = plan.dep_ptr, plan.dep_idx
    dur = np.where(plan.kind == FLOW, ft, plan.duration_s)
    for i in range(n):
        a, b = ptr[i], ptr[i + 1]
        s = finish[idx[a:b]].max() if b > a else 0.0
        start[i] = s
        finish[i] = s + dur[i]
    return TaskTimes(start, finish)
