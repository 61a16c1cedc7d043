"""Group-limited MoE routing (DeepSeek's node-limited routing) and the bytes of the deduplicating exchange.

Analytic answers: with ``G`` groups of which a token picks ``GK``, a node holding two whole groups of DeepSeek-V3's
eight is needed unless both are left out, ``1 - C(6, 4) / C(8, 4) = 0.786`` (plain top-8 of 256: 0.904); the
closed form against enumeration of its own draw, and against a Monte Carlo of Megatron-Core's group-limited top-k
(``group_limited_topk``: group score = the sum of each group's ``k / GK`` best scores) on random logits, the
routing that ``moe_router_force_load_balancing`` runs.
"""

from __future__ import annotations

from itertools import combinations
from math import comb

import numpy as np
import pytest

from hetero_ns3.collectives import CollectiveCall, CollectiveEnv
from hetero_ns3.collectives.algorithms.expert_dispatch import dispatch_legs
from hetero_ns3.collectives.moe_routing import held_hit_probability, routing_of, routing_problem
from hetero_ns3.errors import ScenarioError
from hetero_ns3.topology import build_graph, parse_cluster
from hetero_ns3.workload.models import get_model, load_model_section

DSV3 = (256, 8, 8, 4)


def megatron_group_topk_hits(routing: tuple[int, int, int, int], held: list[range], tokens: int, seed: int = 0):
    """Fraction of tokens that need each ``held`` expert set under Megatron-Core's group-limited top-k with random
    normal logits and sigmoid scores (DeepSeek-V3's score function)."""
    experts, k, groups, gk = routing
    rng = np.random.default_rng(seed)
    scores = 1.0 / (1.0 + np.exp(-rng.standard_normal((tokens, experts))))
    group_scores = np.sort(scores.reshape(tokens, groups, -1), axis=2)[:, :, -(k // gk) :].sum(2)
    chosen = np.argsort(-group_scores, axis=1)[:, :gk]
    mask = np.zeros((tokens, groups), bool)
    np.put_along_axis(mask, chosen, True, axis=1)
    masked = np.where(np.repeat(mask, experts // groups, axis=1), scores, -1.0)
    top = np.argsort(-masked, axis=1)[:, :k]
    hit = np.zeros((tokens, experts), bool)
    np.put_along_axis(hit, top, True, axis=1)
    return [float(hit[:, list(h)].any(axis=1).mean()) for h in held]


def test_one_group_is_plain_top_k():
    for held in (0, 1, 8, 64, 249):
        plain = 1 - comb(256 - held, 8) / comb(256, 8)
        assert held_hit_probability((256, 8), range(held)) == pytest.approx(plain)
        assert held_hit_probability((256, 8, 1, 1), range(held)) == pytest.approx(plain)
    assert routing_of(256, 8) == routing_of(256, 8, 1, 1) == (256, 8)
    assert routing_of(256, 8, 8, 4) == DSV3


def test_closed_form_matches_enumeration_of_its_draw():
    """GK groups uniformly, then K / GK experts uniformly in each (with a remainder: that share of the groups takes
    one more), enumerated exactly on small routers, for held sets inside a group, across groups and whole groups."""
    for routing, held in (
        ((8, 2, 4, 2), range(0, 1)),
        ((8, 2, 4, 2), range(0, 2)),
        ((12, 4, 3, 2), range(2, 7)),
        ((12, 4, 3, 2), [0, 5, 11]),
        ((12, 3, 4, 2), range(0, 4)),  # k = 3 over 2 groups: one takes 1, the other 2
    ):
        experts, k, groups, gk = routing
        size = experts // groups
        held_set = set(held)
        lo, extra = divmod(k, gk)
        total = miss = 0.0
        for chosen in combinations(range(groups), gk):
            for more in combinations(chosen, extra):  # which chosen groups take lo + 1 (equally likely)
                w = 1.0 / comb(groups, gk) / comb(gk, extra)
                p_miss = 1.0
                for j in chosen:
                    m = lo + (j in more)
                    inside = [x for x in range(j * size, (j + 1) * size) if x not in held_set]
                    p_miss *= comb(len(inside), m) / comb(size, m)
                total += w
                miss += w * p_miss
        assert total == pytest.approx(1.0)
        assert held_hit_probability(routing, held) == pytest.approx(1.0 - miss), routing


def test_deepseek_v3_node_of_two_groups():
    """Two whole groups of eight left out by a token with probability C(6, 4) / C(8, 4) = 15 / 70."""
    assert held_hit_probability(DSV3, range(64)) == pytest.approx(1 - 15 / 70)
    assert held_hit_probability(DSV3, range(32)) == pytest.approx(0.5)
    assert held_hit_probability((256, 8), range(64)) == pytest.approx(0.9036, abs=1e-4)


@pytest.mark.parametrize(
    ("routing", "held", "tol"),
    [
        (DSV3, 8, 0.015),  # a rank at EP 32: a quarter of a group
        (DSV3, 32, 0.01),  # a rank at EP 8, or a node of four at EP 32: one group
        (DSV3, 64, 0.01),  # a node at EP 32 over 4 nodes: two groups
        (DSV3, 128, 0.01),  # a node at EP 16 over 2 nodes
        ((64, 8, 8, 3), 8, 0.03),  # k not a multiple of GK (2 or 3 experts per chosen group)
        ((64, 8, 8, 3), 16, 0.03),
    ],
)
def test_closed_form_against_megatron_group_limited_topk(routing, held, tol):
    """Megatron-Core picks groups by their best k / GK scores, so a chosen group almost always gets an expert:
    the closed form's uniform draw inside the groups is within ``tol`` (absolute) of 20,000 routed tokens."""
    (mc,) = megatron_group_topk_hits(routing, [range(held)], 20_000)
    assert held_hit_probability(routing, range(held)) == pytest.approx(mc, abs=tol)


def _dgx_b200(nodes: int) -> CollectiveEnv:
    group = {"name": "b", "count": nodes, "gpu": "B200", "gpus_per_node": 8,
             "fabric": {"kind": "nvswitch", "pcie_gen": 5, "pcie_lanes": 16}, "nics": {"count": 8, "rate": "400Gbps"}}  # fmt: skip
    return CollectiveEnv.from_graph(
        build_graph(parse_cluster({"name": "d", "groups": [group], "network": {"kind": "rail"}}))
    )


def test_exchange_sends_group_limited_bytes_over_the_network():
    """DeepSeek-V3 at EP 32 over four DGX nodes (the B200 row's layout): each remote node receives a token with
    probability 55/70 instead of 0.904, each rank 0.222 (C(24, 2) / C(32, 2) missed inside a chosen group)."""
    env = _dgx_b200(4)
    ranks = tuple(env.gpus[:32])
    size = 4096 * 8 * 7168 * 2
    token = size / 8
    legs = {}
    for routing in ((256, 8), DSV3):
        net = rank = 0
        for (_, i, relay, nb), rest in dispatch_legs(CollectiveCall("all_to_all", ranks, size, routing=routing), env):
            if env.node_of(ranks[i]) != env.node_of(ranks[relay]):
                net += nb
                assert all(fb == round(token * held_hit_probability(routing, range(8))) for *_, fb in rest)
            else:
                rank += nb
        legs[routing] = net
    per_node = 32 * 3  # each sender to each of the three other nodes
    assert legs[DSV3] == pytest.approx(per_node * token * 55 / 70, rel=1e-6)
    assert legs[(256, 8)] == pytest.approx(per_node * token * 0.90355, rel=1e-4)
    assert held_hit_probability(DSV3, range(8)) == pytest.approx(0.5 * (1 - comb(24, 2) / comb(32, 2)))


def test_bad_routing_is_refused_naming_the_field():
    assert routing_problem((256, 8, 7, 4)) and "divide" in routing_problem((256, 8, 7, 4))
    assert routing_problem((256, 2, 8, 4))  # fewer experts than chosen groups
    assert routing_problem((256, 8, 8, 9))
    assert routing_problem((256, 8, 8)) and routing_problem((256, 8, 8.0, 4))
    with pytest.raises(ScenarioError, match=r"call\.routing"):
        CollectiveCall("all_to_all", ("a", "b"), 1024, routing=(256, 8, 7, 4))
    for change, msg in (
        ({"router_groups": 7}, r"model\.router_groups.*divide the 256 experts.*n_group"),
        ({"router_group_topk": 0}, r"model\.router_groups.*must be >= 1"),
        ({"top_k": 2}, r"model\.router_groups.*group_topk <= top_k"),
    ):
        with pytest.raises(ScenarioError, match=msg):
            load_model_section({"name": "deepseek-v3", **change})
    assert get_model("deepseek-v3").routing == DSV3
    assert get_model("qwen3-235b-a22b").routing == (128, 8)
