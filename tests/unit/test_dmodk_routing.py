"""Static D-mod-K routing (``network.routing = "dmodk"``): one next hop per destination in the network.

Analytic answers: in a k-ary fat-tree every shift permutation (host i -> host i + s, the node-to-node
step of a ring) routes with at most one flow per directed network link (Zahavi, CCIT Report 776, 2010),
so a collective's ring runs at the NIC rate where per-flow ECMP collides.
"""

from __future__ import annotations

import dataclasses
from collections import Counter

import pandas as pd
import pytest

from hetero_ns3.errors import ScenarioError
from hetero_ns3.topology import plain_network, resolve_topology
from hetero_ns3.topology.graph import make_graph
from hetero_ns3.topology.loader import parse_cluster
from hetero_ns3.topology.routing import packed_routing_tables, routing_tables
from hetero_ns3.topology.spec import NetworkSpec

RATE = 100e9


def _fattree(routing: str, k: int = 4):
    return plain_network(k**3 // 4, NetworkSpec("fattree", k=k, routing=routing), RATE)


def _path(graph, tables, s: int, d: int) -> list[tuple[int, int]]:
    """Directed links (from node, link) of the single route from ``s`` to ``d`` (every node has one hop)."""
    out, u = [], s
    while u != d:
        (li,) = tables[d][u]
        out.append((u, li))
        link = graph.links[li]
        a, b = graph.index(link.a), graph.index(link.b)
        u = b if a == u else a
        assert len(out) < 10
    return out


@pytest.mark.parametrize("k", [4, 6, 8])
def test_every_network_switch_keeps_one_hop_and_shifts_do_not_collide(k):
    g = _fattree("dmodk", k)
    tables = routing_tables(g)
    hosts = g.host_indices()
    n = len(hosts)
    for d in hosts:
        for u, node in enumerate(g.nodes):
            if node.kind == "switch":
                assert len(tables[d][u]) == 1, (node.name, g.nodes[d].name)
    for shift in range(1, n):
        load = Counter(hop for i in range(n) for hop in _path(g, tables, hosts[i], hosts[(i + shift) % n]))
        assert max(load.values()) == 1, shift


def test_ecmp_default_keeps_every_equal_cost_hop_and_dmodk_spreads_destinations():
    ecmp, dmodk = _fattree("ecmp"), _fattree("dmodk")
    assert ecmp.routing == "ecmp" and dmodk.routing == "dmodk"
    edge = ecmp.index("edge0.0")
    t_e, t_d = routing_tables(ecmp), routing_tables(dmodk)
    far = [ecmp.index(f"h{i}") for i in range(8, 16)]
    assert all(len(t_e[d][edge]) == 2 for d in far)  # both aggregation switches
    # D-mod-K: consecutive destinations alternate between the two aggregation uplinks
    assert len({t_d[d][edge][0] for d in far}) == 2
    # from h0, the 12 hosts of the other three pods: each of the 4 cores carries 3 of them
    cores: Counter[str] = Counter()
    for i in range(4, 16):
        for u, _ in _path(dmodk, t_d, dmodk.index("h0"), dmodk.index(f"h{i}")):
            if dmodk.nodes[u].role == "core":
                cores[dmodk.nodes[u].name] += 1
    assert sorted(cores.values()) == [3, 3, 3, 3]


def test_packed_tables_match_the_lists():
    g = _fattree("dmodk")
    packed = packed_routing_tables(g)
    tables = routing_tables(g)
    for s, d in enumerate(packed.hosts):
        for u in range(len(g.nodes)):
            o, c = packed.off[s, u], packed.count[s, u]
            assert list(packed.links[o : o + c]) == list(tables[int(d)][u])


def test_flow_level_shift_runs_at_line_rate_only_with_dmodk():
    from hetero_ns3.network.analytic import simulate_flows

    size = 10_000_000
    flows = pd.DataFrame(
        [(f"h{i}", f"h{(i + 8) % 16}", size, 0.0) for i in range(16)], columns=["src", "dst", "size_bytes", "start_s"]
    )
    ideal = simulate_flows(_fattree("dmodk"), flows[:1], seed=1).finish_s.max()  # one flow alone (framing included)
    dmodk = simulate_flows(_fattree("dmodk"), flows, seed=1).finish_s.max()
    assert dmodk == pytest.approx(ideal, rel=0.01)
    worst = max(simulate_flows(_fattree("ecmp"), flows, seed=s).finish_s.max() for s in (1, 2, 3))
    assert worst >= 1.9 * ideal  # at least two flows share some link under every one of three hash seeds


def test_ring_all_reduce_on_a_fat_tree_reaches_the_model_with_dmodk():
    """2 x 8 A100 on the a100-fattree preset, 1 GiB: per-flow ECMP puts two or more of the ring's 8
    node-to-node connections on one uplink (~65 GB/s busbw); D-mod-K runs them at the NIC rate,
    within 10% of the planner's own prediction (which assumes no collisions)."""
    from hetero_ns3.collectives import CollectiveCall, CollectiveEnv, plan_collective
    from hetero_ns3.network.analytic import simulate_plan
    from hetero_ns3.plan.builder import PlanBuilder

    times = {}
    for routing in ("ecmp", "dmodk"):
        g = resolve_topology("a100-fattree", routing=routing)
        env = CollectiveEnv.from_graph(g)
        group = env.gpus[:16]
        b = PlanBuilder(group)
        res = plan_collective(b, CollectiveCall("all_reduce", group, 1 << 30), env)
        times[routing] = simulate_plan(g, b.build(), seed=1).times.makespan_s
        predicted = res.choice.predicted_s
    assert times["dmodk"] == pytest.approx(predicted, rel=0.10)
    assert times["ecmp"] >= 2.0 * times["dmodk"]


def test_bad_routing_names_the_field():
    raw = {
        "name": "t",
        "groups": [
            {
                "name": "a",
                "count": 2,
                "gpu": "H100-SXM",
                "fabric": {"kind": "nvswitch"},
                "nics": {"count": 1, "rate": "400Gbps"},
            }
        ],  # fmt: skip
        "network": {"kind": "fattree", "k": 4, "routing": "dmod-k"},
    }
    with pytest.raises(ScenarioError, match=r"network\.routing \('dmod-k'\).*'dmodk'"):
        parse_cluster(raw)
    assert parse_cluster({**raw, "network": {"kind": "fattree", "k": 4, "routing": "dmodk"}}).network.routing == "dmodk"
    g = resolve_topology("star:4")
    with pytest.raises(ScenarioError, match=r"network\.routing \('adaptive'\) is unknown; use one of"):
        make_graph(g.nodes, g.links, "adaptive")


def test_scenario_override_reaches_the_graph():
    from hetero_ns3.pipeline import load_run_cluster
    from hetero_ns3.scenario.loader import scenario_from_dict
    from hetero_ns3.topology import build_graph

    raw = {
        "model": {"name": "toy", "layers": 2, "hidden": 256, "heads": 4, "ffn_hidden": 1024, "vocab": 512,
                  "seq_len": 128},
        "parallelism": {"tp": 8, "dp": 16, "global_batch": 16, "micro_batch": 1},
        "cluster": {"topology": "a100-fattree", "routing": "dmodk"},
        "run": {"backend": "analytic"},
    }  # fmt: skip
    sc = scenario_from_dict(raw)
    assert build_graph(load_run_cluster(sc)).routing == "dmodk"
    assert (
        build_graph(
            load_run_cluster(dataclasses.replace(sc, cluster=dataclasses.replace(sc.cluster, routing=None)))
        ).routing
        == "ecmp"
    )
    with pytest.raises(ScenarioError, match=r"cluster\.routing \('random'\) is not a routing; use one of"):
        scenario_from_dict({**raw, "cluster": {"topology": "a100-fattree", "routing": "random"}})


def test_rail_pods_spread_a_rail_switch_over_the_spines():
    """Two pods of 4 nodes x 2 rails: NIC r of node n sends to NIC r of node n + 4 (the other pod). The
    4 NICs of a rail switch get consecutive ports, so D-mod-K sends them up 4 different spines (numbered
    node by node they would all share one residue and one spine)."""
    from hetero_ns3.topology.spec import TierSpec

    net = NetworkSpec("rail", nodes_per_pod=4, spines=4, tiers={"rail": TierSpec(uplinks=4)}, routing="dmodk")
    g = plain_network(16, net, RATE, rails=2)
    tables = routing_tables(g)
    load = Counter(hop for i in range(8) for hop in _path(g, tables, g.index(f"h{i}"), g.index(f"h{i + 8}")))
    assert max(load.values()) == 1
    spines = {g.nodes[u].name for u, _ in load if g.nodes[u].role == "spine"}
    assert len(spines) == 4
