"""The Workload artefact: per-rank ordered ops with dependencies (input of the collective planner).

Semantics (see docs/workload.md):

* ``ops[r]`` lists rank r's ops in program order. Ids are unique integers, stable for a given
  scenario (generation is deterministic).
* ``deps`` are complete: an op may start when every op in ``deps`` has finished. Same-rank chains on
  the compute stream are explicit deps; nothing is implied by list order or stream.
* A comm op is one member's part of a collective **instance**: all ops with the same ``instance`` id
  form one NCCL call (one op per group member; both ends of a send/recv pair). The instance starts
  when every member op is ready and finishes for all members together.
* ``bytes`` of a comm op is NCCL's ``size`` of the call (nccl-tests convention): all_reduce and
  broadcast = buffer bytes; all_gather = output bytes; reduce_scatter = input bytes; all_to_all =
  send-buffer bytes of one rank; send/recv = message bytes.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from dataclasses import asdict, dataclass, fields
from pathlib import Path
from typing import Any, Literal

from hetero_ns3.errors import PlanningError
from hetero_ns3.workload.placement import RankSlot

COLLECTIVES = ("all_reduce", "reduce_scatter", "all_gather", "all_to_all", "send", "recv", "broadcast")


@dataclass(frozen=True, slots=True)
class Op:
    """One op of one rank.

    Attributes:
        id: unique, stable integer id.
        rank: global rank executing the op.
        kind: ``compute`` or ``comm``.
        name: label, e.g. ``"F3.c0.L12.attn"`` or ``"dp.rs.b2"``.
        stream: ``compute`` (kernels and blocking TP/EP collectives) or ``comm`` (overlapped collectives, and under
            expert-parallel overlap the kernels of an exchange, on its dimension's communicator stream).
        deps: ids of the ops that must finish first (complete list).
        phase: ``F`` forward, ``B`` backward (recomputation included), ``opt`` optimizer and
            gradient synchronization.
        microbatch: microbatch index (-1 outside forward/backward).
        chunk: model chunk (virtual stage index on the rank; -1 outside).
        flops: FLOPs the op executes on this rank (compute).
        bytes: HBM bytes moved (compute) or NCCL ``size`` (comm).
        duration: seconds on this rank's GPU (compute); 0 for comm (the network decides).
        collective: all_reduce, reduce_scatter, all_gather, all_to_all, send, recv or broadcast.
        group: GPU names of the instance's members in group-rank order ((src, dst) for send/recv).
        dim: parallel dimension of the traffic: tp, pp, dp or ep.
        instance: id shared by the member ops of one collective call (-1 for compute).
    """

    id: int
    rank: int
    kind: Literal["compute", "comm"]
    name: str
    stream: Literal["compute", "comm"]
    deps: tuple[int, ...]
    phase: str = ""
    microbatch: int = -1
    chunk: int = -1
    flops: float = 0.0
    bytes: float = 0.0
    duration: float = 0.0
    collective: str = ""
    group: tuple[str, ...] = ()
    dim: str = ""
    instance: int = -1


OP_COLUMNS: tuple[str, ...] = tuple(f.name for f in fields(Op))


@dataclass(frozen=True, slots=True)
class ProgramOp:
    """One op of a worker program, executed by each of the worker's tp ranks in lockstep.

    Same fields as :class:`Op` except: ``id`` and ``deps`` are program-level ids, ``groups`` holds
    either one group shared by all members (a TP collective: a single instance) or one group per tp
    index (pipeline, data-parallel, expert-parallel and tied-embedding traffic: one instance per tp
    index, linking the same tp index of other workers).
    """

    id: int
    kind: Literal["compute", "comm"]
    name: str
    stream: Literal["compute", "comm"]
    deps: tuple[int, ...]
    phase: str = ""
    microbatch: int = -1
    chunk: int = -1
    flops: float = 0.0
    bytes: float = 0.0
    duration: float = 0.0
    collective: str = ""
    dim: str = ""
    instance: int = -1
    groups: tuple[tuple[str, ...], ...] = ()
    host: float = 0.0
    """Seconds the rank's host thread takes to issue this op; 0 when the host is not modelled
    (:mod:`hetero_ns3.workload.host`)."""
    host_sync: bool = False
    """The host waits for this op to finish on the GPU before it issues the next op (a device-to-host
    synchronisation, e.g. a dropless MoE dispatcher's)."""
    host_wait: bool = False
    """Before it issues this op the host waits for the op's dependencies to finish on the GPU (a synchronisation
    inside the call, e.g. the MoE dispatch's under expert-parallel overlap, where the host has issued other work
    since the step it waits for)."""

    @property
    def per_member(self) -> bool:
        """True when every tp index has its own group and instance."""
        return len(self.groups) > 1


@dataclass(frozen=True)
class Program:
    """The op sequence shared by the ``tp`` ranks of one pipeline stage of one replica.

    Attributes:
        stage, replica: pipeline stage and data-parallel replica.
        ranks: global ranks of the members, in tp order.
        gpu_type: their GPU type (a TP group never mixes types).
        ops: program order.
    """

    stage: int
    replica: int
    ranks: tuple[int, ...]
    gpu_type: str
    ops: tuple[ProgramOp, ...]


def expand_op(p: ProgramOp, rank: int, t: int, tp: int) -> Op:
    """The per-rank Op of member ``t`` (tp index) of program op ``p``.

    Rank-level ids: ``id x tp + t`` (deps alike); instances: ``instance x tp`` for a shared TP
    collective, ``instance x tp + t`` for per-member traffic; group: ``groups[t]`` or ``groups[0]``.
    """
    inst = -1
    group: tuple[str, ...] = ()
    if p.instance >= 0:
        per = len(p.groups) > 1
        inst = p.instance * tp + (t if per else 0)
        group = p.groups[t] if per else p.groups[0]
    return Op(
        p.id * tp + t,
        rank,
        p.kind,
        p.name,
        p.stream,
        tuple(d * tp + t for d in p.deps),
        p.phase,
        p.microbatch,
        p.chunk,
        p.flops,
        p.bytes,
        p.duration,
        p.collective,
        group,
        p.dim,
        inst,
    )


class Workload:
    """One training iteration compiled to worker programs, viewable as per-rank ops.

    Attributes:
        ranks: placement of every global rank (``ranks[r]`` is rank r).
        programs: one :class:`Program` per (stage, replica) worker — the compact form.
        tp: tensor-parallel size (members per program).
        meta: model, plan and partition facts (JSON-ready).

    ``ops[r]`` (rank r's :class:`Op` tuple, program order) is expanded from the programs on first use.
    """

    def __init__(
        self, ranks: tuple[RankSlot, ...], programs: tuple[Program, ...], tp: int, meta: Mapping[str, Any]
    ) -> None:
        self.ranks = ranks
        self.programs = programs
        self.tp = tp
        self.meta = dict(meta)
        self._ops: tuple[tuple[Op, ...], ...] | None = None

    @property
    def ops(self) -> tuple[tuple[Op, ...], ...]:
        """Per-rank ops (expanded once, then cached)."""
        if self._ops is None:
            per: list[tuple[Op, ...]] = [()] * len(self.ranks)
            for prog in self.programs:
                for t, r in enumerate(prog.ranks):
                    per[r] = tuple(expand_op(p, r, t, self.tp) for p in prog.ops)
            self._ops = tuple(per)
        return self._ops

    def rank_ops(self, rank: int) -> tuple[Op, ...]:
        """Ops of one rank, expanded without materializing the others."""
        if self._ops is not None:
            return self._ops[rank]
        for prog in self.programs:
            if rank in prog.ranks:
                t = prog.ranks.index(rank)
                return tuple(expand_op(p, rank, t, self.tp) for p in prog.ops)
        raise PlanningError(f"rank {rank} runs no program")

    def __iter__(self) -> Iterator[Op]:
        for rank_ops in self.ops:
            yield from rank_ops

    @property
    def n_ops(self) -> int:
        """Per-rank ops in total."""
        return sum(len(p.ops) * len(p.ranks) for p in self.programs)

    @property
    def n_program_ops(self) -> int:
        """Ops of the compact form (one per worker op)."""
        return sum(len(p.ops) for p in self.programs)

    @property
    def flops(self) -> float:
        """FLOPs all ranks execute."""
        return sum(op.flops * len(p.ranks) for p in self.programs for op in p.ops)

    def op_index(self) -> dict[int, Op]:
        """id -> Op for every op."""
        return {op.id: op for op in self}

    def instances(self) -> dict[int, tuple[Op, ...]]:
        """instance id -> the member ops of that collective call."""
        out: dict[int, list[Op]] = {}
        for op in self:
            if op.instance >= 0:
                out.setdefault(op.instance, []).append(op)
        return {k: tuple(v) for k, v in out.items()}

    def check(self) -> None:
        """Self-check: unique ids, known deps, consistent instances, acyclic. Raises PlanningError."""
        idx = self.op_index()
        if len(idx) != self.n_ops:
            raise PlanningError("workload has duplicate op ids")
        for op in self:
            missing = [d for d in op.deps if d not in idx]
            if missing:
                raise PlanningError(f"op {op.id} ({op.name}) depends on unknown ops {missing}")
        for inst, members in self.instances().items():
            head = members[0]
            if head.collective in ("send", "recv"):
                if sorted(m.collective for m in members) != ["recv", "send"]:
                    raise PlanningError(f"p2p instance {inst} is not one send + one recv: {[m.name for m in members]}")
            elif len(members) != len(head.group):
                raise PlanningError(f"instance {inst} ({head.name}) has {len(members)} members for group {head.group}")
            if len({(m.bytes, m.group, m.dim) for m in members}) != 1:
                raise PlanningError(f"instance {inst} ({head.name}) members disagree on bytes/group/dim")
            gpus = sorted(self.ranks[m.rank].gpu for m in members)
            if gpus != sorted(head.group):
                raise PlanningError(f"instance {inst} ({head.name}) runs on {gpus}, not its group {head.group}")
        from hetero_ns3.workload.timing import topological_nodes

        topological_nodes(self)  # raises on cycles

    def to_records(self) -> list[dict[str, Any]]:
        """Every per-rank op as a plain dict (``group`` and ``deps`` as lists), plus its GPU name."""
        out = []
        for op in self:
            d = asdict(op)
            d["deps"] = list(op.deps)
            d["group"] = list(op.group)
            d["gpu"] = self.ranks[op.rank].gpu
            out.append(d)
        return out

    def to_dataframe(self) -> Any:
        """A pandas DataFrame with one row per per-rank op (columns of :class:`Op` plus ``gpu``)."""
        import pandas as pd

        return pd.DataFrame.from_records(self.to_records(), columns=[*OP_COLUMNS, "gpu"])

    def programs_dataframe(self) -> Any:
        """A pandas DataFrame with one row per program op (compact form): stage, replica, ranks, op fields."""
        import pandas as pd

        rows = []
        for p in self.programs:
            ranks = " ".join(map(str, p.ranks))
            for op in p.ops:
                d = asdict(op)
                d["deps"] = " ".join(map(str, op.deps))
                d["groups"] = "|".join(" ".join(g) for g in op.groups)
                rows.append({"stage": p.stage, "replica": p.replica, "ranks": ranks, "gpu_type": p.gpu_type, **d})
        return pd.DataFrame.from_records(rows)

    def to_json(self, path: str | Path) -> None:
        """Write the compact form: ``{"format", "meta", "tp", "ranks", "programs"}`` (see docs/workload.md)."""
        progs = []
        for p in self.programs:
            ops = []
            for op in p.ops:
                d = asdict(op)
                d["deps"] = list(op.deps)
                d["groups"] = [list(g) for g in op.groups]
                ops.append(d)
            progs.append(
                {"stage": p.stage, "replica": p.replica, "ranks": list(p.ranks), "gpu_type": p.gpu_type, "ops": ops}
            )
        doc = {
            "format": "hetero_ns3.workload/1",
            "meta": self.meta,
            "tp": self.tp,
            "ranks": [asdict(s) for s in self.ranks],
            "programs": progs,
        }
        Path(path).write_text(json.dumps(doc, separators=(",", ":")))

    @staticmethod
    def from_json(path: str | Path) -> Workload:
        """Read a workload written by :meth:`to_json`."""
        doc = json.loads(Path(path).read_text())
        ranks = tuple(RankSlot(**s) for s in doc["ranks"])
        programs = []
        for p in doc["programs"]:
            ops = []
            for d in p["ops"]:
                d = dict(d)
                d["deps"] = tuple(d["deps"])
                d["groups"] = tuple(tuple(g) for g in d["groups"])
                ops.append(ProgramOp(**d))
            programs.append(Program(p["stage"], p["replica"], tuple(p["ranks"]), p["gpu_type"], tuple(ops)))
        return Workload(ranks, tuple(programs), int(doc["tp"]), doc["meta"])
