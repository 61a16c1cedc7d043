"""``fabric.nic_attach``: a single flow between two servers gives the store-and-forward answer both ways.

Direct attach: 2 links (GPU - rail switch - GPU) at 200 Gb/s, each with the access delay plus two PCIe
delays. Detailed (``pcie``): 6 links, the four PCIe ones at 252 Gb/s (PCIe 4.0 x16). A frame pays its
serialization on every link but the last before the pipeline fills, so the two FCTs differ by the four
PCIe serializations of one frame, while the bulk (the size over the 200 Gb/s bottleneck) is the same.
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


def _graph(attach: str):
    data = {
        "name": "pair",
        "groups": [
            {
                "name": "a",
                "count": 2,
                "gpu": "A100-SXM-80GB",
                "gpus_per_node": 2,
                "fabric": {"kind": "nvswitch", "pcie_gen": 4, "pcie_delay": "100ns", "nic_attach": attach},
                "nics": {"count": 2, "rate": "200Gbps"},
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
        links = [(PCIE, PCIE_DELAY)] * 2 + [(NIC, ACCESS)] * 2 + [(PCIE, PCIE_DELAY)] * 2
    assert float(res.flows["fct_s"][0]) == pytest.approx(_ideal(links), rel=0.005)
    assert res.ports["drops_total"].sum() == 0


def test_direct_and_detailed_differ_by_the_pcie_serializations(capi):
    """Same path latency (delays moved, not dropped): the FCTs differ by 4 PCIe frame times (0.13 us)."""
    from hetero_ns3.network.config import CcConfig, NetworkConfig
    from hetero_ns3.network.ns3.roce import simulate_flows

    flows = pd.DataFrame({"src": ["n0.g0"], "dst": ["n1.g0"], "size_bytes": [SIZE], "start_s": [0.0]})
    cfg = NetworkConfig(cc=CcConfig(kind="none"))
    fct = {a: float(simulate_flows(_graph(a), flows, cfg).flows["fct_s"][0]) for a in ("pcie", "direct")}
    assert fct["pcie"] - fct["direct"] == pytest.approx(4 * (SEG + HDR) * 8 / PCIE, rel=0.05)


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
