"""Lower a compiled Workload into one ExecutionPlan (compute tasks + flow tasks, one DAG).

Every compute op becomes a compute task on its rank's GPU (its duration scaled by the GPU's slowdown
factor, for straggler what-ifs). Every collective *instance* (the member ops of one NCCL call) goes
through the collective planner once, which adds its flows, reductions and latency tasks; each member
op then completes at the planner's exit task on its GPU. Pure Python, no ns-3.

Ordering: ops and instances are emitted in a topological order of the op graph (instances count as
one node whose dependencies are the union of their members'), so that every task depends only on
tasks already emitted, as :class:`~hetero_ns3.plan.builder.PlanBuilder` requires. Cost is linear in ops,
dependencies and emitted tasks; the per-rank ops are read as columns of the worker programs
(:mod:`hetero_ns3.workload.optable`), never built as :class:`~hetero_ns3.workload.artefact.Op` objects.
"""

from __future__ import annotations

import heapq
from array import array
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace

import numpy as np

from hetero_ns3.collectives import CollectiveCall, CollectiveEnv, plan_collective
from hetero_ns3.collectives.emit import comm_stream
from hetero_ns3.collectives.templates import CallTemplates
from hetero_ns3.collectives.types import CollectiveOverride
from hetero_ns3.errors import PlanningError
from hetero_ns3.plan.builder import PlanBuilder
from hetero_ns3.plan.calls import make_call
from hetero_ns3.plan.dag import COMPUTE_STREAM, HOST_STREAM, ExecutionPlan
from hetero_ns3.plan.fuse import Fuser, GroupKey, Shape, group_key
from hetero_ns3.plan.isolation import calls_ordered
from hetero_ns3.workload.artefact import ProgramOp, Workload
from hetero_ns3.workload.gcpause import gc_paused
from hetero_ns3.workload.offload import OFFLOAD_DIM
from hetero_ns3.workload.optable import OpTable, op_graph, op_table


def compact(a: np.ndarray) -> array:
    """``a`` (integers) as a typed :class:`array.array`, int32 when its values fit, else int64.

    The lowering walks per-op columns one element at a time in Python; a typed array costs 4 or 8 bytes
    per element where a list costs 8 plus a 32-byte int object (above 256), which at 10^7 ops was most of
    the lowering's peak (docs/validation.md, "Where the memory went")."""
    small = a.size == 0 or (int(a.min()) >= -(2**31) and int(a.max()) < 2**31)
    out = array("i" if small else "q")
    out.frombytes(memoryview(np.ascontiguousarray(a, dtype=np.int32 if small else np.int64)).cast("B"))  # type: ignore[arg-type]
    return out


class OpExits(Mapping[int, tuple[int, ...]]):
    """Workload op id -> task ids whose completion completes the op on its GPU (read-only mapping).

    Stored as two columns instead of a dict of tuples: per op position its single exit task, or
    ``-(k + 1)`` for ``multi[k]``. Lookups by op id search a sorted copy of the ids (made on first use)."""

    def __init__(self, ids: np.ndarray, code: array, multi: list[tuple[int, ...]]) -> None:
        self._ids = ids
        self._code = code
        self._multi = multi
        self._order: np.ndarray | None = None
        self._sorted: np.ndarray | None = None

    def _tasks(self, pos: int) -> tuple[int, ...]:
        c = self._code[pos]
        return (c,) if c >= 0 else self._multi[-c - 1]

    def __getitem__(self, op_id: int) -> tuple[int, ...]:
        if self._order is None or self._sorted is None:
            self._order = np.argsort(self._ids, kind="stable")
            self._sorted = self._ids[self._order]
        k = int(np.searchsorted(self._sorted, op_id))
        if k >= self._sorted.size or int(self._sorted[k]) != op_id:
            raise KeyError(op_id)
        return self._tasks(int(self._order[k]))

    def __iter__(self) -> Iterator[int]:
        return iter(self._ids.tolist())

    def __len__(self) -> int:
        return int(self._ids.shape[0])


@dataclass(frozen=True)
class Lowered:
    """The execution plan of one iteration and how it maps back to the workload."""

    plan: ExecutionPlan
    op_exit: Mapping[int, tuple[int, ...]]
    """Workload op id -> task ids whose completion completes the op on its GPU (an :class:`OpExits`)."""
    choices: Mapping[str, int] = field(default_factory=dict)
    """Count of collective calls per ``dim:op:algo/protocol/channels`` choice."""
    n_collectives: int = 0
    fused: Mapping[str, int] = field(default_factory=dict)
    """:attr:`~hetero_ns3.plan.fuse.Fuser.stats` when isolated collectives were fused, else empty."""


