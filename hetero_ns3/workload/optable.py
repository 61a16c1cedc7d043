"""A Workload's per-rank ops as flat columns and as a node graph, built without :class:`Op` objects.

:attr:`Workload.ops <hetero_ns3.workload.artefact.Workload.ops>` expands every program op once per tp
member into a frozen :class:`~hetero_ns3.workload.artefact.Op` (ids ``id x tp + t``, deps alike, see
:func:`~hetero_ns3.workload.artefact.expand_op`). At 1024 GPUs that is millions of objects, built only
to be read back. :func:`op_table` computes the same per-rank columns with numpy, one program at a time,
and :func:`op_graph` the graph the lowering walks: compute ops and collective instances as nodes.

Positions follow ``Workload.ops`` order: rank 0's ops in program order, then rank 1's, and so on, so
the members of an instance are listed exactly as a pass over ``Workload.ops`` meets them.
Cost: linear numpy passes over ops and dependencies, plus one Python pass over the program ops.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from hetero_ns3.errors import PlanningError
from hetero_ns3.workload.artefact import Program, ProgramOp, Workload


@dataclass(frozen=True)
class OpTable:
    """The per-rank ops of a workload, one row per position (``Workload.ops`` order).

    Row ``i`` is the op that :func:`~hetero_ns3.workload.artefact.expand_op` makes of
    ``prog_op[i]`` for tp member ``member[i]`` on rank ``rank[i]``. Every integer column has one dtype,
    int32 when every id, instance, position and dependency count fits (below 2^31), else int64.
    """

    ids: np.ndarray
    """op id (``program op id x tp + member``)."""
    rank: np.ndarray
    """global rank executing the op."""
    member: np.ndarray
    """tp index of the rank in its program."""
    prog_op: list[ProgramOp]
    """The program op each row expands."""
    instance: np.ndarray
    """rank-level collective instance id; -1 for compute ops."""
    dep_ptr: np.ndarray
    """len n+1: deps of row i are ``dep_pos[dep_ptr[i]:dep_ptr[i+1]]`` (CSR, ``Op.deps`` order)."""
    dep_pos: np.ndarray
    """positions (rows) of the dependencies."""

    def __len__(self) -> int:
        return int(self.ids.shape[0])

    @property
    def nbytes(self) -> int:
        """Bytes of the integer columns (``prog_op`` adds one pointer per row, its ops are the workload's)."""
        return sum(a.nbytes for a in (self.ids, self.rank, self.member, self.instance, self.dep_ptr, self.dep_pos))


@dataclass(frozen=True)
class _ProgramColumns:
    """Program-level columns of one :class:`Program` (shared by its tp members)."""

    ids: np.ndarray
    """int64: program op ids."""
    instance: np.ndarray
    """int64: program-level instance ids (-1: compute)."""
    per_member: np.ndarray
    """bool: the op has one group and instance per tp index."""
    dep_count: np.ndarray
    """int64: dependencies per op."""
    dep_ids: np.ndarray
    """int64: program-level ids of the dependencies, op after op."""


def _program_columns(prog: Program) -> _ProgramColumns:
    """Columns of ``prog``'s ops (one Python pass over them)."""
    ops = prog.ops
    deps: list[int] = []
    for p in ops:
        deps.extend(p.deps)
    return _ProgramColumns(
        ids=np.fromiter((p.id for p in ops), dtype=np.int64, count=len(ops)),
        instance=np.fromiter((p.instance for p in ops), dtype=np.int64, count=len(ops)),
        per_member=np.fromiter((len(p.groups) > 1 for p in ops), dtype=bool, count=len(ops)),
        dep_count=np.fromiter((len(p.deps) for p in ops), dtype=np.int64, count=len(ops)),
        dep_ids=np.asarray(deps, dtype=np.int64),
    )


def _positions_of(ids: np.ndarray, wanted: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(position of each ``wanted`` id in ``ids``, whether it is there); PlanningError if ``ids`` repeat."""
    order = np.argsort(ids, kind="stable")
    sorted_ids = ids[order]
    if np.any(sorted_ids[1:] == sorted_ids[:-1]):
        raise PlanningError("workload has duplicate op ids; give every op its own id")
    if not len(ids):
        return np.zeros(len(wanted), dtype=np.int64), np.zeros(len(wanted), dtype=bool)
    at = np.minimum(np.searchsorted(sorted_ids, wanted), len(ids) - 1)
    return order[at], sorted_ids[at] == wanted


class _ProgramIndex:
    """Where each program-level op id lives: (program, index in its program), and where each rank's rows start.

    Valid when no rank runs two programs and no program has more than ``tp`` ranks: then rank-level id
    ``d x tp + t`` is row ``start[programs[P].ranks[t]] + j`` for the program op ``d`` at index ``j`` of
    program ``P``, and looking up the (few) program-level ids replaces a sort of every rank-level id."""

    def __init__(self, workload: Workload, cols: dict[int, _ProgramColumns], start: np.ndarray) -> None:
        ks = sorted(cols)
        ids = np.concatenate([cols[k].ids for k in ks]) if ks else np.zeros(0, dtype=np.int64)
        prog = np.repeat(np.asarray(ks, dtype=np.int64), [len(cols[k].ids) for k in ks])
        index = np.concatenate([np.arange(len(cols[k].ids), dtype=np.int64) for k in ks]) if ks else ids
        order = np.argsort(ids, kind="stable")
        self.sorted_ids = ids[order]
        if np.any(self.sorted_ids[1:] == self.sorted_ids[:-1]):  # as the rank-level search would refuse them
            raise PlanningError("workload has duplicate op ids; give every op its own id")
        self.prog, self.index = prog[order], index[order]
        ranks_of = np.full((len(workload.programs), workload.tp), -1, dtype=np.int64)
        for k in ks:
            ranks_of[k, : len(workload.programs[k].ranks)] = workload.programs[k].ranks
        self.row_of_member = np.where(ranks_of >= 0, start[np.maximum(ranks_of, 0)], -1)
        """(program, tp index) -> first row of that member's rank; -1: no such member."""

    def locate(self, dep_ids: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(program, index in it) of each program-level id; program -1 where the id is unknown."""
        if not self.sorted_ids.size:
            return np.full(len(dep_ids), -1, dtype=np.int64), np.zeros(len(dep_ids), dtype=np.int64)
        at = np.minimum(np.searchsorted(self.sorted_ids, dep_ids), self.sorted_ids.size - 1)
        found = self.sorted_ids[at] == dep_ids
        return np.where(found, self.prog[at], -1), self.index[at]


def op_table(workload: Workload) -> OpTable:
    """The per-rank ops of ``workload`` as columns (same ids, ranks, instances and deps as ``Workload.ops``).

    The columns are filled in place, one rank at a time (no per-rank parts concatenated, no temporaries
    over all rows). Raises PlanningError for duplicate op ids or a dependency on an unknown op (naming the op).
    """
    tp = workload.tp
    progs = workload.programs
    owner: dict[int, tuple[int, int]] = {}  # rank -> (program index, tp index); the last program wins
    for k, prog in enumerate(progs):
        for t, r in enumerate(prog.ranks):
            owner[r] = (k, t)
    rows = [(r, *owner[r]) for r in range(len(workload.ranks)) if r in owner]
    cols = {k: _program_columns(progs[k]) for k in sorted({k for _, k, _ in rows})}
    n = sum(len(cols[k].ids) for _, k, _ in rows)
    n_deps = sum(len(cols[k].dep_ids) for _, k, _ in rows)
    top = max([n + 1, n_deps + 1, len(workload.ranks), tp]
              + [int(max(np.abs(c.ids).max(initial=0), np.abs(c.instance).max(initial=0))) * tp + tp
                 for c in cols.values()])  # fmt: skip
    dt = np.int32 if top < 2**31 else np.int64
    ids, rank, member, instance = (np.empty(n, dtype=dt) for _ in range(4))
    dep_ptr = np.empty(n + 1, dtype=dt)
    dep_ptr[0] = 0
    start = np.full(len(workload.ranks), -1, dtype=np.int64)  # first row of each rank
    prog_op: list[ProgramOp] = []
    o = d = 0
    for r, k, t in rows:
        c = cols[k]
        m = len(c.ids)
        start[r] = o
        ids[o : o + m] = c.ids * tp + t
        rank[o : o + m] = r
        member[o : o + m] = t
        instance[o : o + m] = np.where(c.instance >= 0, c.instance * tp + np.where(c.per_member, t, 0), -1)
        dep_ptr[o + 1 : o + m + 1] = np.cumsum(c.dep_count) + d
        prog_op.extend(progs[k].ops)
        o, d = o + m, d + len(c.dep_ids)
    unique_owner = (
        sum(len(p.ranks) for p in progs) == len(owner)
        and all(len(p.ranks) <= tp for p in progs)
        and all(0 <= r < len(workload.ranks) for r in owner)
    )
    dep_pos = np.empty(n_deps, dtype=dt)
    if unique_owner:  # look up program-level ids, then offset by the member's first row
        index = _ProgramIndex(workload, cols, start)
        located = {k: index.locate(c.dep_ids) for k, c in cols.items()}
        d = 0
        for _, k, t in rows:
            dprog, didx = located[k]
            e = len(dprog)
            first = index.row_of_member[dprog, t]
            bad = (dprog < 0) | (first < 0)
            if bad.any():
                _unknown(ids, dep_ptr, prog_op, d + int(np.flatnonzero(bad)[0]), int(cols[k].dep_ids[bad][0]) * tp + t)
            dep_pos[d : d + e] = first + didx
            d += e
    else:  # a rank in two programs, or more members than tp: search every rank-level id
        dep_ids = np.concatenate([cols[k].dep_ids * tp + t for _, k, t in rows]) if rows else np.zeros(0, np.int64)
        pos, found = _positions_of(ids, dep_ids)
        if not found.all():
            bad = int(np.flatnonzero(~found)[0])
            _unknown(ids, dep_ptr, prog_op, bad, int(dep_ids[bad]))
        dep_pos[:] = pos
    return OpTable(ids, rank, member, prog_op, instance, dep_ptr, dep_pos)


def _unknown(ids: np.ndarray, dep_ptr: np.ndarray, prog_op: list[ProgramOp], bad: int, dep_id: int) -> None:
    """Raise the PlanningError of dependency entry ``bad`` (CSR index), an unknown rank-level ``dep_id``."""
    i = int(np.searchsorted(dep_ptr, bad, side="right") - 1)
    raise PlanningError(f"op {int(ids[i])} ({prog_op[i].name}) depends on unknown op {dep_id}")


@dataclass(frozen=True)
class OpGraph:
    """Nodes (compute ops and collective instances, all members as one node) and their edges.

    Nodes are numbered 0.. in increasing order of their *node id*, the smallest op id among their ops,
    so the smallest node index is also the smallest node id.
    """

    node: np.ndarray
    """per position: its node (the table's dtype)."""
    mem_ptr: np.ndarray
    """int64, len n_nodes+1: the ops of node j are ``mem_pos[mem_ptr[j]:mem_ptr[j+1]]``."""
    mem_pos: np.ndarray
    """member positions (the table's dtype), node after node, each node's in position order."""
    is_instance: np.ndarray
    """bool per node: a collective instance (else a single op)."""
    indeg: np.ndarray
    """int64 per node: dependency edges into it (one per dependency of one of its ops on another node)."""
    succ_ptr: np.ndarray
    """int64, len n_nodes+1: CSR of successors (one entry per edge)."""
    succ: np.ndarray
    """successor nodes (the table's dtype)."""

    @property
    def n_nodes(self) -> int:
        return int(self.indeg.shape[0])


def op_graph(table: OpTable) -> OpGraph:
    """The node graph of ``table`` (numpy, linear up to sorts). Its per-op and per-edge columns have the
    table's dtype (int32 below 2^31 rows), so no temporary over all ops or edges is wider than needed."""
    dt = table.ids.dtype
    node_id = table.ids.copy()
    members = np.flatnonzero(table.instance >= 0)
    if members.size:
        inst = table.instance[members]
        by_inst = np.lexsort((table.ids[members], inst))  # per instance, smallest id first
        del inst
        members = members[by_inst]
        del by_inst
        inst_s = table.instance[members]
        head = np.ones(len(inst_s), dtype=bool)
        head[1:] = inst_s[1:] != inst_s[:-1]
        del inst_s
        group = np.cumsum(head, dtype=np.int64) - 1
        node_id[members] = table.ids[members][head][group]
        del head, group
    del members
    node_ids, inverse = np.unique(node_id, return_inverse=True)
    del node_id
    node = inverse.reshape(-1).astype(dt)
    del inverse
    n_nodes = len(node_ids)
    del node_ids
    mem_pos = np.argsort(node, kind="stable").astype(dt)
    mem_ptr = np.zeros(n_nodes + 1, dtype=np.int64)
    np.cumsum(np.bincount(node, minlength=n_nodes), out=mem_ptr[1:])
    is_instance = table.instance[mem_pos[mem_ptr[:-1]]] >= 0 if n_nodes else np.zeros(0, dtype=bool)
    dst = np.repeat(node, np.diff(table.dep_ptr))  # = node[row of each dependency entry]
    src = node[table.dep_pos]
    cross = src != dst
    src, dst = src[cross], dst[cross]
    del cross
    indeg = np.bincount(dst, minlength=n_nodes).astype(np.int64)
    order = np.argsort(src, kind="stable")
    succ_ptr = np.zeros(n_nodes + 1, dtype=np.int64)
    np.cumsum(np.bincount(src, minlength=n_nodes), out=succ_ptr[1:])
    del src
    return OpGraph(node, mem_ptr, mem_pos, is_instance, indeg, succ_ptr, dst[order])
