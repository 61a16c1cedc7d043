"""Pipeline schedules: the order of forward and backward microbatch steps on each pipeline rank.

Pure functions following Megatron-LM's ``schedules.py``:

* ``gpipe``: all forwards, then all backwards (Huang et al., GPipe, 2019).
* ``1f1b``: warm-up of ``min(pp - rank - 1, M)`` forwards, steady one-forward-one-backward, cool-down
  backwards (PipeDream-flush; Narayanan et al. SC'21 Sec. 2.2.1).
* ``interleaved``: each rank holds ``vpp`` model chunks; warm-up ``(pp - rank - 1) x 2 + (vpp - 1) x pp``
  (all steps when M == pp), chunk of the k-th step ``(k mod (pp x vpp)) // pp`` (reversed for
  backward), microbatch ``(k // (pp x vpp)) x pp + k mod pp`` (Narayanan et al. SC'21 Sec. 2.2.2).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Literal

from hetero_ns3.errors import ScenarioError


@dataclass(frozen=True, slots=True)
class Step:
    """One schedule step: ``phase`` F (forward) or B (backward) of ``microbatch`` on model ``chunk``."""

    phase: Literal["F", "B"]
    microbatch: int
    chunk: int = 0

    def __str__(self) -> str:
        return f"{self.phase}{self.microbatch}" + (f"c{self.chunk}" if self.chunk else "")


def warmup_steps(kind: str, pp: int, rank: int, microbatches: int, vpp: int = 1) -> int:
    """Forward steps a rank runs before its first backward."""
    if kind == "gpipe":
        return microbatches
    if kind == "1f1b":
        return min(pp - rank - 1, microbatches)
    if kind == "interleaved":
        total = microbatches * vpp
        if microbatches == pp:
            return total
        return min((pp - rank - 1) * 2 + (vpp - 1) * pp, total)
    raise ScenarioError(f"parallelism.schedule ({kind!r}) must be one of ['1f1b', 'gpipe', 'interleaved']")


def _interleaved_chunk(k: int, pp: int, vpp: int, forward: bool) -> int:
    chunk = (k % (pp * vpp)) // pp
    return chunk if forward else vpp - chunk - 1


def _interleaved_mb(k: int, pp: int, vpp: int) -> int:
    return (k // (pp * vpp)) * pp + k % pp


def pipeline_schedule(kind: str, pp: int, rank: int, microbatches: int, vpp: int = 1) -> tuple[Step, ...]:
    """Ordered steps of pipeline rank ``rank`` (0 = first stage) for ``microbatches`` microbatches."""
    if not 0 <= rank < pp:
        raise ScenarioError(f"pipeline rank {rank} outside 0..{pp - 1}")
    m = microbatches
    if kind == "gpipe":
        return tuple(Step("F", i) for i in range(m)) + tuple(Step("B", i) for i in range(m))
    if kind == "1f1b":
        w = warmup_steps(kind, pp, rank, m)
        out = [Step("F", i) for i in range(w)]
        for i in range(m - w):
            out += [Step("F", w + i), Step("B", i)]
        out += [Step("B", i) for i in range(m - w, m)]
        return tuple(out)
    if kind == "interleaved":
        if m % pp:
            raise ScenarioError(f"interleaved schedule needs microbatches ({m}) to be a multiple of pp ({pp})")
        total = m * vpp
        w = warmup_steps(kind, pp, rank, m, vpp)

        def f(k: int) -> Step:
            return Step("F", _interleaved_mb(k, pp, vpp), _interleaved_chunk(k, pp, vpp, True))

        def b(k: int) -> Step:
            return Step("B", _interleaved_mb(k, pp, vpp), _interleaved_chunk(k, pp, vpp, False))

        out = [f(k) for k in range(w)]
        for i in range(total - w):
            out += [f(w + i), b(i)]
        out += [b(k) for k in range(total - w, total)]
        return tuple(out)
    raise ScenarioError(f"parallelism.schedule ({kind!r}) must be one of ['1f1b', 'gpipe', 'interleaved']")


def combined_schedule(kind: str, pp: int, rank: int, microbatches: int, vpp: int = 1) -> tuple[tuple[Step, ...], ...]:
    """The schedule of ``pipeline_schedule`` as Megatron-Core runs it with expert-parallel overlap
    (``overlap_moe_expert_parallel_comm``, ``combined_1f1b.py``): one more warm-up forward, then each steady
    forward paired with a backward of another micro-batch (one group, run layer by layer together), then the
    cool-down backwards. Groups of one or two steps (a pair: forward first).

    Without pipelining (pp 1) the first forward runs alone, then forward i + 1 with backward i, then the last
    backward alone (``combined_1f1b_schedule_for_no_pipelining``); the interleaved schedule adds one forward to
    its warm-up (``get_pp_rank_microbatches``). Megatron requires the interleaved schedule when pp > 1."""
    if pp > 1 and kind != "interleaved":
        raise ScenarioError(
            f"parallelism.overlap_moe_expert_parallel_comm needs parallelism.schedule = 'interleaved' when pp > 1 "
            f"(is {kind!r}); set vpp > 1 with the interleaved schedule, as Megatron-Core requires"
        )
    steps = pipeline_schedule(kind, pp, rank, microbatches, vpp)
    total = len(steps) // 2
    w = min(warmup_steps(kind, pp, rank, microbatches, vpp) + 1, total)
    fwd = [s for s in steps if s.phase == "F"]
    bwd = [s for s in steps if s.phase == "B"]
    out: list[tuple[Step, ...]] = [(f,) for f in fwd[:w]]
    out += [(fwd[w + i], bwd[i]) for i in range(total - w)]
    out += [(b,) for b in bwd[total - w :]]
    return tuple(out)


def peak_in_flight(steps: Sequence[Step], chunk_weight: Mapping[int, float] | None = None) -> float:
    """Largest weighted count of microbatches whose forward ran and backward did not yet.

    With unit weights this is the number of microbatches whose activations a rank holds at once
    (``pp - rank`` for 1F1B, M for GPipe); with ``chunk_weight`` = activation bytes per chunk it is the
    peak activation memory of the schedule.
    """
    cur = peak = 0.0
    for s in steps:
        w = 1.0 if chunk_weight is None else chunk_weight.get(s.chunk, 0.0)
        cur += w if s.phase == "F" else -w
        peak = max(peak, cur)
    return peak


def next_of_phase(groups: Sequence[Sequence[Step]]) -> dict[int, int]:
    """For each single-step group of a worker's schedule, the index of the next single-step group of the same phase
    (F or B), where there is one: the step whose pipeline receive Megatron-Core's ``overlap_p2p_comm`` posts with it."""
    out: dict[int, int] = {}
    last: dict[str, int] = {}
    for i, g in enumerate(groups):
        if len(g) == 1:
            if g[0].phase in last:
                out[last[g[0].phase]] = i
            last[g[0].phase] = i
    return out