#: Traffic class per parallel dimension (all lossless by default; see docs/cosim.md).
DEFAULT_PRIORITY = {"tp": 3, "ep": 3, "cp": 3, "pp": 3, "dp": 3}


def _group(p: ProgramOp, t: int) -> tuple[str, ...]:
    """The group of tp member ``t``'s op of ``p`` (as :func:`~hetero_ns3.workload.artefact.expand_op`)."""
    return p.groups[t] if len(p.groups) > 1 else p.groups[0]


class _Lowering:
    """State of one :func:`lower_workload` call: the op table as typed arrays, every op's exit tasks, the calls."""

    def __init__(self, table: OpTable, gpu_of: list[str], routing: tuple[int, ...] | None = None) -> None:
        self.routing = routing
        """(experts, top_k[, groups, group_topk]) when the MoE token exchanges use the ``flex`` dispatcher
        (``Workload.meta``; :mod:`hetero_ns3.collectives.moe_routing`)."""
        self.prog_op = table.prog_op  # the table itself is not kept: its int64 columns are copied below
        self.gpu_of = gpu_of
        # Typed arrays, not lists: 4-8 bytes per op instead of ~40 (see :func:`compact`).
        self.rank = compact(table.rank)
        self.member = compact(table.member)
        self.dep_ptr = compact(table.dep_ptr)
        self.dep_pos = compact(table.dep_pos)
        self.exit_code = array("q", [-1]) * len(table)
        """Per position: the op's exit task (its only one), or ``-(k + 1)`` for the tasks ``multi[k]``."""
        self.multi: list[tuple[int, ...]] = [()]
        """Exit task tuples of ops with none or several (``multi[0]``: none, the state before emission)."""
        self.calls: dict[tuple, CollectiveCall] = {}
        """(op, group, bytes, peer, dim) -> the unnamed call of that shape."""

    def code_of(self, tasks: tuple[int, ...]) -> int:
        """The :attr:`exit_code` of an op whose exit tasks are ``tasks`` (stores a tuple of other lengths)."""
        if len(tasks) == 1:
            return tasks[0]
        self.multi.append(tasks)
        return -len(self.multi)

    def dep_tasks(self, i: int) -> list[int]:
        """Exit tasks of the dependencies of the op at position ``i`` (``Op.deps`` order, repeats kept)."""
        a, b = self.dep_ptr[i], self.dep_ptr[i + 1]
        code, multi = self.exit_code, self.multi
        out: list[int] = []
        for d in self.dep_pos[a:b]:
            c = code[d]
            if c >= 0:
                out.append(c)
            else:
                out.extend(multi[-c - 1])
        return out

    def call_of(
        self, members: Sequence[int], overrides: Mapping[str, CollectiveOverride]
    ) -> tuple[CollectiveCall, str, dict[str, list[int]]]:
        """An instance's call (unnamed, shared by every call of its shape), its name, its members per GPU.

        The call has the dimension's ``overrides`` applied; members are listed in workload order.
        """
        prog_op, gpu_of, rank = self.prog_op, self.gpu_of, self.rank
        head = prog_op[members[0]]
        if head.collective in ("send", "recv"):
            send = next(m for m in members if prog_op[m].collective == "send")
            recv = next(m for m in members if prog_op[m].collective == "recv")
            src, dst = gpu_of[rank[send]], gpu_of[rank[recv]]
            p = prog_op[send]
            key: tuple = ("send_recv", (src, dst), p.bytes, dst, head.dim)
            name = p.name
            by_gpu = {src: [send], dst: [recv]}
        else:
            by_gpu = {}
            for m in members:
                by_gpu.setdefault(gpu_of[rank[m]], []).append(m)
            key = (head.collective, _group(head, self.member[members[0]]), head.bytes, None, head.dim)
            name = head.name
        call = self.calls.get(key)
        if call is None:
            op, group, size, peer, dim = key
            call = self.calls[key] = make_call(op, group, size, dim, overrides, self.routing, peer, name)
        return call, name, by_gpu


