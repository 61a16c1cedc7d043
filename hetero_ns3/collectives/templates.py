"""Template reuse for repeated collective calls: record one call's tasks, replay them for the next.

A training iteration issues the same collective call (same op, group, size, overrides, category and
priority) hundreds of times: the tensor-parallel all-gathers and reduce-scatters of every layer and
microbatch, the pipeline sends of every microbatch. Their tasks differ only in task ids, labels (the
call's name) and the dependencies that come from outside the call. :class:`CallTemplates` emits the
first call of a shape normally and records it as a :class:`~hetero_ns3.plan.builder.BlockTemplate`
(:meth:`~hetero_ns3.plan.builder.PlanBuilder.capture`, which checks task by task that a replay is exact) and
appends every later call with :meth:`~hetero_ns3.plan.builder.PlanBuilder.replay` (array copies with a task-id
offset). Shapes are keyed on the exact group (GPU names), so GPU indices never need remapping.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from hetero_ns3.collectives.env import CollectiveEnv
from hetero_ns3.collectives.planner import emit_collective
from hetero_ns3.collectives.types import Choice, CollectiveCall, CollectiveResult
from hetero_ns3.errors import PlanningError
from hetero_ns3.plan.builder import BlockTemplate, PlanBuilder

_NOT_REUSABLE = 1


@dataclass(frozen=True)
class _Recorded:
    block: BlockTemplate
    choice: Choice
    exits: tuple[tuple[str, tuple[int, ...]], ...]
    """Per GPU, the exit task ids relative to the block's first task."""
    single_exits: tuple[tuple[str, int], ...] | None
    """``exits`` when every GPU has one exit task (the usual case), else None."""


class CallTemplates:
    """Per-shape templates of collective calls for one :class:`PlanBuilder` and one :class:`CollectiveEnv`.

    Pass the same instance to every :func:`~hetero_ns3.collectives.plan_collective` call of a builder.
    ``stats`` counts calls ``emitted``, ``recorded`` and ``replayed``.
    """

    def __init__(self) -> None:
        self._shapes: dict[tuple, int | _Recorded] = {}  # _Recorded, or _NOT_REUSABLE
        self._owner: tuple[PlanBuilder, CollectiveEnv] | None = None
        self.stats = {"emitted": 0, "recorded": 0, "replayed": 0}

    def plan(
        self,
        builder: PlanBuilder,
        call: CollectiveCall,
        env: CollectiveEnv,
        entry_deps: Mapping[str, Sequence[int]] | None,
        category: str,
        priority: int,
        name: str | None = None,
    ) -> CollectiveResult:
        """Same contract as :func:`~hetero_ns3.collectives.plan_collective` (identical tasks).

        ``name`` (not None) stands for ``call.name``: the caller may then pass one shared ``call`` for
        every call of a shape and skip building (and validating) a named call per call. Identical to
        passing ``dataclasses.replace(call, name=name)``.
        """
        if self._owner is None:
            self._owner = (builder, env)
        elif self._owner[0] is not builder or self._owner[1] is not env:
            raise PlanningError("CallTemplates: one instance serves one PlanBuilder and one CollectiveEnv")
        key = (call.op, call.group, call.size_bytes, call.algo, call.protocol, call.channels, call.root,
               call.peer, call.pair_bytes, category, priority)  # fmt: skip
        state = self._shapes.get(key)
        deps = entry_deps or {}
        if isinstance(state, _Recorded):
            self.stats["replayed"] += 1
            off = builder.replay(state.block, call.label if name is None else (name or call.op), deps)
            exits: dict[str, tuple[int, ...]]
            if state.single_exits is not None:
                exits = {g: (off + r,) for g, r in state.single_exits}
            else:
                exits = {g: tuple(off + r for r in rel) for g, rel in state.exits}
            return CollectiveResult(exits=exits, choice=state.choice, first_task=off, end_task=off + state.block.n)
        if name is not None and name != call.name:
            call = dataclasses.replace(call, name=name)
        if state == _NOT_REUSABLE:
            self.stats["emitted"] += 1
            return emit_collective(builder, call, env, entry_deps, category, priority)[0]
        self.stats["recorded"] += 1
        tails = builder.stream_tails()
        res, em = emit_collective(builder, call, env, entry_deps, category, priority)
        self._shapes[key] = self._record(builder, call, res, em.entry_tasks(), deps, tails)
        return res

    @staticmethod
    def _record(
        builder: PlanBuilder,
        call: CollectiveCall,
        res: CollectiveResult,
        entries: Mapping[str, int],
        entry_deps: Mapping[str, Sequence[int]],
        tails: Mapping[tuple[int, int], int],
    ) -> _Recorded | int:
        first = res.first_task
        exits = tuple((g, tuple(t - first for t in ids)) for g, ids in res.exits.items())
        if any(not 0 <= r < res.end_task - first for _, rel in exits for r in rel):
            return _NOT_REUSABLE
        entry_of = {tid: g for g, tid in entries.items()}
        block = builder.capture(first, tails, entry_of, entry_deps, call.label)
        if block is None or block.n != res.end_task - first:
            return _NOT_REUSABLE
        single = tuple((g, rel[0]) for g, rel in exits) if all(len(rel) == 1 for _, rel in exits) else None
        return _Recorded(block, res.choice, exits, single)
