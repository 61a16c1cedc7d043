"""The deduplicating MoE token exchange (``expert_dispatch``; ``parallelism.moe_dispatcher = "flex"``).

Analytic answers: a token routed to ``k`` of ``E`` experts drawn uniformly needs a rank holding ``e`` of them with
probability ``1 - C(E - e, k) / C(E, k)``; DeepEP / HybridEP send it once per such rank and, across nodes, once
per node (DeepSeek-V3 technical report, arXiv 2412.19437, Sec. 3.2.2), where NCCL's all-to-all sends ``k``
copies spread evenly over the ranks.
"""

from __future__ import annotations

from itertools import combinations
from math import comb

import numpy as np
import pytest

from hetero_ns3.collectives import CollectiveCall, CollectiveEnv, plan_collective
from hetero_ns3.collectives.algorithms.expert_dispatch import dispatch_legs
from hetero_ns3.collectives.moe_routing import held_hit_probability
from hetero_ns3.errors import ScenarioError
from hetero_ns3.network.analytic import simulate_plan
from hetero_ns3.plan.builder import PlanBuilder
from hetero_ns3.plan.dag import FLOW
from hetero_ns3.topology import build_graph, parse_cluster

TOKENS, HIDDEN, TOP_K, EXPERTS = 4096, 2048, 8, 128  # Qwen3-30B-A3B, one micro-batch of 4096 tokens
SIZE = TOKENS * TOP_K * HIDDEN * 2  # the call's size: one BF16 copy per routed expert
TOKEN_BYTES = SIZE / TOP_K


def _dgx(nodes: int, network: dict | None = None) -> CollectiveEnv:
    graph = build_graph(
        parse_cluster(
            {
                "name": "dgx",
                "groups": [
                    {
                        "name": "h",
                        "count": nodes,
                        "gpu": "H100-SXM",
                        "gpus_per_node": 8,
                        "fabric": {"kind": "nvswitch", "pcie_gen": 5, "pcie_lanes": 16},
                        "nics": {"count": 8, "rate": "400Gbps"},
                    }
                ],
                "network": network or {"kind": "rail"},
            }
        )
    )
    return CollectiveEnv.from_graph(graph)


def _run(env: CollectiveEnv, ranks: tuple[str, ...], **kw) -> tuple[float, int, int]:
    """Flow-level time (s), network bytes and scale-up bytes (wire) of an all-to-all of SIZE over ``ranks``."""
    call = CollectiveCall("all_to_all", ranks, SIZE, protocol="Simple", **kw)
    b = PlanBuilder(ranks)
    plan_collective(b, call, env)
    plan = b.build()
    t = simulate_plan(env.graph, plan, seed=1).times.makespan_s
    flows = plan.kind == FLOW
    node = np.array([env.node_of(g) for g in plan.gpus])
    cross = node[plan.gpu[flows]] != node[plan.dst[flows]]
    sizes = plan.size_bytes[flows]
    return t, int(sizes[cross].sum()), int(sizes[~cross].sum())


def hit_probability(experts: int, k: int, held: int) -> float:
    """Plain top-k: the probability that a token needs a rank holding ``held`` of the experts."""
    return held_hit_probability((experts, k), range(held))


def test_hit_probability_matches_enumeration() -> None:
    for experts, k, held in ((6, 2, 2), (8, 3, 4), (10, 4, 1)):
        draws = list(combinations(range(experts), k))
        hits = sum(1 for d in draws if any(x < held for x in d))
        assert hit_probability(experts, k, held) == pytest.approx(hits / len(draws))
    assert hit_probability(128, 8, 0) == 0.0
    assert hit_probability(128, 8, 121) == 1.0  # fewer than k experts left outside
    assert hit_probability(128, 8, 8) == pytest.approx(1 - comb(120, 8) / comb(128, 8))


def test_legs_deliver_each_token_once_per_rank_and_cross_once_per_node() -> None:
    env = _dgx(2)
    ranks = tuple(env.gpus[:16])
    call = CollectiveCall("all_to_all", ranks, SIZE, routing=(EXPERTS, TOP_K))
    per_rank = round(TOKEN_BYTES * hit_probability(EXPERTS, TOP_K, 8))
    per_node = round(TOKEN_BYTES * hit_probability(EXPERTS, TOP_K, 64))
    delivered: dict[tuple[int, int], int] = {}
    for (i, a, relay, nb), rest in dispatch_legs(call, env):
        assert a == i
        remote = env.node_of(ranks[i]) != env.node_of(ranks[relay])
        if remote:  # one network leg per (sender, node), to the rank on the sender's rail
            assert nb == per_node and env.rail_of(ranks[relay]) == env.rail_of(ranks[i])
            assert len(rest) == 7
            delivered[(i, relay)] = per_rank  # the relay keeps its own share
        else:
            assert nb == per_rank and not rest
            delivered[(i, relay)] = nb
        for s, r, j, fb in rest:
            assert (s, r) == (i, relay) and env.node_of(ranks[j]) == env.node_of(ranks[relay])
            delivered[(i, j)] = delivered.get((i, j), 0) + fb
    assert delivered == {(i, j): per_rank for i in range(16) for j in range(16) if i != j}