def lower_workload(
    workload: Workload,
    env: CollectiveEnv,
    *,
    slowdown: Mapping[str, float] | None = None,
    overrides: Mapping[str, CollectiveOverride] | None = None,
    priority: Mapping[str, int] | None = None,
    reuse: bool = True,
    fuser: Fuser | None = None,
) -> Lowered:
    """Expand ``workload`` into one :class:`ExecutionPlan` using the collective planner.

    ``slowdown[gpu]`` multiplies the compute durations of that GPU (1 = nominal). ``overrides[dim]``
    fixes the algorithm / protocol / channels of that dimension's collectives (``tp``, ``pp``,
    ``dp``, ``ep``). ``priority[dim]`` is the traffic class of that dimension's flows.

    ``reuse`` replays repeated collective calls from templates (same plan, much faster; see
    docs/collectives.md, "Lowering speed"); ``reuse=False`` emits every call afresh (the reference the
    template tests compare against).

    ``fuser`` lowers every call of an isolated rank group into one fused task per rank (docs/collectives.md,
    "Isolated-collective reuse"); None emits every call in detail.
    """
    with gc_paused():  # millions of small, acyclic objects: collections would find nothing to free
        builder, op_exit, choices, n_coll = _emit(
            workload, env, slowdown or {}, overrides or {}, priority or {}, reuse, fuser
        )
        # The emission's per-op lists and templates are freed by now, before the plan is frozen and
        # validated (which needs temporaries of its own): a lower peak than building inside _emit.
        fused = dict(fuser.stats) if fuser is not None else {}
        return Lowered(builder.build(copy=False), op_exit, choices, n_coll, fused)  # the builder is dropped here


