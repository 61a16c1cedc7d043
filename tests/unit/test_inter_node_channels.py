"""NCCL's channel count for communicators with one rank per node (``Tuning.inter_node_ring_channels``).

Off by default (every call takes the max_channels / min_bytes rule). When set, a call whose ranks are each
on a node of their own uses at most that many channels (NCCL: 2 for one NIC per GPU); calls with two ranks
on one node, and explicit ``channels``, are left alone.
"""

from __future__ import annotations

import dataclasses

import pytest

from hetero_ns3.collectives import CollectiveCall, CollectiveEnv, load_tuning, plan_collective
from hetero_ns3.errors import ScenarioError
from hetero_ns3.plan.builder import PlanBuilder
from hetero_ns3.scenario.collectives import CollectivesSection
from hetero_ns3.topology import resolve_topology

GRAPH = resolve_topology("h0")


def _plan(call: CollectiveCall, inter: int):
    env = CollectiveEnv.from_graph(GRAPH, dataclasses.replace(load_tuning(), inter_node_ring_channels=inter))
    b = PlanBuilder(env.gpus)
    res = plan_collective(b, call, env)
    return res, b.build()


DP = tuple(f"n{i}.g0" for i in range(16))  # one GPU per node: the data-parallel ring of rail 0
TP = tuple(f"n0.g{i}" for i in range(8))  # one node


def test_off_by_default_keeps_the_max_channels_rule():
    assert load_tuning().inter_node_ring_channels == 0
    res, _ = _plan(CollectiveCall("all_reduce", DP, 64 << 20, algo="ring"), 0)
    assert res.channels == load_tuning().max_channels == 8


def test_one_rank_per_node_uses_nccls_two_channels_and_fewer_connections():
    base, plan8 = _plan(CollectiveCall("all_reduce", DP, 64 << 20, algo="ring"), 0)
    res, plan2 = _plan(CollectiveCall("all_reduce", DP, 64 << 20, algo="ring"), 2)
    assert res.channels == 2
    # a quarter of the queue pairs (connections) per rank; slicing keeps the flow count bounded either way
    conns = [len(set(p.flow_connections()[p.kind == 1].tolist())) for p in (plan2, plan8)]
    assert conns[0] * 4 == conns[1]
    assert plan2.n_flows <= plan8.n_flows
    # the same bytes cross the network either way
    assert plan2.size_bytes.sum() == plan8.size_bytes.sum()


def test_intra_node_groups_and_explicit_channels_are_left_alone():
    res, _ = _plan(CollectiveCall("all_reduce", TP, 16 << 20, algo="ring"), 2)
    assert res.channels == 8
    mixed = ("n0.g0", "n0.g1", "n1.g0", "n1.g1")
    res, _ = _plan(CollectiveCall("all_reduce", mixed, 16 << 20, algo="ring"), 2)
    assert res.channels == 8
    res, _ = _plan(CollectiveCall("all_reduce", DP, 64 << 20, algo="ring", channels=4), 2)
    assert res.channels == 4


def test_small_calls_still_use_fewer_channels():
    res, _ = _plan(CollectiveCall("all_reduce", DP, 16 * 65536, algo="ring"), 2)
    assert res.channels == 1


def test_scenario_field_is_a_tuning_override_and_is_checked():
    sec = CollectivesSection(inter_node_ring_channels=2)
    assert sec.tuning_overrides() == {"inter_node_ring_channels": 2}
    with pytest.raises(ScenarioError, match="inter_node_ring_channels"):
        CollectivesSection(inter_node_ring_channels=0).validate()