def test_relay_is_the_same_in_node_index_on_a_leaf_spine() -> None:
    """Where all NICs of a node hang off one leaf (no rails to tell them apart), the relay is still the GPU with
    the sender's in-node index: every GPU relays for exactly one sender of each other node, and the exchange
    stays NIC-bound, faster than NCCL's all-to-all (session 16 sent every sender of a leaf to the node's first
    GPU there: 7.44 ms against NCCL's 2.07 on these 4 nodes; now 0.95)."""
    env = _dgx(4, {"kind": "leafspine", "ports_per_leaf": 32, "leaf": {"oversubscription": 1.0}})
    ranks = tuple(env.gpus[:32])
    assert len({env.rail_of(g) for g in ranks}) == 1  # one leaf: the rail names nothing
    call = CollectiveCall("all_to_all", ranks, SIZE, routing=(EXPERTS, TOP_K))
    served: dict[int, list[int]] = {}
    for (i, _, relay, _), _rest in dispatch_legs(call, env):
        if env.node_of(ranks[i]) != env.node_of(ranks[relay]):
            assert env.local_of(ranks[relay]) == env.local_of(ranks[i])
            served.setdefault(relay, []).append(i)
    assert sorted(len(v) for v in served.values()) == [3] * 32  # one sender from each of the 3 other nodes
    t_flat, net_flat, _ = _run(env, ranks)
    t_dedup, net_dedup, _ = _run(env, ranks, algo="expert_dispatch", routing=(EXPERTS, TOP_K))
    # NCCL: 24 of 32 blocks leave the node (6 token copies); dedup: one copy per other node holding one of the
    # token's experts (32 of the 128 per node)
    assert net_dedup / net_flat == pytest.approx(3 * hit_probability(EXPERTS, TOP_K, 32) / 6, rel=1e-3)
    assert t_dedup < 0.6 * t_flat  # NIC-bound, like the bytes (0.454)


def test_two_nodes_cut_network_bytes_to_one_copy_per_node() -> None:
    env = _dgx(2)
    ranks = tuple(env.gpus[:16])
    t_flat, net_flat, up_flat = _run(env, ranks)
    t_dedup, net_dedup, up_dedup = _run(env, ranks, algo="expert_dispatch", routing=(EXPERTS, TOP_K))
    # NCCL: 8 of the 16 equal blocks of each rank leave the node (4 token copies); dedup: one per node.
    p_node = hit_probability(EXPERTS, TOP_K, 64)
    assert net_dedup / net_flat == pytest.approx(p_node / 4, rel=1e-3)
    # Scale-up: 7 local ranks' shares plus 7 forwarded for the peer on the same rail, against 7 blocks of 1/16.
    p_rank = hit_probability(EXPERTS, TOP_K, 8)
    assert up_dedup / up_flat == pytest.approx(14 * p_rank / 3.5, rel=1e-3)
    assert t_dedup < t_flat / 3
    # Each NIC sends and receives one network leg; the forwarding (5.8 token copies out of each GPU over NVLink)
    # runs beside it: the exchange takes what one rail transfer of those bytes takes (within 10%: latencies).
    one = CollectiveCall("send_recv", (ranks[0], ranks[8]), round(TOKEN_BYTES * p_node), protocol="Simple")
    b = PlanBuilder(one.group)
    plan_collective(b, one, env)
    t_rail = simulate_plan(env.graph, b.build(), seed=1).times.makespan_s
    assert t_dedup == pytest.approx(t_rail, rel=0.10)


def test_one_node_sends_one_copy_per_rank() -> None:
    env = _dgx(1)
    ranks = tuple(env.gpus[:8])
    t_flat, net_flat, up_flat = _run(env, ranks)
    t_dedup, net_dedup, up_dedup = _run(env, ranks, algo="expert_dispatch", routing=(EXPERTS, TOP_K))
    assert net_flat == net_dedup == 0
    p_rank = hit_probability(EXPERTS, TOP_K, 16)  # 16 experts per rank; NCCL sends 1 copy on average per rank
    assert up_dedup / up_flat == pytest.approx(p_rank, rel=1e-3)
    assert t_dedup / t_flat == pytest.approx(p_rank, rel=0.05)


def test_routing_is_checked() -> None:
    ranks = ("a", "b")
    with pytest.raises(ScenarioError, match="call.routing"):
        CollectiveCall("all_reduce", ranks, SIZE, routing=(EXPERTS, TOP_K))
    with pytest.raises(ScenarioError, match="call.routing"):
        CollectiveCall("all_to_all", ranks, SIZE, routing=(4, 8))
    env = _dgx(1)
    from hetero_ns3.collectives.registry import get_algorithm

    algo = get_algorithm("expert_dispatch")
    assert "routing" in (algo.check(CollectiveCall("all_to_all", tuple(env.gpus[:8]), SIZE), env) or "")
    uneven = CollectiveCall("all_to_all", tuple(env.gpus[:3]), SIZE, routing=(EXPERTS, TOP_K))
    assert "evenly" in (algo.check(uneven, env) or "")
