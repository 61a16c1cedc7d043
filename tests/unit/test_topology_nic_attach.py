"""``fabric.nic_attach = "direct"``: a GPU with a private PCIe switch and NIC is its own network port."""

from __future__ import annotations

import math
from collections import Counter

import pandas as pd
import pytest
from test_topology_cluster import paths

from hetero_ns3.errors import ScenarioError
from hetero_ns3.topology import bisection_bandwidth, build_graph, load_cluster, parse_cluster
from hetero_ns3.topology.fabric import private_pcie_switches, resolve_nic_attach, with_nic_attach
from hetero_ns3.topology.loader import pcie_rate_bps
from hetero_ns3.topology.routing import routing_tables, shortest_path_next_hops


def _cluster(nic_rate: str = "200Gbps", attach: str = "direct", nodes: int = 2, **fabric) -> dict:
    return {
        "name": "t",
        "groups": [
            {
                "name": "a",
                "count": nodes,
                "gpu": "A100-SXM-80GB",
                "gpus_per_node": 4,
                "fabric": {"kind": "nvswitch", "pcie_gen": 4, "nic_attach": attach, **fabric},
                "nics": {"count": 4, "rate": nic_rate},
            }
        ],
        "network": {"kind": "rail", "access_delay": "1us"},
    }


def test_direct_graph_has_one_access_link_per_gpu_at_the_nic_rate():
    g = build_graph(parse_cluster(_cluster()))
    roles = Counter(n.role for n in g.nodes)
    assert roles == {"gpu": 8, "nvswitch": 2, "rail": 4, "spine": 2}  # no pcie-switch, no nic
    assert Counter(link.kind for link in g.links) == {"nvlink": 8, "network": 8 + 4 * 2}
    for node in range(2):
        for j in range(4):
            name = f"n{node}.g{j}"
            assert g.nodes[g.index(name)].serves == (name,)
            (acc,) = [lk for lk in g.links if lk.a == name and lk.kind == "network"]
            assert acc.b == f"rail0.{j}"
            assert acc.rate_bps == 200e9  # below PCIe 4.0 x16 (252 Gb/s): the NIC rate
            assert acc.delay_s == pytest.approx(1e-6 + 2 * 100e-9)  # access + GPU-switch + switch-NIC
            assert acc.tier == "nic-rail"


def test_gpu_info_names_the_port_node():
    c = parse_cluster(_cluster())
    g = build_graph(c)
    for info in c.gpus():
        assert info.nic == info.name and g.index(info.nic) >= 0
        assert info.nic_rate_bps == 200e9 and info.rail == info.local_index
    assert [x.nic for x in parse_cluster(_cluster(attach="pcie")).gpus()][:2] == ["n0.nic0", "n0.nic1"]


def test_direct_caps_the_port_at_the_pcie_rate():
    g = build_graph(parse_cluster(_cluster("400Gbps", pcie_delay="150ns")))
    acc = next(lk for lk in g.links if lk.a == "n0.g0" and lk.kind == "network")
    assert acc.rate_bps == pytest.approx(pcie_rate_bps(4, 16))  # 252 Gb/s < 400 Gb/s
    assert acc.delay_s == pytest.approx(1e-6 + 2 * 150e-9)


def test_pcie_default_keeps_the_detailed_segment():
    g = build_graph(parse_cluster(_cluster(attach="pcie")))
    roles = Counter(n.role for n in g.nodes)
    assert roles["pcie-switch"] == 8 and roles["nic"] == 8
    tables = routing_tables(g)
    (p,) = paths(g, tables, g.index("n0.g1"), g.index("n1.g1"))
    assert [g.nodes[i].name for i in p] == ["n0.g1", "n0.pcie1", "n0.nic1", "rail0.1", "n1.nic1", "n1.pcie1", "n1.g1"]


