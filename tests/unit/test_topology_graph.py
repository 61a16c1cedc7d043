"""topology.graph and topology.routing: validation, least-cost ECMP next hops, zone rules."""

from __future__ import annotations

import pytest

from hetero_ns3.errors import ScenarioError
from hetero_ns3.topology.graph import HOST, SWITCH, GraphLink, GraphNode, make_graph
from hetero_ns3.topology.routing import packed_routing_tables, routing_tables, shortest_path_next_hops


def _g(nodes, links):
    return make_graph(
        [GraphNode(n, k, **kw) for n, k, kw in nodes], [GraphLink(*x[:2], 1e9, 0.0, **x[2]) for x in links]
    )


def test_rejects_bad_cost_and_mtu():
    n = [GraphNode("a", HOST), GraphNode("b", HOST)]
    with pytest.raises(ScenarioError, match=r"links\[0\]\.cost"):
        make_graph(n, [GraphLink("a", "b", 1e9, 0.0, cost=0)])
    with pytest.raises(ScenarioError, match=r"links\[0\]\.mtu_bytes"):
        make_graph(n, [GraphLink("a", "b", 1e9, 0.0, mtu_bytes=-1)])


def test_hop_count_ecmp_diamond():
    #   h0 - s0 - {s1, s2} - s3 - h1
    g = _g(
        [
            ("h0", HOST, {}),
            ("h1", HOST, {}),
            ("s0", SWITCH, {}),
            ("s1", SWITCH, {}),
            ("s2", SWITCH, {}),
            ("s3", SWITCH, {}),
        ],
        [("h0", "s0", {}), ("s0", "s1", {}), ("s0", "s2", {}), ("s1", "s3", {}), ("s2", "s3", {}), ("s3", "h1", {})],
    )
    hops = shortest_path_next_hops(g, g.index("h1"))
    assert sorted(hops[g.index("s0")]) == [1, 2]
    assert hops[g.index("h1")] == []


def test_cost_breaks_the_tie():
    g = _g(
        [
            ("h0", HOST, {}),
            ("h1", HOST, {}),
            ("s0", SWITCH, {}),
            ("s1", SWITCH, {}),
            ("s2", SWITCH, {}),
            ("s3", SWITCH, {}),
        ],
        [
            ("h0", "s0", {}),
            ("s0", "s1", {"cost": 0.5}),
            ("s0", "s2", {}),
            ("s1", "s3", {}),
            ("s2", "s3", {}),
            ("s3", "h1", {}),
        ],
    )
    assert shortest_path_next_hops(g, g.index("h1"))[g.index("s0")] == [1]


def test_hosts_never_relay():
    g = _g([("h0", HOST, {}), ("h1", HOST, {}), ("h2", HOST, {})], [("h0", "h1", {}), ("h1", "h2", {})])
    assert shortest_path_next_hops(g, g.index("h2"))[g.index("h0")] == []


def test_shared_port_tables_equal_individual_searches():
    nodes = [(f"h{i}", HOST, {}) for i in range(4)] + [("s0", SWITCH, {}), ("s1", SWITCH, {})]
    links = [("h0", "s0", {}), ("h1", "s0", {}), ("h2", "s1", {}), ("h3", "s1", {}), ("s0", "s1", {})]
    g = _g(nodes, links)
    tables = routing_tables(g)
    for d in g.host_indices():
        assert tables[d] == shortest_path_next_hops(g, d)


def _server_graph():
    # Two servers A, B, each: g0 - x0 - nic0 and g1 - x1 - nic1, x0 and x1 joined through a root switch
    # (links of cost 0.5); nic0s on switch r0, nic1s on r1, r0 - r1 joined directly. Without zones,
    # A.g0 -> B.g1 would tie between A.nic0 (affinity) and x0-root-x1-A.nic1 (not its NIC).
    nodes, links = [], []
    for z in ("A", "B"):
        nodes += [(f"{z}.root", SWITCH, {"zone": z})]
        for i in (0, 1):
            nodes += [(f"{z}.g{i}", HOST, {"zone": z}), (f"{z}.x{i}", SWITCH, {"zone": z})]
            nodes += [(f"{z}.nic{i}", SWITCH, {"zone": z, "serves": (f"{z}.g{i}",)})]
            links += [(f"{z}.g{i}", f"{z}.x{i}", {}), (f"{z}.nic{i}", f"{z}.x{i}", {}), (f"{z}.nic{i}", f"r{i}", {})]
            links += [(f"{z}.x{i}", f"{z}.root", {"cost": 0.5})]
    nodes += [("r0", SWITCH, {}), ("r1", SWITCH, {})]
    links += [("r0", "r1", {})]
    return _g(nodes, links)


