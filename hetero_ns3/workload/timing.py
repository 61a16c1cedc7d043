"""Replay of a Workload's DAG with compute durations and a pluggable comm-time function.

With ``comm_time = 0`` (the default) the result is the compute-only iteration time: pipeline
bubbles, stage imbalance and stragglers included, all communication free. Collective instances
start when every member op is ready and end together.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from hetero_ns3.errors import PlanningError

if TYPE_CHECKING:
    from hetero_ns3.workload.artefact import Op, Workload


def _node_of(op: Op) -> tuple[str, int]:
    return ("i", op.instance) if op.instance >= 0 else ("o", op.id)


def topological_nodes(wl: Workload) -> list[tuple[tuple[str, int], list[Op]]]:
    """Nodes (an op, or a collective instance with its member ops) in a dependency-respecting order.

    Raises PlanningError naming a stuck op when the graph has a cycle.
    """
    members: dict[tuple[str, int], list[Op]] = {}
    node_of: dict[int, tuple[str, int]] = {}
    for op in wl:
        n = _node_of(op)
        members.setdefault(n, []).append(op)
        node_of[op.id] = n
    indeg: dict[tuple[str, int], int] = dict.fromkeys(members, 0)
    succ: dict[tuple[str, int], list[tuple[str, int]]] = {n: [] for n in members}
    for n, ops in members.items():
        for op in ops:
            for d in op.deps:
                src = node_of[d]
                if src == n:
                    continue
                succ[src].append(n)
                indeg[n] += 1
    order = []
    ready = [n for n, k in indeg.items() if k == 0]
    while ready:
        n = ready.pop()
        order.append((n, members[n]))
        for m in succ[n]:
            indeg[m] -= 1
            if indeg[m] == 0:
                ready.append(m)
    if len(order) != len(members):
        stuck = next(n for n, k in indeg.items() if k > 0)
        raise PlanningError(f"workload has a dependency cycle through {[o.name for o in members[stuck]]}")
    return order


@dataclass(frozen=True)
class Timeline:
    """Start and end time (s) of every op, by id, and the iteration time."""

    start: dict[int, float]
    end: dict[int, float]

    @property
    def iteration_time(self) -> float:
        return max(self.end.values(), default=0.0)


def replay(wl: Workload, comm_time: Callable[[Op], float] | None = None) -> Timeline:
    """Earliest-start replay; ``comm_time(op)`` gives an instance's duration (0 when None)."""
    start: dict[int, float] = {}
    end: dict[int, float] = {}
    for _node, ops in topological_nodes(wl):
        t0 = 0.0
        for op in ops:
            for d in op.deps:
                if d in end:
                    t0 = max(t0, end[d])
        dur = ops[0].duration if ops[0].kind == "compute" else (comm_time(ops[0]) if comm_time else 0.0)
        for op in ops:
            start[op.id] = t0
            end[op.id] = t0 + dur
    return Timeline(start, end)
