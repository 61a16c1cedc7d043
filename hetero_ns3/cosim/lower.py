"""Lower a compiled Workload into one ExecutionPlan (compute tasks + flow tasks, one DAG).

Every compute op becomes a compute task on its rank's GPU (its duration scaled by the GPU's slowdown
factor, for straggler what-ifs). Every collective *instance* (the member ops of one NCCL call) goes
through the collective planner once, which adds its flows, reductions and latency tasks; each member
op then completes at the planner's exit task on its GPU. Pure Python, no ns-3.

Ordering: ops and instances are emitted in a topological order of the op graph (instances count as
one node whose dependencies are the union of their members'), so that every task depends only on
tasks already emitted, as :class:`~hetero_ns3.dag.PlanBuilder` requires. Cost is linear in ops,
dependencies and emitted tasks.
"""

from __future__ import annotations

import heapq
import os
from collections.abc import Mapping
from dataclasses import dataclass, field

from hetero_ns3.collectives import CollectiveCall, CollectiveEnv, plan_collective
from hetero_ns3.collectives.templates import CallTemplates
from hetero_ns3.dag import COMM_STREAM, COMPUTE_STREAM, ExecutionPlan, PlanBuilder
from hetero_ns3.errors import PlanningError
from hetero_ns3.workload.artefact import Op, Workload


@dataclass(frozen=True)
class CollectiveOverride:
    """Algorithm / protocol / channel choices for the collectives of one parallel dimension."""

    algo: str | None = None
    protocol: str | None = None
    channels: int | None = None


@dataclass(frozen=True)
class Lowered:
    """The execution plan of one iteration and how it maps back to the workload."""

    plan: ExecutionPlan
    op_exit: Mapping[int, tuple[int, ...]]
    """Workload op id -> task ids whose completion completes the op on its GPU."""
    choices: Mapping[str, int] = field(default_factory=dict)
    """Count of collective calls per ``dim:op:algo/protocol/channels`` choice."""
    n_collectives: int = 0


#: Traffic class per parallel dimension (all lossless by default; see docs/cosim.md).
DEFAULT_PRIORITY = {"tp": 3, "ep": 3, "pp": 3, "dp": 3}


def _p2p_call(members: tuple[Op, ...], gpu_of: list[str]) -> tuple[CollectiveCall, dict[str, list[Op]]]:
    send = next(m for m in members if m.collective == "send")
    recv = next(m for m in members if m.collective == "recv")
    src, dst = gpu_of[send.rank], gpu_of[recv.rank]
    call = CollectiveCall("send_recv", (src, dst), int(send.bytes), peer=dst, name=send.name)
    return call, {src: [send], dst: [recv]}


@dataclass(frozen=True)
class _OpGraph:
    """The workload as a graph of nodes: compute ops and collective instances (all members as one node).

    A node's id is the smallest op id among its ops (unique, and the emission order key).
    """

    ops: dict[int, Op]
    members: dict[int, list[Op]]
    """Node id of an instance -> its member ops (workload order)."""
    indeg: dict[int, int]
    """Node id -> number of dependency edges into it (one per dependency of one of its ops)."""
    succ: dict[int, list[int]]


def _op_graph(workload: Workload) -> _OpGraph:
    """Nodes and edges of ``workload`` (one pass over the ops, linear time)."""
    ops: dict[int, Op] = {}
    by_instance: dict[int, list[Op]] = {}
    for rank_ops in workload.ops:
        for op in rank_ops:
            ops[op.id] = op
            if op.instance >= 0:
                by_instance.setdefault(op.instance, []).append(op)
    node: dict[int, int] = {}
    members: dict[int, list[Op]] = {}
    for ms in by_instance.values():
        nid = min(m.id for m in ms)
        members[nid] = ms
        for m in ms:
            node[m.id] = nid
    indeg: dict[int, int] = {}
    succ: dict[int, list[int]] = {}
    for op in ops.values():
        nd = node.get(op.id, op.id)
        k = indeg.get(nd, 0)
        for d in op.deps:
            dn = node.get(d, d)
            if dn != nd:
                if d not in ops:
                    raise PlanningError(f"op {op.id} ({op.name}) depends on unknown op {d}")
                lst = succ.get(dn)
                if lst is None:
                    succ[dn] = [nd]
                else:
                    lst.append(nd)
                k += 1
        indeg[nd] = k
    return _OpGraph(ops, members, indeg, succ)


