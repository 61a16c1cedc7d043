"""Network builders against closed forms: element counts, bisection bandwidth, ECMP path counts.

Closed forms (uniform link rate c, see docs/topologies.md):

* leaf-spine, L leaves of H ports, leaf oversubscription r: U = ceil(H / r) uplinks per leaf,
  S = U spines, links = L*H + L*U, bisection = c * min(L*H, L*U) / 2.
* k-ary fat-tree, edge oversubscription r_e, aggregation oversubscription r_a: hosts = k^3 r_e / 4,
  edge = agg = k^2 / 2, core = k^2 / (4 r_a), links = hosts + k^3/4 + k^3/(4 r_a),
  bisection = c * min(hosts, k^3/4, k^3/(4 r_a)) / 2; ECMP paths between pods = (k/2) * k/(2 r_a).
"""

from __future__ import annotations

import math
from collections import Counter

import pytest

from hetero_ns3.errors import ScenarioError
from hetero_ns3.topology import bisection_bandwidth, ecmp_path_count, plain_network
from hetero_ns3.topology.routing import routing_tables
from hetero_ns3.topology.spec import NetworkSpec, TierSpec
from hetero_ns3.topology.summary import tier_oversubscription

C = 100e9


def _roles(g):
    return Counter(n.role for n in g.nodes)


@pytest.mark.parametrize(
    ("leaves", "ports", "ratio"), [(2, 4, 1.0), (4, 8, 2.0), (4, 8, 4.0), (6, 6, 3.0), (8, 16, 1.0)]
)
def test_leafspine_closed_form(leaves, ports, ratio):
    net = NetworkSpec("leafspine", ports_per_leaf=ports, tiers={"leaf": TierSpec(oversubscription=ratio)})
    g = plain_network(leaves * ports, net, C)
    up = math.ceil(ports / ratio)
    assert _roles(g) == {"host": leaves * ports, "leaf": leaves, "spine": up}
    assert len(g.links) == leaves * ports + leaves * up
    assert tier_oversubscription(g)["leaf"] == pytest.approx(ports / up)
    assert bisection_bandwidth(g) == pytest.approx(C * min(leaves * ports, leaves * up) / 2)


def test_leafspine_fewer_spines_than_uplinks_keeps_capacity():
    net = NetworkSpec("leafspine", ports_per_leaf=8, spines=2)
    g = plain_network(32, net, C)
    assert _roles(g)["spine"] == 2
    assert bisection_bandwidth(g) == pytest.approx(16 * C)  # 4 parallel links per leaf-spine pair


@pytest.mark.parametrize(
    ("k", "r_e", "r_a"),
    [(4, 1.0, 1.0), (4, 2.0, 1.0), (4, 1.0, 2.0), (6, 1.0, 1.0), (8, 1.0, 1.0), (8, 2.0, 2.0), (8, 1.0, 4.0)],
)
def test_fattree_closed_form(k, r_e, r_a):
    net = NetworkSpec(
        "fattree", k=k, tiers={"edge": TierSpec(oversubscription=r_e), "agg": TierSpec(oversubscription=r_a)}
    )
    hosts = round(k**3 * r_e / 4)
    g = plain_network(hosts, net, C)
    cores = round(k * k / (4 * r_a))
    assert _roles(g) == {"host": hosts, "edge": k * k // 2, "agg": k * k // 2, "core": cores}
    assert len(g.links) == hosts + k**3 // 4 + round(k**3 / (4 * r_a))
    expect = C * min(hosts, k**3 / 4, k**3 / (4 * r_a)) / 2
    assert bisection_bandwidth(g) == pytest.approx(expect)
    assert tier_oversubscription(g) == pytest.approx({"edge": r_e, "agg": r_a})


@pytest.mark.parametrize(("k", "r_a"), [(4, 1.0), (6, 1.0), (8, 2.0)])
def test_fattree_ecmp_path_counts(k, r_a):
    net = NetworkSpec("fattree", k=k, tiers={"agg": TierSpec(oversubscription=r_a)})
    hosts = k**3 // 4
    g = plain_network(hosts, net, C)
    tables = routing_tables(g)
    per_pod = k * k // 4
    h = g.host_indices()
    assert ecmp_path_count(g, tables, h[0], h[1]) == 1  # same edge switch
    assert ecmp_path_count(g, tables, h[0], h[k // 2]) == k // 2  # same pod, other edge
    assert ecmp_path_count(g, tables, h[0], h[per_pod]) == (k // 2) * round(k / (2 * r_a))  # other pod


def test_fattree_partial_builds_only_needed_pods():
    g = plain_network(20, NetworkSpec("fattree", k=8), C)  # 16 hosts per pod
    assert _roles(g)["edge"] == 8 and _roles(g)["core"] == 16


def test_fattree_too_small_names_k():
    with pytest.raises(ScenarioError, match=r"network\.k"):
        plain_network(17, NetworkSpec("fattree", k=4), C)


def test_fattree_agg_ratio_must_divide():
    with pytest.raises(ScenarioError, match=r"network\.agg\.oversubscription"):
        plain_network(16, NetworkSpec("fattree", k=4, tiers={"agg": TierSpec(oversubscription=3.0)}), C)


@pytest.mark.parametrize(("nodes", "rails", "per_pod", "ratio"), [(4, 4, 0, 1.0), (8, 4, 4, 1.0), (8, 8, 2, 2.0)])
def test_rail_closed_form(nodes, rails, per_pod, ratio):
    net = NetworkSpec("rail", nodes_per_pod=per_pod, tiers={"rail": TierSpec(oversubscription=ratio)})
    g = plain_network(nodes * rails, net, C, rails=rails)
    pods = nodes // (per_pod or nodes)
    per_switch = nodes // pods  # NICs per rail switch
    up = math.ceil(per_switch / ratio)
    assert _roles(g) == {"host": nodes * rails, "rail": pods * rails, "spine": up}
    assert len(g.links) == nodes * rails + pods * rails * up
    # halves of whole nodes: same-rail pairs inside a pod meet at the rail switch; pods split by the cut
    # go through the spines.
    expect = C * nodes * rails / 2 if pods == 1 else C * min(nodes * rails / 2, pods // 2 * rails * up)
    assert bisection_bandwidth(g) == pytest.approx(expect)
