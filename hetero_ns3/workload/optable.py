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
    ``prog_op[i]`` for tp member ``member[i]`` on rank ``rank[i]``.
    """

    ids: np.ndarray
    """int64: op id (``program op id x tp + member``)."""
    rank: np.ndarray
    """int64: global rank executing the op."""
    member: np.ndarray
    """int64: tp index of the rank in its program."""
    prog_op: list[ProgramOp]
    """The program op each row expands."""
    instance: np.ndarray
    """int64: rank-level collective instance id; -1 for compute ops."""
    dep_ptr: np.ndarray
    """int64, len n+1: deps of row i are ``dep_pos[dep_ptr[i]:dep_ptr[i+1]]`` (CSR, ``Op.deps`` order)."""
    dep_pos: np.ndarray
    """int64: positions (rows) of the dependencies."""

    def __len__(self) -> int:
        return int(self.ids.shape[0])


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


def op_table(workload: Workload) -> OpTable:
    """The per-rank ops of ``workload`` as columns (same ids, ranks, instances and deps as ``Workload.ops``).

    Raises PlanningError for duplicate op ids or a dependency on an unknown op (naming the op).
    """
    tp = workload.tp
    owner: dict[int, tuple[int, int]] = {}  # rank -> (program index, tp index); the last program wins
    for k, prog in enumerate(workload.programs):
        for t, r in enumerate(prog.ranks):
            owner[r] = (k, t)
    cols: dict[int, _ProgramColumns] = {}
    parts: list[tuple[np.ndarray, ...]] = []
    prog_op: list[ProgramOp] = []
    for r in range(len(workload.ranks)):
        if r not in owner:
            continue
        k, t = owner[r]
        c = cols.get(k)
        if c is None:
            c = cols[k] = _program_columns(workload.programs[k])
        n = len(c.ids)
        inst = np.where(c.instance >= 0, c.instance * tp + np.where(c.per_member, t, 0), -1)
        parts.append((c.ids * tp + t, np.full(n, r, dtype=np.int64), np.full(n, t, dtype=np.int64), inst,
                      c.dep_count, c.dep_ids * tp + t))  # fmt: skip
        prog_op.extend(workload.programs[k].ops)
    if parts:
        ids, rank, member, instance, dep_count, dep_ids = (np.concatenate(col) for col in zip(*parts, strict=True))
    else:
        ids = rank = member = instance = dep_count = dep_ids = np.zeros(0, dtype=np.int64)
    dep_ptr = np.zeros(len(ids) + 1, dtype=np.int64)
    np.cumsum(dep_count, out=dep_ptr[1:])
    dep_pos, found = _positions_of(ids, dep_ids)
    if not found.all():
        bad = int(np.flatnonzero(~found)[0])
        i = int(np.searchsorted(dep_ptr, bad, side="right") - 1)
        raise PlanningError(f"op {int(ids[i])} ({prog_op[i].name}) depends on unknown op {int(dep_ids[bad])}")
    return OpTable(ids, rank, member, prog_op, instance, dep_ptr, dep_pos)


@dataclass(frozen=True)
class OpGraph:
    """Nodes (compute ops and collective instances, all members as one node) and their edges.

    Nodes are numbered 0.. in increasing order of their *node id*, the smallest op id among their ops,
    so the smallest node index is also the smallest node id.
    """

    node: np.ndarray
    """int64 per position: its node."""
    mem_ptr: np.ndarray
    """int64, len n_nodes+1: the ops of node j are ``mem_pos[mem_ptr[j]:mem_ptr[j+1]]``."""
    mem_pos: np.ndarray
    """int64: member positions, node after node, each node's in position order."""
    is_instance: np.ndarray
    """bool per node: a collective instance (else a single op)."""
    indeg: np.ndarray
    """int64 per node: dependency edges into it (one per dependency of one of its ops on another node)."""
    succ_ptr: np.ndarray
    """int64, len n_nodes+1: CSR of successors (one entry per edge)."""
    succ: np.ndarray
    """int64: successor nodes."""

    @property
    def n_nodes(self) -> int:
        return int(self.indeg.shape[0])


def op_graph(table: OpTable) -> OpGraph:
    """The node graph of ``table`` (numpy, linear up to sorts)."""
    n = len(table)
    node_id = table.ids.copy()
    members = np.flatnonzero(table.instance >= 0)
    if members.size:
        inst = table.instance[members]
        by_inst = np.lexsort((table.ids[members], inst))  # per instance, smallest id first
        inst_s = inst[by_inst]
        head = np.ones(len(inst_s), dtype=bool)
        head[1:] = inst_s[1:] != inst_s[:-1]
        group = np.cumsum(head) - 1
        node_id[members[by_inst]] = table.ids[members[by_inst]][head][group]
    node_ids, node = np.unique(node_id, return_inverse=True)
    node = node.reshape(-1).astype(np.int64)
    n_nodes = len(node_ids)
    mem_pos = np.argsort(node, kind="stable").astype(np.int64)
    mem_ptr = np.zeros(n_nodes + 1, dtype=np.int64)
    np.cumsum(np.bincount(node, minlength=n_nodes), out=mem_ptr[1:])
    is_instance = table.instance[mem_pos[mem_ptr[:-1]]] >= 0 if n_nodes else np.zeros(0, dtype=bool)
    dst = node[np.repeat(np.arange(n, dtype=np.int64), np.diff(table.dep_ptr))]
    src = node[table.dep_pos]
    cross = src != dst
    src, dst = src[cross], dst[cross]
    indeg = np.bincount(dst, minlength=n_nodes).astype(np.int64)
    order = np.argsort(src, kind="stable")
    succ_ptr = np.zeros(n_nodes + 1, dtype=np.int64)
    np.cumsum(np.bincount(src, minlength=n_nodes), out=succ_ptr[1:])
    return OpGraph(node, mem_ptr, mem_pos, is_instance, indeg, succ_ptr, dst[order])