def _walk(g, tables, s, d):
    out, u = [g.nodes[s].name], s
    while u != d:
        (li,) = tables[d][u]
        link = g.links[li]
        u = g.index(link.b) if g.index(link.a) == u else g.index(link.a)
        out.append(g.nodes[u].name)
    return out


def test_zone_rules_gateway_affinity_and_no_transit():
    g = _server_graph()
    t = routing_tables(g)
    # inter-server: leave through the source's own NIC, enter through the destination's own NIC
    expect = ["A.g0", "A.x0", "A.nic0", "r0", "r1", "B.nic1", "B.x1", "B.g1"]
    assert _walk(g, t, g.index("A.g0"), g.index("B.g1")) == expect
    # intra-server traffic stays inside (never out through a NIC and back)
    assert _walk(g, t, g.index("A.g0"), g.index("A.g1")) == ["A.g0", "A.x0", "A.root", "A.x1", "A.g1"]
    # r0 never routes toward B.g1 through server A or B.nic0
    r0 = t[g.index("B.g1")][g.index("r0")]
    assert [(g.links[i].a, g.links[i].b) for i in r0] == [("r0", "r1")]


def test_serves_must_name_hosts_of_the_zone():
    nodes = [GraphNode("a", HOST, zone="A"), GraphNode("n", SWITCH, zone="B", serves=("a",))]
    with pytest.raises(ScenarioError, match=r"nodes\[1\]\.serves"):
        make_graph(nodes, [GraphLink("a", "n", 1e9, 0.0)])


@pytest.mark.parametrize("name", ["h4", "a100-fattree", "leafspine:3,2,4"])
def test_shared_searches_equal_one_search_per_destination(name):
    """routing_tables shares searches (per port, per leaf); the result must equal plain per-host searches."""
    from hetero_ns3.topology import resolve_topology
    from hetero_ns3.topology.routing import _Router

    g = resolve_topology(name)
    fast = routing_tables(g)
    router = _Router(g)
    for d in g.host_indices():
        assert [sorted(x) for x in fast[d]] == [sorted(x) for x in router.next_hops(d)]


@pytest.mark.parametrize("preset", ["h100-fattree", "dgx-h100-rail", "mixed-2node"])
def test_packed_routing_tables_hold_the_same_next_hops(preset):
    from pathlib import Path

    from hetero_ns3.topology import build_graph, load_cluster

    g = build_graph(load_cluster(Path(__file__).resolve().parents[2] / "topologies" / f"{preset}.toml"))
    tables = routing_tables(g)
    packed = packed_routing_tables(g)
    assert packed.hosts.tolist() == list(tables)
    for s, d in enumerate(packed.hosts.tolist()):
        for u in range(len(g.nodes)):
            o, c = int(packed.off[s, u]), int(packed.count[s, u])
            assert packed.links[o : o + c].tolist() == tables[d][u]


def test_table_searches_are_shared_per_topology_while_the_graph_lives():
    """The planner's and the backends' tables come from one set of searches per topology (by content)."""
    import gc

    from hetero_ns3.topology import resolve_topology
    from hetero_ns3.topology.routing import _PARTS, shared_table_parts

    gc.collect()
    before = len(_PARTS)
    g = resolve_topology("leafspine:3,2,4")
    first = shared_table_parts(g)
    assert shared_table_parts(g) is first
    twin = resolve_topology("leafspine:3,2,4")  # another object with the same nodes and links
    assert twin is not g and shared_table_parts(twin) is first
    assert routing_tables(g) == routing_tables(twin)
    del g, twin, first
    gc.collect()
    assert len(_PARTS) == before  # dropped with the graph
