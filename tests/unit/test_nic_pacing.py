"""Which GPU ports the packet backend paces at their NIC's rate (``network/ns3/pacing.py``; no simulator).

A GPU with a NIC of its own (the segment ``nic_attach = "direct"`` folds) sends at min(PCIe, NIC rate) on
its side of its PCIe link; GPUs that share a NIC, or talk over PCIe, keep the PCIe rate.
"""

from __future__ import annotations

import pytest

from hetero_ns3.network.ns3.pacing import nic_paced_ports, port_rates
from hetero_ns3.topology import build_graph, load_cluster, parse_cluster
from hetero_ns3.topology.fabric import private_pcie_switches, with_nic_attach
from hetero_ns3.topology.loader import pcie_rate_bps


def _cluster(nics: int = 4, attach: str = "pcie", rate: str = "200Gbps") -> dict:
    return {
        "name": "t",
        "groups": [
            {
                "name": "a",
                "count": 2,
                "gpu": "A100-SXM-80GB",
                "gpus_per_node": 4,
                "fabric": {"kind": "nvswitch", "pcie_gen": 4, "nic_attach": attach},
                "nics": {"count": nics, "rate": rate},
            }
        ],
        "network": {"kind": "rail"},
    }


def _paced(g) -> dict[str, float]:
    """``{GPU name: cap}`` with a check that every paced port is the GPU end of a GPU - PCIe switch link."""
    ports, rates = nic_paced_ports(g)
    out = {}
    for p, r in zip(ports.tolist(), rates.tolist(), strict=True):
        lk = g.links[p // 2]
        node = lk.a if p % 2 == 0 else lk.b
        assert lk.kind == "pcie" and g.nodes[g.index(node)].role == "gpu"
        out[node] = r
    return out


def test_one_gpu_per_nic_paces_every_gpu_at_the_nic_rate():
    g = build_graph(parse_cluster(_cluster()))
    assert _paced(g) == {f"n{i}.g{j}": 200e9 for i in range(2) for j in range(4)}
    rates = port_rates(g)
    for li, lk in enumerate(g.links):
        if lk.tier == "gpu-pcie":  # GPU side capped, PCIe switch side (toward the GPU) at the PCIe rate
            assert (rates[2 * li], rates[2 * li + 1]) == (200e9, pcie_rate_bps(4, 16))
        else:
            assert rates[2 * li] == rates[2 * li + 1] == lk.rate_bps


def test_nic_faster_than_pcie_caps_nothing():
    assert _paced(build_graph(parse_cluster(_cluster(rate="400Gbps")))) == {}  # 400G NIC behind PCIe 4.0 x16


def test_shared_nics_and_direct_ports_are_left_alone():
    assert _paced(build_graph(parse_cluster(_cluster(nics=2)))) == {}  # two GPUs per NIC: today's model
    assert _paced(build_graph(parse_cluster(_cluster(attach="direct")))) == {}  # no PCIe hop to cap


def test_mixed_cluster_paces_exactly_the_private_segments():
    """h4: H100 (Gen5 x16, 400G NICs) and A100 (Gen4, 200G) NVSwitch groups paced; PCIe-node groups not."""
    c = load_cluster("h4")
    g = build_graph(c)
    paced = _paced(g)
    want = {}
    for node, group in c.node_groups():
        if private_pcie_switches(group):
            cap = min(group.nics.rate_bps, group.fabric.pcie_rate_bps)
            want.update({f"n{node}.g{j}": cap for j in range(group.gpus_per_node)})
    assert want and paced == pytest.approx(want)
    assert set(paced.values()) == {400e9, 200e9}
    assert _paced(build_graph(with_nic_attach(c, "direct", "cluster.nic_attach"))) == {}
