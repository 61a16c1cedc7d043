"""Cluster descriptions: presets, GPU naming, intra-node fabrics and their routes."""

from __future__ import annotations

from collections import Counter

import pytest

from hetero_ns3.paths import preset_dir
from hetero_ns3.topology import bisection_bandwidth, build_graph, ecmp_path_count, load_cluster, parse_cluster
from hetero_ns3.topology.loader import pcie_rate_bps
from hetero_ns3.topology.routing import routing_tables

PRESETS = sorted(p.stem for p in preset_dir("topologies").glob("*.toml"))
LEVELS = {
    # level: {gpu type: GPUs}
    "h0": {"H100-SXM": 128},
    "h1": {"H100-SXM": 96, "A100-SXM-80GB": 32},
    "h2": {"H100-SXM": 64, "A100-SXM-80GB": 64},
    "h3": {"H100-SXM": 64, "A100-SXM-80GB": 32, "L40S": 32},
    "h4": {"H100-SXM": 32, "A100-SXM-80GB": 32, "L40S": 32, "A100-PCIe-80GB": 32},
}


def paths(graph, tables, src, dst, limit=10_000):
    """All ECMP paths src -> dst as lists of node indices."""
    out, stack = [], [(src, [src])]
    while stack and len(out) < limit:
        u, p = stack.pop()
        if u == dst:
            out.append(p)
            continue
        for li in tables[dst][u]:
            link = graph.links[li]
            v = graph.index(link.b) if graph.index(link.a) == u else graph.index(link.a)
            assert v not in p, "routing loop"
            stack.append((v, p + [v]))
    return out


def test_required_presets_exist():
    for name in ("h0", "h1", "h2", "h3", "h4", "dgx-h100-rail", "a100-fattree"):
        assert name in PRESETS


NIC_TBPS = {"h0": 51.2, "h1": 44.8, "h2": 38.4, "h3": 33.6, "h4": 22.4}  # docs/heterogeneity.md


@pytest.mark.parametrize("level", sorted(LEVELS))
def test_levels_gpu_mix(level):
    c = load_cluster(level)
    assert c.node_count == 16
    nic_bps = sum(g.count * g.nics.count * g.nics.rate_bps for g in c.groups)
    assert nic_bps == pytest.approx(NIC_TBPS[level] * 1e12)
    assert dict(Counter(g.gpu_type for g in c.gpus())) == LEVELS[level]
    g = build_graph(c)
    assert g.gpu_names() == [x.name for x in c.gpus()]
    assert Counter(n.gpu_type for n in g.nodes if n.kind == "host" and n.role == "gpu") == Counter(LEVELS[level])


def test_gpu_info_fields():
    c = load_cluster("h3")
    gpus = {g.name: g for g in c.gpus()}
    assert len(gpus) == 128
    g = gpus["n3.g5"]
    assert (g.node, g.local_index, g.gpu_type, g.group, g.nic, g.nic_rate_bps, g.rail) == (
        3,
        5,
        "H100-SXM",
        "h100",
        "n3.nic5",
        400e9,
        5,
    )
    l40s = gpus["n12.g6"]
    assert (l40s.gpu_type, l40s.nic, l40s.nic_rate_bps, l40s.rail) == ("L40S", "n12.nic1", 200e9, 4)
    assert (g.fabric, g.nvlink_rate_bps, l40s.fabric, l40s.nvlink_rate_bps) == ("nvswitch", 3.6e12, "pcie", 0.0)
    assert l40s.pcie_rate_bps == pytest.approx(pcie_rate_bps(4, 16))


def test_dgx_h100_element_counts():
    g = build_graph(load_cluster("dgx-h100-rail"))
    roles = Counter(n.role for n in g.nodes)
    assert roles == {"gpu": 128, "nvswitch": 16, "pcie-switch": 128, "nic": 128, "rail": 8, "spine": 8, "nvls": 16}
    kinds = Counter((link.kind, link.rate_bps) for link in g.links)
    assert kinds[("nvlink", 3.6e12)] == 128  # 450 GB/s per GPU per direction
    assert kinds[("nvlink", 8 * 3.6e12)] == 16  # NVSwitch to its NVLS endpoint: all 8 ports together
    assert kinds[("pcie", pcie_rate_bps(5, 16))] == 256  # GPU and NIC to their PCIe switch
    assert kinds[("network", 400e9)] == 128
    assert kinds[("network", 800e9)] == 8 * 8  # 16 x 400G down per rail switch, 1:1 -> 8 x 800G up
    assert bisection_bandwidth(g) == pytest.approx(64 * 400e9)


def test_pcie_rate_closed_form():
    assert pcie_rate_bps(4, 16) == pytest.approx(16e9 * 16 * 128 / 130)  # ~31.5 GB/s
    assert pcie_rate_bps(5, 16) / 8 == pytest.approx(63.0e9, rel=0.01)


@pytest.mark.parametrize("name", PRESETS)
def test_all_pairs_reachable_and_loop_free(name):
    g = build_graph(load_cluster(name))
    tables = routing_tables(g)
    hosts = g.gpu_indices()  # NVLS endpoints are reachable inside their node only
    for d in hosts:
        for s in hosts:
            if s != d:
                assert tables[d][s], f"{g.nodes[s].name} has no route to {g.nodes[d].name}"
    # walk a sample of pairs fully (loops would assert)
    for s in hosts[::13]:
        for d in hosts[::7]:
            if s != d:
                assert paths(g, tables, s, d)