def test_direct_routes_same_rail_cross_rail_and_inside_the_node():
    g = build_graph(parse_cluster(_cluster()))
    tables = routing_tables(g)
    for d in g.host_indices():  # the shared-search fast path equals the plain search
        assert tables[d] == shortest_path_next_hops(g, d)
    name = lambda p: [g.nodes[i].name for i in p]  # noqa: E731
    assert [name(p) for p in paths(g, tables, g.index("n0.g1"), g.index("n1.g1"))] == [["n0.g1", "rail0.1", "n1.g1"]]
    cross = paths(g, tables, g.index("n0.g1"), g.index("n1.g2"))
    assert len(cross) == 2 and all(
        name(p)[:2] == ["n0.g1", "rail0.1"] and name(p)[-2:] == ["rail0.2", "n1.g2"] for p in cross
    )
    assert [name(p) for p in paths(g, tables, g.index("n0.g0"), g.index("n0.g3"))] == [["n0.g0", "n0.nvsw", "n0.g3"]]


def test_direct_keeps_the_bisection():
    pcie = build_graph(parse_cluster(_cluster(attach="pcie", nodes=4)))
    direct = build_graph(parse_cluster(_cluster(nodes=4)))
    assert bisection_bandwidth(direct) == pytest.approx(bisection_bandwidth(pcie))


def test_override_applies_where_it_can_and_keeps_the_rest():
    """h4: NVSwitch groups (one GPU per NIC) go direct; PCIe groups (GPUs share NICs, root complex) keep detail."""
    c = load_cluster("h4")
    direct = with_nic_attach(c, "direct", "cluster.nic_attach")
    assert [g.fabric.nic_attach for g in direct.groups] == [
        "direct" if private_pcie_switches(g) else "auto" for g in c.groups
    ]
    assert {g.fabric.kind for g in direct.groups if g.fabric.nic_attach == "direct"} == {"nvswitch"}
    assert any(g.fabric.nic_attach == "auto" for g in direct.groups)
    g = build_graph(direct)
    tables = routing_tables(g)
    hosts = g.gpu_indices()
    for s in hosts[::11]:
        for d in hosts[::5]:
            if s != d:
                assert paths(g, tables, s, d)  # reachable and loop-free (paths asserts on loops)
    assert bisection_bandwidth(g) == pytest.approx(bisection_bandwidth(build_graph(c)))


def test_bad_values_name_the_field_and_the_fix():
    with pytest.raises(
        ScenarioError, match=r"groups\[0\]\.fabric\.nic_attach \('nic'\) is not a valid choice.*'direct'"
    ):
        parse_cluster(_cluster(attach="nic"))
    shared = _cluster()
    shared["groups"][0]["nics"] = {"count": 2, "rate": "200Gbps"}  # two GPUs per NIC
    with pytest.raises(
        ScenarioError, match=r"groups\[0\]\.fabric\.nic_attach \('direct'\) needs a PCIe switch.*use 'pcie'"
    ):
        parse_cluster(shared)
    with pytest.raises(ScenarioError, match=r"cluster\.nic_attach \('fast'\) is not a valid choice"):
        with_nic_attach(load_cluster("h0"), "fast", "cluster.nic_attach")
    pcie_only = load_cluster("h4")
    pcie_only = type(pcie_only)(
        pcie_only.name, tuple(g for g in pcie_only.groups if g.fabric.kind == "pcie"), pcie_only.network
    )
    with pytest.raises(ScenarioError, match=r"cluster\.nic_attach \('direct'\) applies to no group"):
        with_nic_attach(pcie_only, "direct", "cluster.nic_attach")


def test_scenario_section_checks_the_value():
    from hetero_ns3.scenario import scenario_from_dict

    assert scenario_from_dict({"cluster": {"topology": "h0", "nic_attach": "direct"}}).cluster.nic_attach == "direct"
    with pytest.raises(ScenarioError, match=r"cluster\.nic_attach \('yes'\) is not a valid choice"):
        scenario_from_dict({"cluster": {"topology": "h0", "nic_attach": "yes"}})
    inline = {"groups": [{"gpu_type": "H100-SXM", "nodes": 1}], "nic_attach": "direct"}
    with pytest.raises(ScenarioError, match=r"cluster\.nic_attach \('direct'\) needs a network topology"):
        scenario_from_dict({"cluster": inline})


