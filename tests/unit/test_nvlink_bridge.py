"""NVLink-bridge fabric (two PCIe cards joined by a bridge) and NCCL's per-generation NVLink efficiency.

Sources: H100 PCIe and A100 PCIe datasheets (NVLink bridge 600 GB/s bidirectional, 300 GB/s each
direction; ``shared/reference/gpu_specs.csv``); NCCL v2.30.7 ``src/graph/topo.h`` (effective bandwidth
per NVLink: SM80 20.0, SM90 20.6, SM100 40.1 GB/s, of a 25 / 25 / 50 GB/s line rate per direction).
"""

from __future__ import annotations

import pytest

from hetero_ns3.collectives import CollectiveEnv
from hetero_ns3.errors import ScenarioError
from hetero_ns3.inputs import read_toml
from hetero_ns3.topology import build_graph, parse_cluster
from hetero_ns3.topology.fabric import NVLINK_COST
from hetero_ns3.topology.loader import load_cluster
from tests.collective_helpers import flow_level_busbw

GIB = 1 << 30


def _bridge_cluster(gpus: int = 2, gpu: str = "H100-PCIe", **fabric) -> dict:
    return {
        "name": "bridge",
        "groups": [
            {
                "name": "g",
                "count": 1,
                "gpu": gpu,
                "gpus_per_node": gpus,
                "fabric": {"kind": "nvlink_bridge", "pcie_gen": 5, **fabric},
                "nics": {"count": 1, "rate": "400Gbps"},
            }
        ],
        "network": {"kind": "rail"},
    }


def test_bridge_graph_pairs_gpus_over_nvlink_and_the_rest_over_pcie() -> None:
    cluster = parse_cluster(_bridge_cluster(gpus=4))
    assert cluster.groups[0].fabric.nvlink_rate_bps == pytest.approx(300e9 * 8)  # 600 GB/s bidirectional
    g = build_graph(cluster)
    bridges = [n.name for n in g.nodes if n.role == "nvlink-bridge"]
    assert bridges == ["n0.nvb0", "n0.nvb1"]
    bridge_links = [lk for lk in g.links if lk.tier == "gpu-bridge"]
    assert {(lk.a, lk.b) for lk in bridge_links} == {
        ("n0.g0", "n0.nvb0"),
        ("n0.g1", "n0.nvb0"),
        ("n0.g2", "n0.nvb1"),
        ("n0.g3", "n0.nvb1"),
    }
    assert all(lk.kind == "nvlink" and lk.cost == NVLINK_COST for lk in bridge_links)
    env = CollectiveEnv.from_graph(g)
    assert env.path("n0.g0", "n0.g1").kind == "nvlink"
    assert env.path("n0.g2", "n0.g3").kind == "nvlink"
    assert env.path("n0.g1", "n0.g2").kind == "pcie"  # no bridge between pairs


def test_bridge_all_reduce_runs_at_the_effective_nvlink_rate() -> None:
    """Analytic answer: a 2-rank ring all-reduce sends S per direction, so busbw = algbw = the bridge's
    payload rate, 300 GB/s x 20.6 / 25 (NCCL's Hopper NVLink efficiency) = 247.2 GB/s; 2% tolerance."""
    g = build_graph(parse_cluster(_bridge_cluster()))
    got = flow_level_busbw(g, "all_reduce", ("n0.g0", "n0.g1"), GIB)
    assert got == pytest.approx(300.0 * 20.6 / 25.0, rel=0.02)
    # The same two cards without the bridge talk over PCIe Gen5 x16 (63 GB/s, 0.9 efficiency).
    data = _bridge_cluster()
    data["groups"][0]["fabric"]["kind"] = "pcie"
    pcie = flow_level_busbw(build_graph(parse_cluster(data)), "all_reduce", ("n0.g0", "n0.g1"), GIB)
    assert pcie < 0.3 * got


def test_shipped_bridge_topology_loads() -> None:
    from hetero_ns3.validation import SUITE_PATH

    path = SUITE_PATH.parent / "heldout" / "h100pcie-bridge-1.toml"
    cluster = load_cluster(path)
    assert cluster.groups[0].fabric.kind == "nvlink_bridge"
    assert read_toml(path, "topology")["groups"][0]["gpu"] == "H100-PCIe"


def test_bridge_needs_an_even_gpu_count() -> None:
    with pytest.raises(ScenarioError, match=r"groups\[0\]\.fabric\.kind .*even gpus_per_node"):
        parse_cluster(_bridge_cluster(gpus=3))


def test_bridge_on_a_card_without_one_names_the_rate_field() -> None:
    with pytest.raises(ScenarioError, match=r"groups\[0\]\.fabric\.nvlink_rate .*L40S has no NVLink bridge"):
        parse_cluster(_bridge_cluster(gpu="L40S"))
    # an explicit rate is accepted
    c = parse_cluster(_bridge_cluster(gpu="L40S", nvlink_rate="100GBps"))
    assert c.groups[0].fabric.nvlink_rate_bps == pytest.approx(800e9)