@pytest.mark.parametrize("name", ["h3", "h4", "a100-fattree"])
def test_routes_respect_servers(name):
    """Intra-node traffic stays in the node (NVLink if any); inter-node uses both GPUs' own NICs."""
    c = load_cluster(name)
    g = build_graph(c)
    tables = routing_tables(g)
    info = {x.name: x for x in c.gpus()}
    hosts = g.gpu_indices()
    for s in hosts[::5]:
        for d in hosts[::3]:
            if s == d:
                continue
            a, b = info[g.nodes[s].name], info[g.nodes[d].name]
            for p in paths(g, tables, s, d):
                names = [g.nodes[i].name for i in p]
                zones = {g.nodes[i].zone for i in p}
                if a.node == b.node:
                    assert zones == {f"n{a.node}"}, names
                    if a.group in ("h100", "a100"):  # NVSwitch nodes: one NVLink hop each way
                        assert names == [a.name, f"n{a.node}.nvsw", b.name]
                else:
                    nics = [n for n in names if ".nic" in n]
                    assert nics == [a.nic, b.nic], names
                    assert zones <= {f"n{a.node}", f"n{b.node}", ""}


def test_intra_node_prefers_nvlink_over_pcie():
    g = build_graph(load_cluster("h0"))
    t = routing_tables(g)
    p = paths(g, t, g.index("n2.g1"), g.index("n2.g6"))
    assert [[g.nodes[i].name for i in q] for q in p] == [["n2.g1", "n2.nvsw", "n2.g6"]]


def test_pcie_node_crosses_root_complex():
    g = build_graph(load_cluster("h3"))
    t = routing_tables(g)
    (p,) = paths(g, t, g.index("n13.g1"), g.index("n13.g6"))
    assert [g.nodes[i].name for i in p] == ["n13.g1", "n13.pcie0", "n13.cpu", "n13.pcie1", "n13.g6"]


@pytest.mark.parametrize("name", ["h0", "h2", "dgx-h100-rail"])
def test_rail_same_rail_never_crosses_spine(name):
    c = load_cluster(name)
    g = build_graph(c)
    t = routing_tables(g)
    info = [(g.index(x.name), x) for x in c.gpus()]
    for s, a in info[::3]:
        for d, b in info:
            if a.node != b.node and a.rail == b.rail:
                for p in paths(g, t, s, d):
                    roles = [g.nodes[i].role for i in p]
                    assert "spine" not in roles
                    assert roles.count("rail") == 1


def test_rail_cross_rail_ecmp_over_spines():
    g = build_graph(load_cluster("h0"))
    t = routing_tables(g)
    assert ecmp_path_count(g, t, g.index("n0.g0"), g.index("n9.g3")) == 8
    assert ecmp_path_count(g, t, g.index("n0.g0"), g.index("n9.g0")) == 1


def test_mixed_nic_speeds_share_rail_switch():
    g = build_graph(load_cluster("h4"))
    rates = Counter(link.rate_bps for link in g.links if link.kind == "network" and link.b == "rail0.0")
    assert rates == {400e9: 4, 200e9: 8, 100e9: 4}


def test_multi_pod_rail_cluster():
    """Two pods of 4 nodes: same rail in a pod = one rail switch; same rail across pods crosses a spine."""
    data = {
        "name": "pods",
        "groups": [
            {
                "name": "h",
                "count": 8,
                "gpu": "H100-SXM",
                "fabric": {"kind": "nvswitch"},
                "nics": {"count": 8, "rate": "400Gbps"},
            }
        ],
        "network": {"kind": "rail", "nodes_per_pod": 4, "rail": {"uplink_rate": "400Gbps"}},
    }
    g = build_graph(parse_cluster(data))
    roles = Counter(n.role for n in g.nodes)
    assert roles["rail"] == 16 and roles["spine"] == 4  # 2 pods x 8 rails; 4 x 400G down -> 4 uplinks
    t = routing_tables(g)
    (p,) = paths(g, t, g.index("n0.g3"), g.index("n3.g3"))
    assert [g.nodes[i].role for i in p].count("spine") == 0
    cross = paths(g, t, g.index("n0.g3"), g.index("n4.g3"))
    assert len(cross) == 4 and all([g.nodes[i].role for i in q].count("spine") == 1 for q in cross)
    assert bisection_bandwidth(g) == pytest.approx(16 * 400e9 * 2)  # 32 NICs per half, all through spines


def test_oversubscribed_leafspine_preset_bisection():
    g = build_graph(load_cluster("h100-leafspine-2to1"))
    assert bisection_bandwidth(g) == pytest.approx(64 * 400e9 / 2)  # half the NICs, 2:1 at the leaves


def test_topology_plot_counts_gpus_apart_from_nvls_endpoints(tmp_path):
    """`topo show h3 --plot` labelled its bottom row "gpu (136)": the 8 NVSwitches' NVLS endpoints (hosts that
    are not GPUs) were drawn and counted with the 128 GPUs."""
    from hetero_ns3.topology.plot import layer_rows, plot_topology, row_label

    graph = build_graph(load_cluster("h3"))
    labels = {row_label(graph, members) for members in layer_rows(graph).values()}
    assert {"gpu (128)", "nvls (8)"} <= labels, labels  # NVLS on the H100 nodes' NVSwitches
    assert plot_topology(graph, tmp_path / "h3.png").read_bytes()[:4] == b"\x89PNG"