def test_flow_level_backend_gives_the_store_and_forward_answer():
    """The analytic backend routes on the same graph: bytes and headers over the 200 Gb/s port, plus one
    frame's serialization on each other link and the propagation delays (same formula as the packet test)."""
    from hetero_ns3.network.analytic.api import simulate_flows

    size, seg, hdr = 2_000_000, 4096, 62
    frame, wire = (seg + hdr) * 8, (size + math.ceil(size / seg) * hdr) * 8
    flows = pd.DataFrame({"src": ["n0.g1"], "dst": ["n1.g1"], "size_bytes": [size], "start_s": [0.0]})
    fct = {
        a: float(simulate_flows(build_graph(parse_cluster(_cluster(attach=a))), flows)["fct_s"][0])
        for a in ("pcie", "direct")
    }
    base = wire / 200e9 + frame / 200e9 + 2 * 1e-6
    assert fct["direct"] == pytest.approx(base + 4 * 100e-9, rel=0.002)
    assert fct["pcie"] == pytest.approx(base + 4 * 100e-9 + 4 * frame / pcie_rate_bps(4, 16), rel=0.002)


def test_a_host_may_serve_only_itself():
    from hetero_ns3.topology.graph import GraphLink, GraphNode, make_graph

    nodes = [GraphNode("n0.g0", "host", zone="n0", serves=("n0.g0",)), GraphNode("sw", "switch")]
    assert make_graph(nodes, [GraphLink("n0.g0", "sw", 1e9, 0.0)]).nodes[0].serves == ("n0.g0",)
    bad = [GraphNode("n0.g0", "host", zone="n0", serves=("n0.g1",)), GraphNode("n0.g1", "host", zone="n0")]
    with pytest.raises(ScenarioError, match=r"nodes\[0\]\.serves \('n0.g1'\).*a host only itself"):
        make_graph(bad, [GraphLink("n0.g0", "n0.g1", 1e9, 0.0)])


def test_auto_is_direct_where_it_applies_on_the_packet_level_and_pcie_on_the_flow_level():
    """The default ``auto``: h4's NVSwitch groups (one GPU per NIC) go direct on the packet level, its PCIe
    groups (shared NICs) stay detailed without an error; the flow level keeps the detailed graph of before."""
    c = load_cluster("h4")
    assert {g.fabric.nic_attach for g in c.groups} == {"auto"}
    lean = resolve_nic_attach(c, lean=True)
    assert [g.fabric.nic_attach for g in lean.groups] == [
        "direct" if private_pcie_switches(g) else "pcie" for g in c.groups
    ]
    assert build_graph(lean) == build_graph(with_nic_attach(c, "direct", "cluster.nic_attach"))
    flow = resolve_nic_attach(c, lean=False)
    assert {g.fabric.nic_attach for g in flow.groups} == {"pcie"}
    assert build_graph(flow) == build_graph(c) == build_graph(with_nic_attach(c, "pcie", "cluster.nic_attach"))
    for value in ("pcie", "direct"):  # explicit settings are kept on either level
        explicit = with_nic_attach(c, value, "cluster.nic_attach")
        assert resolve_nic_attach(explicit, lean=True) == resolve_nic_attach(explicit, lean=False)
        assert resolve_nic_attach(explicit, lean=False).groups[0].fabric.nic_attach == value


def test_run_cluster_resolves_auto_for_its_backend(tmp_path):
    from hetero_ns3.pipeline import load_run_cluster
    from hetero_ns3.scenario import scenario_from_dict

    sc = scenario_from_dict({"cluster": {"topology": "h0"}})
    assert sc.cluster.nic_attach is None  # the resolved scenario (and study point ids) do not change
    assert {g.fabric.nic_attach for g in load_run_cluster(sc, "ns3").groups} == {"direct"}
    assert {g.fabric.nic_attach for g in load_run_cluster(sc, "analytic").groups} == {"pcie"}
    assert {g.fabric.nic_attach for g in load_run_cluster(sc).groups} == {"pcie"}
    pinned = scenario_from_dict({"cluster": {"topology": "h0", "nic_attach": "pcie"}})
    assert {g.fabric.nic_attach for g in load_run_cluster(pinned, "ns3").groups} == {"pcie"}
    auto = scenario_from_dict({"cluster": {"topology": "h0", "nic_attach": "auto"}})
    assert {g.fabric.nic_attach for g in load_run_cluster(auto, "ns3").groups} == {"direct"}


