"""Fused lowering of isolated collective calls: one task per rank, timed by the backend on the side.

``[run] reuse_isolated_collectives = "on"`` (docs/collectives.md, "Isolated-collective reuse"). Before
the lowering emits any task, :meth:`Fuser.prepare` plans one representative of every distinct call
shape (op, group, bytes, overrides, category, traffic class) on a side builder, reads the GPU pairs
its flows connect, and decides per rank group, from the routes (:mod:`hetero_ns3.plan.isolation`),
which groups have their links to themselves. Every call of such a group is then lowered by
:meth:`Fuser.emit` into

* one zero-time *start* barrier over the entry dependencies of all ranks, the previous fused call of
  the same group on all ranks, and the ranks' tails on the channel streams the call would use: the
  call starts when every rank is ready and never overlaps another call of its communicator;
* one compute task per rank, of the communicator's first stream and the call's category, lasting
  the time from the start until that rank's exit in the call's detailed plan simulated *alone* by the
  same backend (:data:`IsolatedRunner`), memoised per signature (the detailed plan's arrays and the
  links its flows may take, with rates, delays, kinds and MTUs, relative to the group).

Exact when (a) no other traffic shares the call's links (checked), (b) the ranks enter together (the
detailed ring lets early ranks start; the fused call waits for the last one), (c) the previous call
of the communicator has finished on all ranks when it starts (the detailed plan lets a call's first
channel begin while the previous call's other channels finish). Pure Python, no simulator import:
the backend comes in as the runner.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from hetero_ns3.collectives import CollectiveCall, CollectiveEnv, plan_collective
from hetero_ns3.collectives.emit import comm_stream
from hetero_ns3.collectives.types import SEND_RECV, Choice
from hetero_ns3.errors import SimulationError, field_error
from hetero_ns3.plan.builder import PlanBuilder
from hetero_ns3.plan.dag import FLOW, FUSED_LABEL_SUFFIX, ExecutionPlan
from hetero_ns3.plan.isolation import isolated_groups, pair_links, route_links

#: Values of ``[run] reuse_isolated_collectives``: ``auto`` (the default) is ``on`` for a compiled workload of
#: one job without link faults (on both backends), ``off`` elsewhere; ``shared`` fuses also the groups whose links
#: other groups use (an approximation: their calls no longer contend with other traffic; docs/collectives.md).
REUSE_MODES: tuple[str, ...] = ("auto", "off", "on", "shared")

#: The modes that fuse whatever the backend (``auto`` decides by backend and workload; ``off`` never fuses).
FORCED_REUSE_MODES: tuple[str, ...] = ("on", "shared")

#: Backends on which ``auto`` fuses: where a fused call gives the detailed plan's times (the flow level: to
#: 1e-9) or the issue-15 bar for a default (the packet level: the 128-GPU iterations within 0.5%, measured
#: +0.0095% / -0.25% (two seeds) and +0.27% (NICs behind PCIe) on h0, +0.30% on h2; docs/collectives.md).
AUTO_BACKENDS: tuple[str, ...] = ("analytic", "ns3")

#: ``runner(plan) -> finish_s`` per task: ``plan`` replayed alone on the run's backend, graph and settings.
IsolatedRunner = Callable[[ExecutionPlan], np.ndarray]

#: A call shape as the lowering keys it: (call, category, traffic class).
Shape = tuple[CollectiveCall, str, int]
#: A rank group (one communicator): (category, its GPUs).
GroupKey = tuple[str, frozenset[str]]


def check_reuse_mode(value: object, where: str = "run.reuse_isolated_collectives") -> str:
    """``value`` if it is one of :data:`REUSE_MODES`; a ScenarioError naming ``where`` otherwise."""
    if value not in REUSE_MODES:
        raise field_error(where, value, "is not a reuse mode", f"use one of {list(REUSE_MODES)}, e.g. 'on'")
    return str(value)


def _gpus(call: CollectiveCall) -> tuple[str, ...]:
    """The GPUs a call has exits on (as :func:`~hetero_ns3.collectives.planner.emit_collective`)."""
    if call.op == SEND_RECV and call.receiver not in call.group:
        return (*call.group, call.receiver)
    return call.group


def group_key(shape: Shape) -> GroupKey:
    """The rank group of a shape's calls."""
    return (shape[1], frozenset(_gpus(shape[0])))


