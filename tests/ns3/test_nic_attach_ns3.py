"""``fabric.nic_attach``: a single flow between two servers gives the store-and-forward answer both ways.

Direct attach: 2 links (GPU - rail switch - GPU) at 200 Gb/s, each with the access delay plus two PCIe
delays. Detailed (``pcie``): 6 links, the PCIe ones at 252 Gb/s (PCIe 4.0 x16) except the GPU's send side
of its own PCIe link, which the backend paces at the NIC's 200 Gb/s (``network/ns3/pacing.py``). A frame
pays its serialization on every link but the last before the pipeline fills, so the two FCTs differ by
one NIC-rate and three PCIe serializations of one frame, while the bulk (the size over the 200 Gb/s
bottleneck) is the same. With the endpoint paced at the NIC rate a lone flow builds no queue in front of
the NIC port: no ECN mark, no CNP, and its queue pair's line rate (DCQCN's Rt) is the NIC's.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from hetero_ns3.topology import build_graph, parse_cluster
from hetero_ns3.topology.loader import pcie_rate_bps

pytestmark = pytest.mark.ns3

NIC = 200e9
PCIE = pcie_rate_bps(4, 16)
ACCESS, PCIE_DELAY = 1e-6, 100e-9
SEG, HDR = 4096, 62
SIZE = 2_000_000
BIG = 8_000_000  # enough to queue above the ECN threshold (800 KB at 200 Gb/s) were the endpoint at PCIe rate


def _graph(attach: str, gpus: int = 2):
    data = {
        "name": "pair",
        "groups": [
            {
                "name": "a",
                "count": 2,
                "gpu": "A100-SXM-80GB",
                "gpus_per_node": gpus,
                "fabric": {"kind": "nvswitch", "pcie_gen": 4, "pcie_delay": "100ns", "nic_attach": attach},
                "nics": {"count": gpus, "rate": "200Gbps"},
            }
        ],
        "network": {"kind": "rail", "access_delay": "1us"},
    }
    return build_graph(parse_cluster(data))


def _ideal(links: list[tuple[float, float]]) -> float:
    """Pipelined store-and-forward over ``links`` (rate bit/s, delay s): the bottleneck carries every byte,
    every other link delays the pipeline by one frame's serialization."""
    frames = math.ceil(SIZE / SEG)
    wire = SIZE + frames * HDR
    slow = min(r for r, _ in links)
    frame = SEG + HDR
    return wire * 8 / slow + sum(frame * 8 / r for r, _ in links) - frame * 8 / slow + sum(d for _, d in links)


@pytest.mark.parametrize("attach", ["direct", "pcie"])
def test_single_flow_fct_is_the_store_and_forward_answer(capi, attach):
    from hetero_ns3.network.config import CcConfig, NetworkConfig
    from hetero_ns3.network.ns3.roce import simulate_flows

    graph = _graph(attach)
    flows = pd.DataFrame({"src": ["n0.g1"], "dst": ["n1.g1"], "size_bytes": [SIZE], "start_s": [10e-6]})
    res = simulate_flows(graph, flows, NetworkConfig(cc=CcConfig(kind="none")))
    if attach == "direct":
        links = [(NIC, ACCESS + 2 * PCIE_DELAY)] * 2
    else:
        links = [(NIC, PCIE_DELAY), (PCIE, PCIE_DELAY)] + [(NIC, ACCESS)] * 2 + [(PCIE, PCIE_DELAY)] * 2
    assert float(res.flows["fct_s"][0]) == pytest.approx(_ideal(links), rel=0.005)
    assert res.ports["drops_total"].sum() == 0


def test_direct_and_detailed_differ_by_the_pcie_serializations(capi):
    """Same path latency (delays moved, not dropped): the FCTs differ by the extra frame times of the detailed
    path, one at the NIC rate (the paced GPU side) and three at the PCIe rate (0.56 us in all)."""
    from hetero_ns3.network.config import CcConfig, NetworkConfig
    from hetero_ns3.network.ns3.roce import simulate_flows

    flows = pd.DataFrame({"src": ["n0.g0"], "dst": ["n1.g0"], "size_bytes": [SIZE], "start_s": [0.0]})
    cfg = NetworkConfig(cc=CcConfig(kind="none"))
    fct = {a: float(simulate_flows(_graph(a), flows, cfg).flows["fct_s"][0]) for a in ("pcie", "direct")}
    extra = (SEG + HDR) * 8 / NIC + 3 * (SEG + HDR) * 8 / PCIE
    assert fct["pcie"] - fct["direct"] == pytest.approx(extra, rel=0.05)