def test_topo_show_says_what_auto_becomes():
    from hetero_ns3.topology.summary import summarize

    c = load_cluster("h4")
    lines = summarize(build_graph(c), c).groups
    assert [("direct on the packet level" in line) for line in lines] == [
        bool(private_pcie_switches(g)) for g in c.groups
    ]
    pinned = with_nic_attach(c, "pcie", "cluster.nic_attach")
    assert all(line.endswith("(nic_attach pcie)") for line in summarize(build_graph(pinned), pinned).groups)


def test_collective_and_flows_commands_simulate_the_graph_run_simulates(monkeypatch):
    """`collective --backend ns3` and `flows` (packet level) resolve `auto` as `run --backend ns3` does, so a
    collective measured alone and the same collective inside a run cross the same network; the flow level,
    `model` and `closed-form` keep the detailed graph."""
    from hetero_ns3.cli.commands import collective
    from hetero_ns3.pipeline import load_run_cluster
    from hetero_ns3.scenario import scenario_from_dict
    from hetero_ns3.topology import resolve_topology

    sc = scenario_from_dict({"cluster": {"topology": "h0"}})
    assert resolve_topology("h0", nic_attach_auto="direct") == build_graph(load_run_cluster(sc, "ns3"))
    assert resolve_topology("h0") == build_graph(load_run_cluster(sc, "analytic")) == build_graph(load_cluster("h0"))
    seen = []
    real = collective.run_backend
    monkeypatch.setattr(collective, "run_backend", lambda b, g, *a: seen.append((b, g)) or real(b, g, *a))
    for backend in ("analytic", "ns3"):
        argv = ["all_reduce", "--topology", "h0", "--gpus", "16", "--sizes", "1MiB", "--backend", backend]
        assert collective.run(_parse(collective, argv)) == 0
    (b0, g0), (b1, g1) = seen
    assert (b0, b1) == ("analytic", "ns3")
    assert not any(n.name.endswith(".nic0") for n in g1.nodes) and any(n.name.endswith(".nic0") for n in g0.nodes)


def _parse(module, argv):
    import argparse

    p = argparse.ArgumentParser()
    module.add_arguments(p)
    return p.parse_args(argv)


def test_pcie_rates_per_generation():
    """Per direction, x16: Gen4 / Gen5 at 128b/130b (252 / 504 Gb/s), Gen6 the 236 TLP bytes of each 256-byte flit
    (944 Gb/s, 118 GB/s: PCI-SIG base specification 6.0)."""
    assert pcie_rate_bps(4, 16) == pytest.approx(16e9 * 16 * 128 / 130)
    assert pcie_rate_bps(5, 16) == pytest.approx(504.12e9, rel=1e-4)
    assert pcie_rate_bps(6, 16) == pytest.approx(944e9)
    assert pcie_rate_bps(6, 16) / 8e9 == pytest.approx(118.0)


def test_an_800g_nic_is_held_to_its_pcie_link_and_the_summary_says_so():
    from hetero_ns3.topology.summary import summarize

    for gen, rate, capped in ((5, pcie_rate_bps(5, 16), True), (6, 800e9, False)):
        c = parse_cluster(_cluster("800Gbps", pcie_gen=gen))
        g = build_graph(c)
        (acc,) = [lk for lk in g.links if lk.a == "n0.g0" and lk.kind == "network"]
        assert acc.rate_bps == pytest.approx(rate)
        (line,) = summarize(g, c).groups
        assert ("each NIC limited to" in line) is capped
        if capped:
            assert "504" in line and "raise pcie_gen or pcie_lanes" in line


def test_no_shipped_cluster_holds_its_nics_below_their_rate():
    """Every cluster file shipped (presets, held-out validation clusters, studies) gives each NIC a PCIe link at
    least as fast as the NIC: an 800G ConnectX-8 sits on PCIe Gen6, not Gen5 (session 40)."""
    import tomllib
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]
    files = [
        *root.glob("topologies/*.toml"),
        *root.glob("hetero_ns3/data/validation/heldout/*.toml"),
        *root.glob("scenarios/**/*.toml"),
    ]
    checked = 0
    for f in files:
        if "groups" not in tomllib.loads(f.read_text()):
            continue
        for grp in load_cluster(f).groups:
            assert grp.nics.rate_bps <= grp.fabric.pcie_rate_bps, f"{f.name}: {grp.name}"
        checked += 1
    assert checked >= 50
