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
        stream: ``compute`` (kernels and blocking TP/EP collectives) or ``comm`` (overlapped).
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


@dataclass(frozen=True)
class Workload:
    """One training iteration compiled to per-rank ops.

    Attributes:
        ranks: placement of every global rank (``ranks[r]`` is rank r).
        ops: ``ops[r]`` = rank r's ops in program order.
        meta: model, plan and partition facts (JSON-ready).
    """

    ranks: tuple[RankSlot, ...]
    ops: tuple[tuple[Op, ...], ...]
    meta: Mapping[str, Any]

    def __iter__(self) -> Iterator[Op]:
        for rank_ops in self.ops:
            yield from rank_ops

    @property
    def n_ops(self) -> int:
        return sum(len(r) for r in self.ops)

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
            if len({self.ranks[m.rank].gpu for m in members}) != len(members):
                raise PlanningError(f"instance {inst} ({head.name}) has two ops on one GPU")
        from hetero_ns3.workload.timing import topological_nodes

        topological_nodes(self)  # raises on cycles

    def to_records(self) -> list[dict[str, Any]]:
        """Every op as a plain dict (``group`` and ``deps`` as lists), plus its GPU name."""
        out = []
        for op in self:
            d = asdict(op)
            d["deps"] = list(op.deps)
            d["group"] = list(op.group)
            d["gpu"] = self.ranks[op.rank].gpu
            out.append(d)
        return out

    def to_dataframe(self) -> Any:
        """A pandas DataFrame with one row per op (columns of :class:`Op` plus ``gpu``)."""
        import pandas as pd

        return pd.DataFrame.from_records(self.to_records(), columns=[*OP_COLUMNS, "gpu"])

    def to_json(self, path: str | Path) -> None:
        """Write ``{"meta", "ranks", "ops"}`` as JSON (ops as records)."""
        doc = {"meta": dict(self.meta), "ranks": [asdict(s) for s in self.ranks], "ops": self.to_records()}
        Path(path).write_text(json.dumps(doc, separators=(",", ":")))

    @staticmethod
    def from_json(path: str | Path) -> Workload:
        """Read a workload written by :meth:`to_json`."""
        doc = json.loads(Path(path).read_text())
        ranks = tuple(RankSlot(**s) for s in doc["ranks"])
        per_rank: list[list[Op]] = [[] for _ in ranks]
        for rec in doc["ops"]:
            rec = {k: v for k, v in rec.items() if k in OP_COLUMNS}
            rec["deps"] = tuple(rec["deps"])
            rec["group"] = tuple(rec["group"])
            per_rank[rec["rank"]].append(Op(**rec))
        return Workload(ranks, tuple(tuple(r) for r in per_rank), doc["meta"])
