"""``plan_collective``: one collective call -> tasks in a PlanBuilder (the public entry point)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

from hetero_ns3.collectives.emit import Emitter
from hetero_ns3.collectives.env import CollectiveEnv
from hetero_ns3.collectives.registry import get_algorithm
from hetero_ns3.collectives.select import choose
from hetero_ns3.collectives.types import SEND_RECV, CollectiveCall, CollectiveResult
from hetero_ns3.plan.builder import PlanBuilder

if TYPE_CHECKING:
    from hetero_ns3.collectives.templates import CallTemplates


def plan_collective(
    builder: PlanBuilder,
    call: CollectiveCall,
    env: CollectiveEnv,
    entry_deps: Mapping[str, Sequence[int]] | None = None,
    category: str = "comm",
    priority: int = 0,
    templates: CallTemplates | None = None,
) -> CollectiveResult:
    """Append the tasks of ``call`` to ``builder`` and return per-GPU exits and the choice made.

    ``entry_deps[g]`` are task ids that must finish before GPU ``g`` joins the call. Every GPU of the
    call gets one entry compute task (base latency, the first stream of its category, ``emit.comm_stream``) and one exit barrier;
    later work on ``g`` should depend on ``result.exits[g]``. ``category`` labels every task (e.g.
    ``dp``), ``priority`` is the flows' traffic class (0..7). Raises PlanningError for calls the
    chosen algorithm cannot run and ScenarioError for unknown names.

    ``templates`` (one :class:`~hetero_ns3.collectives.templates.CallTemplates` per builder and env)
    replays repeated calls of the same shape from a recorded block of tasks instead of emitting them
    again; the tasks are identical either way (see docs/collectives.md, "Lowering speed").
    """
    if templates is not None:
        return templates.plan(builder, call, env, entry_deps, category, priority)
    return emit_collective(builder, call, env, entry_deps, category, priority)[0]


def emit_collective(
    builder: PlanBuilder,
    call: CollectiveCall,
    env: CollectiveEnv,
    entry_deps: Mapping[str, Sequence[int]] | None,
    category: str,
    priority: int,
) -> tuple[CollectiveResult, Emitter]:
    """:func:`plan_collective` without templates; also returns the emitter (its entry tasks)."""
    gpus = call.group
    if call.op == SEND_RECV and call.receiver not in gpus:
        gpus = (*gpus, call.receiver)
    for g in gpus:
        env.check_gpu(g)
    choice = choose(call, env)
    algo = get_algorithm(choice.algo)
    first = len(builder)
    em = Emitter(
        builder,
        call,
        env,
        choice.algo,
        choice.protocol,
        choice.channels,
        entry_deps,
        category,
        priority,
        # NCCL's base latency (NVLS: baseLat 0) plus the launch cost every call pays
        env.tuning.base_latency_s.get(algo.family, {}).get(choice.protocol, 0.0) + env.tuning.launch_s,
    )
    n = 2 if call.op == SEND_RECV else len(call.group)
    if n >= 2 and call.size_bytes > 0:
        algo.plan(em)
    exits = em.finish(gpus)
    return CollectiveResult(exits=exits, choice=choice, first_task=first, end_task=len(builder)), em