def _emit(
    workload: Workload,
    env: CollectiveEnv,
    slowdown: Mapping[str, float],
    overrides: Mapping[str, CollectiveOverride],
    priority: Mapping[str, int],
    reuse: bool,
    fuser: Fuser | None = None,
) -> tuple[PlanBuilder, OpExits, dict[str, int], int]:
    """Emit every task into a builder (:func:`lower_workload`'s defaults resolved); return it with each
    op's exit tasks, the algorithm choices and the call count."""
    templates = CallTemplates() if reuse else None
    prio = {**DEFAULT_PRIORITY, **priority}
    gpu_of = [slot.gpu for slot in workload.ranks]
    table = op_table(workload)
    graph = op_graph(table)

    builder = PlanBuilder(list(dict.fromkeys(gpu_of)))  # rank order, each GPU once
    routing = workload.meta.get("moe_routing")
    low = _Lowering(table, gpu_of, tuple(int(v) for v in routing) if routing else None)
    gidx_of = [builder.gpu_index(g) for g in gpu_of]
    slow_of = [float(slowdown.get(g, 1.0)) for g in gpu_of]
    choices: dict[str, int] = {}
    n_coll = 0
    host_wait: dict[int, int] = {}
    """Rank -> the GPU task its host waits for before issuing its next op (a host synchronisation)."""
    gap_s = float(workload.meta.get("host_sync_gap_s", 0.0))
    gaps = SyncGaps(gap_s, float(workload.meta.get("host_sync_jitter", 1.0))) if gap_s > 0 else None

    prog_op, rank_of, dep_tasks = low.prog_op, low.rank, low.dep_tasks
    ids = table.ids
    del table  # the other columns live on in ``low`` as typed arrays
    exit_code, multi, code_of = low.exit_code, low.multi, low.code_of
    dep_ptr, dep_pos = low.dep_ptr, low.dep_pos
    mem_ptr, mem_pos = compact(graph.mem_ptr), compact(graph.mem_pos)
    first_pos = compact(graph.mem_pos[graph.mem_ptr[:-1]])  # the op of a single-op node
    is_instance = graph.is_instance.tobytes()  # one byte per node, 0 or 1
    indeg, succ_ptr, succ = compact(graph.indeg), compact(graph.succ_ptr), compact(graph.succ)
    # Kahn's algorithm, smallest node first (node order = order of the smallest op id of the node).
    if fuser is not None:
        shapes, unordered = _shapes(low, graph.is_instance, mem_ptr, mem_pos, overrides, prio, env, slowdown)
        fuser.prepare(shapes, exclude=unordered)
    del graph  # its columns are copied into the typed arrays above
    heap = [nd for nd, k in enumerate(indeg) if k == 0]
    heapq.heapify(heap)
    emitted = 0
    add_compute, add_barrier = builder.add_compute, builder.add_barrier
    heappop, heappush = heapq.heappop, heapq.heappush
    while heap:
        nd = heappop(heap)
        emitted += 1
        if not is_instance[nd]:
            i = first_pos[nd]
            p = prog_op[i]
            r = rank_of[i]
            a = dep_ptr[i]
            # One dependency (the usual case): its exit tasks as they are (the builder copies what it is given).
            if dep_ptr[i + 1] - a == 1:
                c = exit_code[dep_pos[a]]
                deps = [c] if c >= 0 else multi[-c - 1]
            else:
                deps = dep_tasks(i)
            if p.kind == "compute":
                stream = COMPUTE_STREAM if p.stream == "compute" else comm_stream(p.dim)
                if p.host_wait:
                    deps = host_wait_gate(builder, gidx_of[r], p.host, p.name, deps, gaps)
                elif p.host > 0 or p.host_sync or r in host_wait:
                    deps = host_gate(builder, gidx_of[r], p.host, p.name, deps, host_wait, r, gaps)
                if p.dim == OFFLOAD_DIM:  # a host copy (CPU activation offloading): a copy engine's, not the SMs'
                    tid = add_compute(gidx_of[r], p.duration, deps, stream, p.name, OFFLOAD_DIM)
                else:
                    tid = add_compute(gidx_of[r], p.duration * slow_of[r], deps, stream, p.name, "compute")
                if p.host_sync:
                    host_wait[r] = tid
            else:  # a comm op outside any instance: nothing to move
                tid = add_barrier(gidx_of[r], deps, label=p.name)
            exit_code[i] = tid
        else:
            members = mem_pos[mem_ptr[nd] : mem_ptr[nd + 1]]
            head = prog_op[members[0]]
            call, name, by_gpu = low.call_of(members, overrides)
            entry = {g: [t for m in ms for t in dep_tasks(m)] for g, ms in by_gpu.items()}
            if head.host_wait:  # the host synchronises inside the call on each member's rank
                for g, ms in by_gpu.items():
                    for m in ms:
                        entry[g] = host_wait_gate(builder, builder.gpu_index(g), prog_op[m].host, name, entry[g], gaps)
            elif host_wait or head.host > 0:  # the host issues a blocking call on each member's rank
                for g, ms in by_gpu.items():
                    for m in ms:
                        pm = prog_op[m]
                        if pm.stream == "compute" and (pm.host > 0 or rank_of[m] in host_wait):
                            entry[g] = host_gate(
                                builder, builder.gpu_index(g), pm.host, pm.name, entry[g], host_wait, rank_of[m], gaps
                            )
            if call.size_bytes <= 0:
                for g, ms in by_gpu.items():
                    tid = builder.add_barrier(g, entry[g], label=head.name, category=head.dim or "comm")
                    for m in ms:
                        exit_code[m] = tid
            else:
                category, cls = head.dim or "comm", prio.get(head.dim, 0)
                exits_of: Mapping[str, Sequence[int]]
                if fuser is not None and fuser.fuses((call, category, cls)):
                    exits_of, ch = fuser.emit(builder, (call, category, cls), entry, name)
                    algo, protocol, channels = ch.algo, ch.protocol, ch.channels
                else:
                    if templates is not None:  # as plan_collective(..., templates=templates), without a named call
                        res = templates.plan(builder, call, env, entry, category, cls, name=name)
                    else:
                        res = plan_collective(builder, replace(call, name=name), env, entry, category, cls)
                    exits_of, algo, protocol, channels = res.exits, res.algo, res.protocol, res.channels
                n_coll += 1
                key = f"{head.dim}:{call.op}:{algo}/{protocol}/{channels}"
                choices[key] = choices.get(key, 0) + 1
                for g, ms in by_gpu.items():
                    c = code_of(tuple(exits_of[g]))
                    for m in ms:
                        exit_code[m] = c
        for s in succ[succ_ptr[nd] : succ_ptr[nd + 1]]:
            k = indeg[s] - 1
            indeg[s] = k
            if k == 0:
                heappush(heap, s)
    if emitted != len(indeg):
        raise PlanningError(f"workload has a dependency cycle: {len(indeg) - emitted} ops/instances never became ready")
    # Kept with the plan: 4 + 4 bytes per op where ids and task ids fit int32 (they do below 2^31 tasks).
    codes = compact(np.frombuffer(exit_code, dtype=np.int64))
    return builder, OpExits(np.asarray(compact(ids)), codes, multi), choices, n_coll


#: Seed of the host gaps after synchronisations (``[compute] host_sync_gap``): fixed, so that a scenario's plan is
#: reproducible; the drawn part of one rank's gap is independent of every other rank's.
SYNC_GAP_SEED = 20261205


