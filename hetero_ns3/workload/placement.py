"""Rank placement: which GPU runs which (tp, pp, dp) coordinate.

Ranks are numbered with the dims of ``order`` fastest-varying first; the default ``tp-pp-dp`` puts a
TP group on consecutive GPUs of one node, then pipeline stages, then replicas. GPUs are taken in
(node, local_index) order. Expert parallelism is carved out of dp: replica ``d`` has ep index
``d mod ep`` and expert-data-parallel index ``d // ep``. With MoE parallel folding (``etp = 1``) it is carved out of
the tp x dp ranks of a stage instead, numbered ``l = t + tp x d`` (tp fastest, then dp: Megatron-Core's expert rank
order with an expert tensor-parallel size of 1): rank ``l`` has ep index ``l mod ep`` and expert-data-parallel index
``l // ep``; an expert-parallel group then holds whole TP groups of ``ep / tp`` consecutive replicas. Context parallelism likewise: data-parallel rank
``d`` has cp index ``d mod cp`` in the context-parallel group of ranks ``cp x (d // cp) ...`` (Megatron-Core's
``tp-cp-ep-dp-pp`` order puts CP ranks next to the TP ranks; here with ``order = "tp-dp-pp"``).
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

from hetero_ns3.errors import PlanningError, ScenarioError
from hetero_ns3.workload.parallel import validate_order

log = logging.getLogger(__name__)


class GpuLike(Protocol):
    """What placement needs of a cluster GPU (``hetero_ns3.topology`` GpuInfo satisfies it)."""

    @property
    def name(self) -> str: ...
    @property
    def node(self) -> int: ...
    @property
    def local_index(self) -> int: ...
    @property
    def gpu_type(self) -> str: ...
    @property
    def group(self) -> str: ...


@dataclass(frozen=True, slots=True)
class RankSlot:
    """One global rank: its coordinates and its GPU.

    Attributes:
        rank: global rank.
        tp, pp, dp: coordinates (pp = pipeline stage, dp = replica).
        gpu: GPU name (e.g. ``"n3.g5"``).
        gpu_type: catalog GPU type.
        node: global node index.
        group: node group name.
    """

    rank: int
    tp: int
    pp: int
    dp: int
    gpu: str
    gpu_type: str
    node: int
    group: str


@dataclass(frozen=True)
class Placement:
    """All ranks of a job; ``slots[r]`` is rank r."""

    tp: int
    pp: int
    dp: int
    ep: int
    order: tuple[str, ...]
    slots: tuple[RankSlot, ...]
    cp: int = 1
    etp: int = 0
    """Expert tensor-parallel size: 1 folds expert parallelism over tp x dp; 0 (or tp): the experts split like the
    attention and ep is carved out of dp."""

    @property
    def folded(self) -> bool:
        """Whether expert parallelism is folded over tp x dp (``etp = 1`` with tp > 1)."""
        return self.etp == 1 and self.tp > 1

    @property
    def ep_replicas(self) -> int:
        """Data-parallel replicas an expert-parallel group spans (``ep``; ``ep / tp`` when folded)."""
        return self.ep // self.tp if self.folded else self.ep

    @property
    def edp(self) -> int:
        """Expert-data-parallel size: ranks holding the same experts (``dp / ep``; ``tp x dp / ep`` when folded)."""
        return max(1, (self.tp * self.dp if self.folded else self.dp) // self.ep)

    def _folded_slot(self, pp: int, local: int) -> RankSlot:
        return self.slot(local % self.tp, pp, local // self.tp)

    def rank(self, tp: int, pp: int, dp: int) -> int:
        """Global rank of coordinate (tp, pp, dp)."""
        coord = {"tp": tp, "pp": pp, "dp": dp}
        size = {"tp": self.tp, "pp": self.pp, "dp": self.dp}
        r, mult = 0, 1
        for d in self.order:
            r += coord[d] * mult
            mult *= size[d]
        return r

    def slot(self, tp: int, pp: int, dp: int) -> RankSlot:
        return self.slots[self.rank(tp, pp, dp)]

    def tp_group(self, pp: int, dp: int) -> tuple[RankSlot, ...]:
        return tuple(self.slot(t, pp, dp) for t in range(self.tp))

    def dp_group(self, tp: int, pp: int) -> tuple[RankSlot, ...]:
        return tuple(self.slot(tp, pp, d) for d in range(self.dp))

    def ep_group(self, tp: int, pp: int, dp: int) -> tuple[RankSlot, ...]:
        """Ranks exchanging tokens with (tp, pp, dp) in MoE all-to-alls."""
        if self.folded:
            base = (tp + self.tp * dp) // self.ep * self.ep
            return tuple(self._folded_slot(pp, base + e) for e in range(self.ep))
        base = (dp // self.ep) * self.ep
        return tuple(self.slot(tp, pp, base + e) for e in range(self.ep))

    def cp_group(self, tp: int, pp: int, dp: int) -> tuple[RankSlot, ...]:
        """Ranks splitting the sequences of (tp, pp, dp)'s microbatches: its context-parallel ring, in ring order."""
        base = (dp // self.cp) * self.cp
        return tuple(self.slot(tp, pp, base + c) for c in range(self.cp))

    def edp_group(self, tp: int, pp: int, dp: int) -> tuple[RankSlot, ...]:
        """Ranks holding the same experts as (tp, pp, dp): the expert-data-parallel group."""
        if self.folded:
            e = (tp + self.tp * dp) % self.ep
            return tuple(self._folded_slot(pp, x) for x in range(e, self.tp * self.dp, self.ep))
        e = dp % self.ep
        return tuple(self.slot(tp, pp, d) for d in range(e, self.dp, self.ep))


def place(
    gpus: Sequence[GpuLike],
    tp: int,
    pp: int,
    dp: int,
    ep: int = 1,
    order: str = "tp-pp-dp",
    cp: int = 1,
    etp: int | None = None,
) -> Placement:
    """Map tp x pp x dp ranks onto ``gpus`` (sorted by node, local_index).

    Raises ScenarioError if the counts do not match, PlanningError if a TP group mixes GPU types.
    """
    dims = validate_order(order)
    if tp * pp * dp != len(gpus):
        raise ScenarioError(f"tp x pp x dp ({tp} x {pp} x {dp} = {tp * pp * dp}) does not match {len(gpus)} GPUs")
    ordered = sorted(gpus, key=lambda g: (g.node, g.local_index))
    size = {"tp": tp, "pp": pp, "dp": dp}
    slots = []
    for r, g in enumerate(ordered):
        coord, rest = {}, r
        for dim in dims:
            coord[dim] = rest % size[dim]
            rest //= size[dim]
        slots.append(RankSlot(r, coord["tp"], coord["pp"], coord["dp"], g.name, g.gpu_type, g.node, g.group))
    pl = Placement(tp, pp, dp, ep, dims, tuple(slots), cp, tp if etp is None else etp)
    for s in range(pp):
        for d in range(dp):
            grp = pl.tp_group(s, d)
            types = sorted({x.gpu_type for x in grp})
            if len(types) > 1:
                raise PlanningError(
                    f"TP group of stage {s}, replica {d} mixes GPU types {types} on GPUs {[x.gpu for x in grp]}; "
                    "tensor parallelism needs identical GPUs: make tp divide the GPUs per node or change parallelism.order"
                )
            if len({x.node for x in grp}) > 1:
                log.warning("TP group of stage %d, replica %d spans nodes %s", s, d, sorted({x.node for x in grp}))
    return pl