@pytest.mark.parametrize("cc", ["dcqcn", "none"])
def test_pcie_endpoint_paces_at_the_nic_rate(capi, cc):
    """DCQCN (the default) or none, detailed segment: two 4 MB flows from one GPU to one peer share the GPU's
    endpoint at the NIC rate (no queue at the NIC port: no ECN mark, no CNP, no pause) and finish at the
    store-and-forward answer for their summed bytes (within 0.5 %). Unpaced (the endpoint at PCIe's
    252 Gb/s), 1.6 MB queued at the NIC port, it got 11 ECN marks and CNPs and finished 70 % late."""
    from hetero_ns3.network.config import CcConfig, NetworkConfig
    from hetero_ns3.network.ns3.roce import simulate_flows

    flows = pd.DataFrame(
        {"src": ["n0.g1"] * 2, "dst": ["n1.g1"] * 2, "size_bytes": [BIG // 2] * 2, "start_s": [10e-6] * 2}
    )
    res = simulate_flows(_graph("pcie"), flows, NetworkConfig(cc=CcConfig(kind=cc)))
    assert res.completed == 2
    assert res.ports["ecn_marks"].sum() == 0
    assert res.flows["cnps"].sum() == 0
    assert res.ports["drops_total"].sum() == 0 and res.ports["paused_s"].sum() == 0
    frame = (SEG + HDR) * 8
    wire = BIG * 8 + 2 * math.ceil(BIG // 2 / SEG) * HDR * 8
    # bulk at the NIC rate, one frame per hop but the bottleneck (the GPU side paced at the NIC rate), delays
    ideal = wire / NIC + 2 * frame / NIC + 3 * frame / PCIE + 2 * ACCESS + 4 * PCIE_DELAY
    assert float(res.flows["finish_s"].max()) - 10e-6 == pytest.approx(ideal, rel=0.005)


def test_dcqcn_line_rate_is_the_nic_rate(native):
    """A queue pair on the detailed segment starts DCQCN with Rc = Rt = the NIC's 200 Gb/s (not PCIe's 252)."""
    from hetero_ns3.network.config import CcConfig, NetworkConfig
    from hetero_ns3.network.ns3.roce import simulate_flows

    flows = pd.DataFrame({"src": ["n0.g0"], "dst": ["n1.g0"], "size_bytes": [SIZE], "start_s": [0.0]})
    res = simulate_flows(_graph("pcie"), flows, NetworkConfig(cc=CcConfig(kind="dcqcn")), trace_cc=True)
    t = res.cc_trace
    first = t.sort_values("time_s", kind="stable").groupby("kind")["value"].first()
    assert first["rate"] == pytest.approx(NIC, rel=1e-9)
    assert first["target_rate"] == pytest.approx(NIC, rel=1e-9)
    assert res.ports.set_index("node").loc["n0.g0"].query("kind == 'pcie'")["rate_bps"].item() == NIC


def test_hpcc_global_base_rtt_is_the_paced_paths_rtt(capi):
    """HPCC's network-wide T (``network/ns3/base_rtt.py``) equals C++'s own base RTT of a cross-server flow
    on the detailed segment, where the GPU's PCIe port serializes at the NIC rate (within C++'s whole-ns
    rounding per hop); before, T charged that hop at the PCIe rate, 0.04 us short."""
    from hetero_ns3.network.config import CcConfig, NetworkConfig
    from hetero_ns3.network.ns3.base_rtt import network_base_rtt
    from hetero_ns3.network.ns3.roce import simulate_flows

    g = _graph("pcie", gpus=1)  # one cross-server pair: T is its RTT
    cfg = NetworkConfig(cc=CcConfig(kind="hpcc"))
    flows = pd.DataFrame({"src": ["n0.g0"], "dst": ["n1.g0"], "size_bytes": [SIZE], "start_s": [0.0]})
    res = simulate_flows(g, flows, cfg)
    assert res.completed == 1
    assert network_base_rtt(g, cfg) == pytest.approx(float(res.flows["base_rtt_s"].iloc[0]), abs=6e-9)


def test_direct_ports_keep_the_ecmp_contract(capi):
    """Cross-rail flows from GPUs that are their own network port: the packet backend's switches and the
    flow level's copy of their hash put every flow on the same directed links (as tests/ns3/test_ecmp_contract.py)."""
    from hetero_ns3.network.analytic import AnalyticConfig
    from hetero_ns3.network.analytic.routes import link_arrays, route_flows
    from hetero_ns3.network.config import NetworkConfig
    from hetero_ns3.network.ns3.roce import simulate_flows

    data = {
        "name": "quad",
        "groups": [
            {
                "name": "a",
                "count": 4,
                "gpu": "A100-SXM-80GB",
                "gpus_per_node": 4,
                "fabric": {"kind": "nvswitch", "nic_attach": "direct"},
                "nics": {"count": 4, "rate": "200Gbps"},
            }
        ],
        "network": {"kind": "rail"},
    }
    g = build_graph(parse_cluster(data))
    src = [f"n{i}.g{j}" for i in range(4) for j in range(4)]
    dst = [f"n{(i + 1) % 4}.g{(j + 1) % 4}" for i in range(4) for j in range(4)]  # other node, other rail
    size = 40_000
    flows = pd.DataFrame({"src": src, "dst": dst, "size_bytes": size, "start_s": [1e-6 * k for k in range(16)]})
    packet = simulate_flows(g, flows, NetworkConfig(), seed=1)
    assert packet.flows["finish_s"].notna().all()
    acfg = AnalyticConfig(ecmp_hash="packet", ecmp_key="flow")
    nodes = np.array([g.index(s) for s in src]), np.array([g.index(d) for d in dst])
    paths = route_flows(g, link_arrays(g, acfg), *nodes, np.arange(16), np.full(16, size), acfg, seed=0)
    per_port = np.zeros(2 * len(g.links), np.int64)
    for row, hops in zip(paths.paths, paths.hops, strict=True):
        assert hops == 4  # GPU - rail - spine - rail - GPU
        np.add.at(per_port, row[:hops], 1)
    tx = packet.ports.set_index("port")["tx_data_bytes"].reindex(range(2 * len(g.links)), fill_value=0).to_numpy()
    one = tx[per_port == 1]
    assert one.size and np.all(one == one[0])
    np.testing.assert_array_equal(np.rint(tx / one[0]).astype(np.int64), per_port)


@pytest.mark.parametrize(("new_rate", "bottleneck"), [(PCIE, NIC), (100e9, 100e9)])
def test_a_link_rate_change_keeps_the_nic_cap(capi, new_rate, bottleneck):
    """A rate fault on the paced GPU - PCIe switch link sets min(new rate, NIC rate) on the GPU's side: back at
    the full PCIe rate the endpoint still paces at 200 Gb/s (no ECN mark); at 100 Gb/s that is the bottleneck."""
    from hetero_ns3.network.config import NetworkConfig
    from hetero_ns3.network.flows_io import flow_arrays
    from hetero_ns3.network.ns3.roce import egress_port, make_engine, make_network

    graph = _graph("pcie")
    link = egress_port(graph, "n0.g1", "n0.pcie1") // 2
    flows = flow_arrays(
        graph, pd.DataFrame({"src": ["n0.g1"], "dst": ["n1.g1"], "size_bytes": [BIG], "start_s": [10e-6]})
    )
    eng = make_engine("capi")
    net = make_network(eng, graph, NetworkConfig(), seed=1)
    try:
        net.set_link_rate(link, new_rate, 5e-6)
        net.add_flows(flows.src, flows.dst, flows.size_bytes, flows.priority, flows.start_s)
        net.run(0.0)
        finish = float(net.read("flow_finish")[0])
        marks = int(net.read("port:ecn_marks").sum())
    finally:
        eng.destroy()
        net.free()
    wire = (BIG + math.ceil(BIG / SEG) * HDR) * 8
    assert marks == 0
    assert finish - 10e-6 == pytest.approx(wire / bottleneck, rel=0.01)