class SyncGaps:
    """Host gaps of mean ``mean_s``, one per (rank, synchronisation) in emission order: the common part
    ``(1 - jitter) x mean_s`` plus an exponential draw of mean ``jitter x mean_s``, drawn in blocks (the Chakra
    importer draws the same sequence for the same plan; ``jitter`` 1: the whole gap is drawn)."""

    def __init__(self, mean_s: float, jitter: float = 1.0) -> None:
        self.common_s = (1.0 - jitter) * mean_s
        self.jitter_s = jitter * mean_s
        self.rng = np.random.default_rng(SYNC_GAP_SEED)
        self.block: list[float] = []

    def draw(self) -> float:
        if not self.block:
            self.block = (self.common_s + self.rng.exponential(self.jitter_s, 4096)).tolist()
        return self.block.pop()


def host_gate(
    builder: PlanBuilder,
    g: int,
    host_s: float,
    name: str,
    deps: Sequence[int],
    host_wait: dict[int, int],
    r: int,
    gaps: SyncGaps | None = None,
) -> list[int]:
    """Emit the host task that issues op ``name`` on GPU ``g`` (rank ``r``) and return ``deps`` with it.

    The task runs ``host_s`` seconds on ``g``'s host stream after the rank's previous host task (program
    order) and, after a host synchronisation, after the GPU task the host waited for, plus, with ``gaps``, that
    rank's gap after the synchronisation (:mod:`hetero_ns3.workload.host`)."""
    wait = host_wait.pop(r, None)
    duration = host_s + (gaps.draw() if wait is not None and gaps is not None else 0.0)
    h = builder.add_compute(g, duration, [] if wait is None else [wait], HOST_STREAM, f"host {name}", "host")
    return [*deps, h]


def host_wait_gate(
    builder: PlanBuilder, g: int, host_s: float, name: str, deps: Sequence[int], gaps: SyncGaps | None
) -> list[int]:
    """The host task of an op whose issue synchronises (``ProgramOp.host_wait``): on ``g``'s host stream after the
    rank's previous host task and after ``deps`` (the op's dependencies) on the GPU, lasting the op's issue cost
    ``host_s`` plus, with ``gaps``, one gap draw; returned as the op's only dependency besides ``deps``."""
    duration = host_s + (gaps.draw() if gaps is not None else 0.0)
    if duration <= 0:
        return list(deps)
    h = builder.add_compute(g, duration, list(deps), HOST_STREAM, f"host {name}", "host")
    return [*deps, h]


def _shapes(
    low: _Lowering,
    is_instance: np.ndarray,
    mem_ptr: array,
    mem_pos: array,
    overrides: Mapping[str, CollectiveOverride],
    prio: Mapping[str, int],
    env: CollectiveEnv,
    slowdown: Mapping[str, float],
) -> tuple[dict[Shape, None], set[GroupKey]]:
    """Every distinct (call, category, traffic class) of the workload's collective instances with bytes to
    move, and the rank groups not to fuse: ranks of different speeds (:func:`_even`) or calls not provably
    ordered (:func:`~hetero_ns3.plan.isolation.calls_ordered`). ``is_instance``, ``mem_ptr``, ``mem_pos``: the
    :class:`OpGraph` columns."""
    prog_op = low.prog_op
    out: dict[Shape, None] = {}
    by_group: dict[GroupKey, list[array]] = {}
    for nd in np.flatnonzero(is_instance).tolist():  # node order: each group's calls by smallest op id
        members = mem_pos[mem_ptr[nd] : mem_ptr[nd + 1]]
        call = low.call_of(members, overrides)[0]
        if call.size_bytes > 0:
            dim = prog_op[members[0]].dim
            shape = (call, dim or "comm", prio.get(dim, 0))
            out[shape] = None
            by_group.setdefault(group_key(shape), []).append(members)
    unordered = {
        g
        for g, calls in by_group.items()
        if not _even(g[1], env, slowdown) or not calls_ordered(low.rank, low.dep_ptr, low.dep_pos, calls)
    }
    return out, unordered


def _even(gpus: frozenset[str], env: CollectiveEnv, slowdown: Mapping[str, float]) -> bool:
    """Whether a group is inside one node and its ranks run at one speed (one GPU type, one slowdown
    factor), so that they enter its calls together (the fused start barrier waits for the last rank; see
    plan/fuse.py). One node: a fused call has no flows, and the breakdown counts a communication kernel
    without flows as intra-node communication (results/breakdown.py)."""
    return (
        len({env.node_of(g) for g in gpus}) <= 1
        and len({env.gpu_type(g) for g in gpus}) <= 1
        and len({slowdown.get(g, 1.0) for g in gpus}) <= 1
    )
