"""Replay of a Workload's DAG with compute durations and a pluggable comm-time function.

With ``comm_time = 0`` (the default) the result is the compute-only iteration time: pipeline
bubbles, stage imbalance and stragglers included, all communication free. Collective instances
start when every member op is ready and end together.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from hetero_ns3.errors import PlanningError

if TYPE_CHECKING:
    from hetero_ns3.workload.artefact import Op, Workload


def _graph(ops: list) -> tuple[list[int], list[list[int]]]:
    """(node of each op position, member positions of each node): instances merge their members."""
    node_of: list[int] = [0] * len(ops)
    inst_node: dict[int, int] = {}
    members: list[list[int]] = []
    for i, op in enumerate(ops):
        if op.instance >= 0:
            n = inst_node.get(op.instance)
            if n is None:
                n = inst_node[op.instance] = len(members)
                members.append([])
        else:
            n = len(members)
            members.append([])
        members[n].append(i)
        node_of[i] = n
    return node_of, members


def _order(ops: list) -> tuple[list[int], list[list[int]], list[int]]:
    node_of, members = _graph(ops)
    pos = {op.id: i for i, op in enumerate(ops)}
    n_nodes = len(members)
    indeg = [0] * n_nodes
    succ: list[list[int]] = [[] for _ in range(n_nodes)]
    for i, op in enumerate(ops):
        n = node_of[i]
        for d in op.deps:
            src = node_of[pos[d]]
            if src != n:
                succ[src].append(n)
                indeg[n] += 1
    ready = [n for n in range(n_nodes) if indeg[n] == 0]
    order: list[int] = []
    while ready:
        n = ready.pop()
        order.append(n)
        for m in succ[n]:
            indeg[m] -= 1
            if indeg[m] == 0:
                ready.append(m)
    if len(order) != n_nodes:
        stuck = next(n for n in range(n_nodes) if indeg[n] > 0)
        raise PlanningError(f"workload has a dependency cycle through {[ops[i].name for i in members[stuck]]}")
    return node_of, members, order


def topological_nodes(wl: Workload) -> list[list[Op]]:
    """Groups of per-rank ops (one op, or the members of a collective instance) in dependency order.

    Raises PlanningError naming a stuck op when the graph has a cycle.
    """
    ops = list(wl)
    _node_of, members, order = _order(ops)
    return [[ops[i] for i in members[n]] for n in order]


@dataclass(frozen=True)
class Timeline:
    """Start and end time (s) of every program op, by program-op id, and the iteration time."""

    start: dict[int, float]
    end: dict[int, float]
    tp: int = 1

    def op_start(self, op_id: int) -> float:
        """Start of a per-rank op (id from :class:`~hetero_ns3.workload.artefact.Op`)."""
        return self.start[op_id // self.tp]

    def op_end(self, op_id: int) -> float:
        """End of a per-rank op."""
        return self.end[op_id // self.tp]

    @property
    def iteration_time(self) -> float:
        return max(self.end.values(), default=0.0)


def replay(wl: Workload, comm_time: Callable[[Any], float] | None = None) -> Timeline:
    """Earliest-start replay of the worker programs (the tp members of a program move in lockstep).

    ``comm_time(op)`` gives a collective's duration from its program op (0 when None). Times are keyed
    by program-op id; :meth:`Timeline.rank_times` maps them to a rank's ops.
    """
    ops = [op for prog in wl.programs for op in prog.ops]
    _node_of, members, order = _order(ops)
    end_by_id: dict[int, float] = {}
    start: dict[int, float] = {}
    for n in order:
        mem = members[n]
        t0 = 0.0
        for i in mem:
            for d in ops[i].deps:
                e = end_by_id.get(d)
                if e is not None and e > t0:
                    t0 = e
        head = ops[mem[0]]
        dur = head.duration if head.kind == "compute" else (comm_time(head) if comm_time else 0.0)
        for i in mem:
            start[ops[i].id] = t0
            end_by_id[ops[i].id] = t0 + dur
    return Timeline(start, end_by_id, wl.tp)