@dataclass(frozen=True)
class _Side:
    """One shape's detailed plan, planned alone (every rank enters at t = 0)."""

    plan: ExecutionPlan
    exits: tuple[tuple[int, ...], ...]
    """Per GPU of :func:`_gpus`, its exit task ids in ``plan``."""
    choice: Choice
    pairs: tuple[tuple[str, str], ...]
    """(source, destination) names of its flows, sorted."""


@dataclass(frozen=True)
class _Fused:
    """What :meth:`Fuser.emit` needs for one shape."""

    gpus: tuple[str, ...]
    durations: tuple[float, ...]
    """Per GPU of ``gpus``: seconds from the start barrier to its exit."""
    choice: Choice
    stream: int
    group: GroupKey


_STATS = ("shapes", "groups", "isolated_groups", "shared_groups", "excluded_groups", "fused_shapes", "isolated_runs",
          "memo_hits", "fused_calls")  # fmt: skip


class Fuser:
    """Isolation decisions, isolated timings (memoised) and fused emission for one lowering.

    ``switches``: also require unshared switches (a backend with per-switch shared state). ``shared``: fuse the
    groups whose links other groups use too (``[run] reuse_isolated_collectives = "shared"``): each call is still
    timed alone, so it no longer contends with the other groups' traffic on those links. ``stats``:
    ``shapes``, ``groups``, ``isolated_groups``, ``shared_groups`` (fused although not isolated: ``shared`` only),
    ``excluded_groups`` (candidates, but uneven speeds or calls not provably ordered), ``fused_shapes``,
    ``isolated_runs``, ``memo_hits``, ``fused_calls``.
    """

    def __init__(self, env: CollectiveEnv, runner: IsolatedRunner, *, switches: bool, shared: bool = False) -> None:
        self.env = env
        self.runner = runner
        self.switches = switches
        self.shared = shared
        self._fused: dict[Shape, _Fused] = {}
        self._memo: dict[tuple, tuple[float, ...]] = {}
        self._last: dict[GroupKey, list[int]] = {}
        self.stats = dict.fromkeys(_STATS, 0)

    def prepare(self, shapes: Iterable[Shape], exclude: Iterable[GroupKey] = ()) -> None:
        """Plan each shape alone, decide isolation per rank group, time the isolated groups' shapes.

        ``exclude``: groups never fused (their calls are not provably ordered); their links still count."""
        skip = set(exclude)
        sides: dict[Shape, _Side] = {}  # candidates only: a side plan of a large DP call is big
        links_of: dict[GroupKey, set] = {}
        n_shapes = 0
        for shape in dict.fromkeys(shapes):
            n_shapes += 1
            side = self._side(shape)
            gid = group_key(shape)
            links_of.setdefault(gid, set()).update(pair_links(self.env, side.pairs))
            if gid not in skip:
                sides[shape] = side
            del side
        iso = isolated_groups(self.env, {g: frozenset(v) for g, v in links_of.items()}, switches=self.switches)
        chosen = {g for g, v in links_of.items() if v} if self.shared else iso
        self.stats.update(shapes=n_shapes, groups=len(links_of), isolated_groups=len(iso),
                          shared_groups=len(chosen - iso - skip), excluded_groups=len(skip & chosen))  # fmt: skip
        for shape, side in sides.items():
            call, category, _ = shape
            gid = group_key(shape)
            if gid not in chosen:
                continue
            stream = comm_stream(category, 0, call.group, call.op)
            self._fused[shape] = _Fused(_gpus(call), self._durations(side), side.choice, stream, gid)
        self.stats["fused_shapes"] = len(self._fused)

    def fuses(self, shape: Shape) -> bool:
        return shape in self._fused

    def _side(self, shape: Shape) -> _Side:
        call, category, priority = shape
        gpus = _gpus(call)
        b = PlanBuilder(gpus)
        res = plan_collective(b, call, self.env, None, category, priority)
        plan = b.build(copy=False)
        flows = np.flatnonzero(plan.kind == FLOW)
        names = plan.gpus
        pairs = {(names[s], names[d]) for s, d in zip(plan.gpu[flows].tolist(), plan.dst[flows].tolist(), strict=True)}
        return _Side(plan, tuple(tuple(res.exits[g]) for g in gpus), res.choice, tuple(sorted(pairs)))

    def _signature(self, side: _Side) -> tuple:
        """What the isolated time depends on, relative to the group: the plan's arrays and its routes."""
        p = side.plan
        h = hashlib.blake2b(digest_size=16)
        for arr in (p.kind, p.gpu, p.dst, p.size_bytes, p.duration_s, p.stream, p.priority, p.dep_ptr, p.dep_idx,
                    p.channel):  # fmt: skip
            h.update(np.ascontiguousarray(arr).tobytes())
        graph = self.env.graph
        rel = {g: i for i, g in enumerate(p.gpus)}
        canon: dict[int, int] = {}
        routes = []
        multipath = False
        for s, d in side.pairs:
            hops = route_links(self.env, s, d)
            multipath |= len({li for li, _ in hops}) != len(hops) or self._has_choice(s, d)
            desc = []
            for li, direction in hops:
                link = graph.links[li]
                ends = (graph.nodes[graph.index(link.a)], graph.nodes[graph.index(link.b)])
                cid = canon.setdefault(li, len(canon))
                desc.append((cid, direction, link.rate_bps, link.delay_s, link.kind, link.mtu_bytes,
                             ends[0].buffer_bytes, ends[1].buffer_bytes))  # fmt: skip
            routes.append((rel[s], rel[d], tuple(desc)))
        exact = p.gpus if multipath else ()  # an ECMP choice hashes on the names: share nothing then
        return (h.digest(), side.exits, tuple(routes), exact)

    def _has_choice(self, src: str, dst: str) -> bool:
        """Whether a route from ``src`` to ``dst`` meets a node with several next hops (an ECMP choice)."""
        graph = self.env.graph
        table = self.env.next_hop_table(graph.index(dst))
        return any(len(table[graph.index(end)]) > 1 for li, _ in route_links(self.env, src, dst)
                   for end in (graph.links[li].a, graph.links[li].b) if graph.index(end) != graph.index(dst))  # fmt: skip

    def _durations(self, side: _Side) -> tuple[float, ...]:
        sig = self._signature(side)
        got = self._memo.get(sig)
        if got is not None:
            self.stats["memo_hits"] += 1
            return got
        self.stats["isolated_runs"] += 1
        finish = np.asarray(self.runner(side.plan), dtype=np.float64)
        got = tuple(float(finish[list(ex)].max()) for ex in side.exits)
        if not all(np.isfinite(got)):
            raise SimulationError("an isolated collective did not finish on the backend")  # simulate() raises first
        self._memo[sig] = got
        return got

    def emit(
        self, builder: PlanBuilder, shape: Shape, entry: Mapping[str, Sequence[int]], name: str
    ) -> tuple[dict[str, tuple[int, ...]], Choice]:
        """Append the fused tasks of one call of ``shape``; its exit task per GPU and the choice."""
        fz = self._fused[shape]
        category = shape[1]
        ch = fz.choice
        deps: list[int] = []
        for g in fz.gpus:
            deps.extend(entry.get(g, ()))
            gi = builder.gpu_index(g)
            for s in range(fz.stream, fz.stream + max(1, ch.channels)):
                t = builder.stream_tail(gi, s)
                if t is not None:
                    deps.append(t)
        deps.extend(self._last.get(fz.group, ()))
        prefix = f"{name or shape[0].op} {ch.algo}/{ch.protocol}"
        start = builder.add_barrier(fz.gpus[0], deps, label=f"{prefix} fused start", category=category, channel=0)
        prefix += FUSED_LABEL_SUFFIX
        exits: dict[str, tuple[int, ...]] = {}
        tids = []
        for g, dur in zip(fz.gpus, fz.durations, strict=True):
            t = builder.add_compute(g, dur, [start], stream=fz.stream, label=prefix, category=category, channel=0)
            exits[g] = (t,)
            tids.append(t)
        self._last[fz.group] = tids
        self.stats["fused_calls"] += 1
        return exits, ch
