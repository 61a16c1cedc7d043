"""Non-uniform partitioning: pipeline-stage layer counts and per-replica microbatch counts.

Both are min-max assignments solved greedily (optimal for this separable form): start every part at
its minimum and hand out the remaining units one at a time to the part whose finish time after
taking it is smallest. The result gives each part a share proportional to its throughput, up to
integer rounding and fixed costs (embedding on the first stage, logits on the last).
"""

from __future__ import annotations

from collections.abc import Sequence

from hetero_ns3.errors import ScenarioError


def minmax_split(
    total: int, unit_cost: Sequence[float], fixed: Sequence[float] | None = None, minimum: int = 1
) -> tuple[int, ...]:
    """Split ``total`` units over parts with per-unit cost ``unit_cost[i]`` and fixed cost ``fixed[i]``.

    Minimizes max_i (n_i x unit_cost[i] + fixed[i]) subject to n_i >= minimum and sum n_i = total.
    """
    parts = len(unit_cost)
    if parts == 0 or total < minimum * parts:
        raise ScenarioError(f"cannot split {total} units into {parts} parts of at least {minimum}")
    if any(c <= 0 for c in unit_cost):
        raise ScenarioError(f"unit costs must be positive, got {list(unit_cost)}")
    fx = list(fixed) if fixed is not None else [0.0] * parts
    n = [minimum] * parts
    for _ in range(total - minimum * parts):
        best = min(range(parts), key=lambda i: ((n[i] + 1) * unit_cost[i] + fx[i], i))
        n[best] += 1
    return tuple(n)


def uniform_split(total: int, parts: int) -> tuple[int, ...]:
    """Near-equal split, larger parts first (Megatron's even division when it divides)."""
    if parts < 1 or total < parts:
        raise ScenarioError(f"cannot split {total} units into {parts} non-empty parts")
    q, r = divmod(total, parts)
    return tuple(q + (1 if i < r else 0) for i in range(parts))


def chunk_layers(stage_layers: Sequence[int], vpp: int) -> tuple[int, ...]:
    """Per-virtual-stage layer counts (index v = chunk x pp + stage) from per-stage totals."""
    pp = len(stage_layers)
    per_stage = [uniform_split(n, vpp) for n in stage_layers]
    return tuple(per_stage[v % pp][v // pp] for v in range(pp * vpp))