def lower_workload(
    workload: Workload,
    env: CollectiveEnv,
    *,
    slowdown: Mapping[str, float] | None = None,
    overrides: Mapping[str, CollectiveOverride] | None = None,
    priority: Mapping[str, int] | None = None,
    reuse: bool | None = None,
) -> Lowered:
    """Expand ``workload`` into one :class:`ExecutionPlan` using the collective planner.

    ``slowdown[gpu]`` multiplies the compute durations of that GPU (1 = nominal). ``overrides[dim]``
    fixes the algorithm / protocol / channels of that dimension's collectives (``tp``, ``pp``,
    ``dp``, ``ep``). ``priority[dim]`` is the traffic class of that dimension's flows.

    ``reuse`` replays repeated collective calls from templates (same plan, much faster; see
    docs/collectives.md, "Lowering speed"); None: on unless the environment sets ``HETERO_NS3_PLAN_REUSE=0``.
    """
    if reuse is None:
        reuse = os.environ.get("HETERO_NS3_PLAN_REUSE", "1") != "0"
    templates = CallTemplates() if reuse else None
    slowdown = slowdown or {}
    overrides = overrides or {}
    prio = {**DEFAULT_PRIORITY, **(priority or {})}
    gpu_of = [slot.gpu for slot in workload.ranks]
    graph = _op_graph(workload)
    ops, members_of, indeg, succ = graph.ops, graph.members, graph.indeg, graph.succ

    builder = PlanBuilder(list(dict.fromkeys(gpu_of)))  # rank order, each GPU once
    gidx_of = [builder.gpu_index(g) for g in gpu_of]
    slow_of = [float(slowdown.get(g, 1.0)) for g in gpu_of]
    op_exit: dict[int, tuple[int, ...]] = {}
    choices: dict[str, int] = {}
    n_coll = 0

    def dep_tasks(op: Op) -> list[int]:
        deps = op.deps
        if len(deps) == 1:
            return list(op_exit[deps[0]])
        out: list[int] = []
        for d in deps:
            out.extend(op_exit[d])
        return out

    # Kahn's algorithm, smallest node id (= smallest op id of the node) first.
    heap = [nd for nd, k in indeg.items() if k == 0]
    heapq.heapify(heap)
    emitted = 0
    add_compute, add_barrier = builder.add_compute, builder.add_barrier
    heappop, heappush = heapq.heappop, heapq.heappush
    no_succ: list[int] = []
    while heap:
        nd = heappop(heap)
        emitted += 1
        members = members_of.get(nd)
        if members is None:
            op = ops[nd]
            g = gidx_of[op.rank]
            if op.kind == "compute":
                stream = COMPUTE_STREAM if op.stream == "compute" else COMM_STREAM
                dur = op.duration * slow_of[op.rank]
                tid = add_compute(g, dur, dep_tasks(op), stream=stream, label=op.name, category="compute")
            else:  # a comm op outside any instance: nothing to move
                tid = add_barrier(g, dep_tasks(op), label=op.name)
            op_exit[nd] = (tid,)
        else:
            head = members[0]
            if head.collective in ("send", "recv"):
                call, by_gpu = _p2p_call(members, gpu_of)
            else:
                by_gpu = {}
                for m in members:
                    by_gpu.setdefault(gpu_of[m.rank], []).append(m)
                call = CollectiveCall(head.collective, tuple(head.group), int(head.bytes), name=head.name)
            ov = overrides.get(head.dim)
            if ov is not None:
                call = CollectiveCall(
                    call.op,
                    call.group,
                    call.size_bytes,
                    algo=ov.algo,
                    protocol=ov.protocol,
                    channels=ov.channels,
                    peer=call.peer,
                    name=call.name,
                )
            entry = {g: [t for m in ms for t in dep_tasks(m)] for g, ms in by_gpu.items()}
            if call.size_bytes <= 0:
                for g, ms in by_gpu.items():
                    tid = builder.add_barrier(g, entry[g], label=head.name, category=head.dim or "comm")
                    for m in ms:
                        op_exit[m.id] = (tid,)
            else:
                res = plan_collective(
                    builder,
                    call,
                    env,
                    entry,
                    category=head.dim or "comm",
                    priority=prio.get(head.dim, 0),
                    templates=templates,
                )
                n_coll += 1
                key = f"{head.dim}:{call.op}:{res.algo}/{res.protocol}/{res.channels}"
                choices[key] = choices.get(key, 0) + 1
                exits_of = res.exits
                for g, ms in by_gpu.items():
                    exits = tuple(exits_of[g])
                    for m in ms:
                        op_exit[m.id] = exits
        for s in succ.get(nd, no_succ):
            k = indeg[s] - 1
            indeg[s] = k
            if k == 0:
                heappush(heap, s)
    if emitted != len(indeg):
        raise PlanningError(f"workload has a dependency cycle: {len(indeg) - emitted} ops/instances never became ready")
    return Lowered(builder.build(copy=False), op_exit, choices, n_coll)  # the builder is dropped here
