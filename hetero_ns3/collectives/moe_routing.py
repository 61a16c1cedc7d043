"""Where an MoE router's tokens go: the probability that a token needs a destination holding a set of experts.

The deduplicating token exchange (:mod:`hetero_ns3.collectives.algorithms.expert_dispatch`) sends a token once per
destination rank and node that holds at least one of its ``top_k`` experts, so its bytes scale with that
probability. Two routers are modelled, both balanced in expectation (Megatron-Core's forced load balancing draws
random logits, ``moe_router_force_load_balancing``, which the performance recipes set):

* **plain top-k**: ``top_k`` of ``experts`` drawn uniformly; a destination holding ``h`` experts is needed with
  probability ``1 - C(E - h, k) / C(E, k)``.
* **group-limited top-k** (DeepSeek-V2/V3's node-limited routing; Megatron's ``moe_router_num_groups`` /
  ``moe_router_group_topk``, Hugging Face's ``n_group`` / ``topk_group``): the experts form ``groups`` contiguous
  groups of ``g = E / G``; a token first picks ``group_topk`` groups (by the sum of each group's ``k / group_topk``
  best scores), then its ``top_k`` experts inside them. Modelled as: the ``group_topk`` groups uniformly, and
  ``k / group_topk`` experts drawn uniformly inside each chosen group (a remainder ``r = k mod group_topk`` as
  that fraction of groups taking one more). A destination holding ``h_j`` experts of group ``j`` is missed by a
  chosen group with probability ``q_j = C(g - h_j, m) / C(g, m)``, and needed with probability
  ``1 - e_GK(q) / C(G, GK)``, ``e_GK`` the elementary symmetric polynomial of degree ``group_topk`` (the mean of
  the product over every set of chosen groups).

Validation: the closed forms against enumeration and against a Monte Carlo of Megatron-Core's group-limited top-k
on random logits (``tests/unit/test_moe_routing.py``): DeepSeek-V3's router (256 experts, 8 groups, 4 chosen,
top 8) puts a token on a node holding two groups with probability 0.786 (Monte Carlo 0.78-0.79, plain top-8 0.904).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Sequence
from math import comb

Routing = tuple[int, ...]
"""An MoE router's shape: ``(experts, top_k)``, or ``(experts, top_k, groups, group_topk)`` when group-limited."""


def routing_of(experts: int, top_k: int, groups: int = 1, group_topk: int = 1) -> Routing:
    """The canonical routing tuple: 2 entries for a plain top-k router, 4 for a group-limited one."""
    return (experts, top_k) if groups <= 1 else (experts, top_k, groups, group_topk)


def routing_problem(rt: object) -> str | None:
    """What is wrong with a routing tuple, or None: ``(E, K)`` with ``1 <= K <= E``, or ``(E, K, G, GK)`` with
    ``G`` dividing ``E``, ``1 <= GK <= G`` and ``GK <= K <= GK E / G``."""
    if not (isinstance(rt, tuple) and len(rt) in (2, 4) and all(isinstance(v, int) for v in rt)):
        return "must be (experts, top_k) or (experts, top_k, groups, group_topk) of integers"
    experts, top_k = rt[0], rt[1]
    if not 1 <= top_k <= experts:
        return "must be (experts, top_k) with 1 <= top_k <= experts"
    if len(rt) == 4:
        groups, gk = rt[2], rt[3]
        if groups < 1 or experts % groups:
            return f"has {groups} groups, which must divide the {experts} experts"
        if not (1 <= gk <= groups and gk <= top_k <= gk * (experts // groups)):
            return f"needs 1 <= group_topk <= groups and group_topk <= top_k <= group_topk x {experts // groups}"
    return None


def _miss(size: int, held: int, picks: int) -> float:
    """Probability that ``picks`` experts drawn uniformly from ``size`` avoid the ``held`` of them."""
    return comb(size - held, picks) / comb(size, picks)


def held_hit_probability(routing: Routing, held: Iterable[int]) -> float:
    """Probability that a token needs a destination holding the experts ``held`` (indices in ``0..E-1``)."""
    experts, top_k = routing[0], routing[1]
    held_set = set(held)
    if len(routing) < 4 or routing[2] <= 1:
        return 1.0 - _miss(experts, len(held_set), top_k)
    groups, gk = routing[2], routing[3]
    size = experts // groups
    per_group = Counter(x // size for x in held_set)
    lo, extra = divmod(top_k, gk)
    frac = extra / gk
    q = [
        (1.0 - frac) * _miss(size, per_group.get(j, 0), lo) + frac * _miss(size, per_group.get(j, 0), lo + 1)
        if frac
        else _miss(size, per_group.get(j, 0), lo)
        for j in range(groups)
    ]
    return 1.0 - _elementary_symmetric(q, gk) / comb(groups, gk)


def _elementary_symmetric(values: Sequence[float], degree: int) -> float:
    """Sum over every ``degree``-subset of ``values`` of the product of its members."""
    e = [1.0] + [0.0] * degree
    for v in values:
        for d in range(degree, 0, -1):
            e[d] += e[d - 1] * v
    return e[degree]


def rank_experts(routing: Routing, ranks: int, rank: int) -> range:
    """The experts rank ``rank`` of ``ranks`` holds (Megatron-Core: a contiguous block of ``E / ranks``)."""
    per = routing[0] // ranks
    return range(rank * per, (rank + 1) * per)
