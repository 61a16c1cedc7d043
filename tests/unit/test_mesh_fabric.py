"""Fully connected scale-up fabric (``mesh``: AMD Infinity Fabric / xGMI) and its link-disjoint rings.

Sources: AMD MI300X platform data sheet (7 Infinity Fabric links of 64 GB/s per direction per GPU);
ROCm blog "Understanding RCCL Bandwidth and xGMI Performance on AMD Instinct MI300X" (2025-03-02:
TransferBench 46.552 GB/s mean per directed link; RCCL all-reduce reaching ~7 links' worth); Tillson
(1980): the complete directed graph on m vertices splits into m - 1 arc-disjoint Hamiltonian cycles for
every m except 4 and 6.
"""

from __future__ import annotations

from itertools import pairwise

import pytest

from hetero_ns3.collectives import CollectiveCall, CollectiveEnv, plan_collective
from hetero_ns3.collectives.algorithms.ring import ring_orders
from hetero_ns3.collectives.mesh import disjoint_cycles, mesh_rings, path_from, round_channels
from hetero_ns3.collectives.select import choose
from hetero_ns3.errors import ScenarioError
from hetero_ns3.network.analytic import simulate_plan
from hetero_ns3.plan.builder import PlanBuilder
from hetero_ns3.topology import build_graph, parse_cluster
from hetero_ns3.topology.fabric import NVLINK_COST
from hetero_ns3.topology.loader import load_cluster
from tests.collective_helpers import flow_level_busbw

GIB = 1 << 30
LINK_PAYLOAD_GBPS = 46.552  # TransferBench mean per directed MI300X link (the tuning's CDNA 3 wire overhead)


def _mesh_cluster(gpus: int = 8, gpu: str = "MI300X", nodes: int = 1, **fabric) -> dict:
    return {
        "name": "mesh",
        "groups": [
            {
                "name": "g",
                "count": nodes,
                "gpu": gpu,
                "gpus_per_node": gpus,
                "fabric": {"kind": "mesh", "pcie_gen": 5, **fabric},
                "nics": {"count": gpus, "rate": "400Gbps"},
            }
        ],
        "network": {"kind": "rail"},
    }


def _arcs(order: list[int] | tuple[int, ...]) -> list[tuple[int, int]]:
    return [(a, b) for a, b in pairwise([*order, order[0]])]


def test_mesh_graph_joins_every_pair_directly() -> None:
    cluster = parse_cluster(_mesh_cluster())
    f = cluster.groups[0].fabric
    assert f.kind == "mesh"
    assert f.nvlink_rate_bps == pytest.approx(64e9 * 8)  # 128 GB/s bidirectional per link
    g = build_graph(cluster)
    mesh = [lk for lk in g.links if lk.tier == "gpu-gpu"]
    assert len(mesh) == 8 * 7 // 2
    assert all(lk.kind == "nvlink" and lk.cost == NVLINK_COST for lk in mesh)
    assert not [n for n in g.nodes if n.role in ("nvswitch", "pcie-root")]
    env = CollectiveEnv.from_graph(g)
    for a in env.gpus:
        for b in env.gpus:
            if a != b:
                p = env.path(a, b)
                assert (p.kind, p.hops) == ("nvlink", 1) and env.direct(a, b)


@pytest.mark.parametrize("m", range(1, 10))
def test_disjoint_cycles_are_hamiltonian_and_share_no_link(m: int) -> None:
    cycles = disjoint_cycles(m)
    expected = {1: 1, 2: 1, 4: 2, 6: 4}.get(m, m - 1)  # Tillson: m - 1 except m = 4, 6
    assert len(cycles) == expected
    arcs = [a for c in cycles for a in (_arcs(c) if m > 1 else [])]
    for c in cycles:
        assert sorted(c) == list(range(m)) and c[0] == 0
    assert len(arcs) == len(set(arcs))  # arc-disjoint


def test_path_from_and_round_channels() -> None:
    assert path_from((0, 3, 1, 2), 1) == [1, 2, 0, 3]
    assert round_channels(8, 7) == 14 and round_channels(14, 7) == 14 and round_channels(1, 7) == 7
    assert round_channels(5, 0) == 5 and round_channels(5, 1) == 5


def test_mesh_rings_load_every_link_equally() -> None:
    env = CollectiveEnv.from_graph(build_graph(parse_cluster(_mesh_cluster())))
    group = env.gpus
    assert mesh_rings(env, group) == 7
    call = CollectiveCall("all_reduce", group, GIB)
    ch = choose(call, env).channels
    assert ch % 7 == 0
    orders = ring_orders(env, group, ch)
    use: dict[tuple[int, int], int] = {}
    for o in orders:
        assert sorted(o) == list(range(8))
        for arc in _arcs(o):
            use[arc] = use.get(arc, 0) + 1
    assert len(use) == 56 and set(use.values()) == {ch // 7}


def test_mesh_all_reduce_reaches_seven_links() -> None:
    """Analytic answer: each of the 56 directed links carries 1/7 of a rank's ring traffic, so the ring's
    bus bandwidth is 7 x the link payload rate (64 GB/s / the CDNA 3 wire overhead = 46.552 GB/s): 325.9
    GB/s, 2% for the pipeline's fill at 1 GiB. One forced channel uses one link per GPU."""
    g = build_graph(parse_cluster(_mesh_cluster()))
    gpus = CollectiveEnv.from_graph(g).gpus
    assert flow_level_busbw(g, "all_reduce", gpus, GIB) == pytest.approx(7 * LINK_PAYLOAD_GBPS, rel=0.02)
    assert flow_level_busbw(g, "all_reduce", gpus, GIB, channels=1, algo="ring", protocol="Simple") == pytest.approx(
        LINK_PAYLOAD_GBPS, rel=0.05
    )
    # four ranks of the mesh: two disjoint rings (Tillson), two of the three links each rank has to the others
    assert flow_level_busbw(g, "all_reduce", gpus[:4], GIB) == pytest.approx(2 * LINK_PAYLOAD_GBPS, rel=0.02)


def test_mesh_rings_span_nodes() -> None:
    """Two mesh nodes: every channel's ring is a permutation that visits each node's ranks in one run and
    enters the second node on the rail it left the first by; the all-gather runs at the cost model's time."""
    g = build_graph(parse_cluster(_mesh_cluster(nodes=2)))
    env = CollectiveEnv.from_graph(g)
    group = env.gpus
    assert mesh_rings(env, group) == 7
    for o in ring_orders(env, group, 14):
        assert sorted(o) == list(range(16))
        assert {i // 8 for i in o[:8]} == {0} and {i // 8 for i in o[8:]} == {1}
        assert o[8] - 8 == o[7]  # same local index: the same NIC rail
    call = CollectiveCall("all_gather", group, GIB)
    b = PlanBuilder(group)
    res = plan_collective(b, call, env)
    t = simulate_plan(g, b.build(), seed=1).times.makespan_s
    assert t == pytest.approx(res.predicted_s, rel=0.05)


def test_shipped_mi300x_topology_loads() -> None:
    from hetero_ns3.validation import SUITE_PATH

    cluster = load_cluster(SUITE_PATH.parent / "heldout" / "mi300x-1.toml")
    assert cluster.groups[0].fabric.kind == "mesh" and cluster.groups[0].gpu_type == "MI300X"


def test_mesh_on_a_gpu_without_mesh_links_names_the_rate_field() -> None:
    with pytest.raises(ScenarioError, match=r"groups\[0\]\.fabric\.nvlink_rate .*H100-SXM has no GPU-to-GPU mesh"):
        parse_cluster(_mesh_cluster(gpu="H100-SXM"))
    c = parse_cluster(_mesh_cluster(gpu="H100-SXM", nvlink_rate="50GBps"))
    assert c.groups[0].fabric.nvlink_rate_bps == pytest.approx(400e9)


def test_nvswitch_rings_unchanged_by_the_mesh_rule() -> None:
    """An NVSwitch node is not a mesh (GPU pairs cross the switch): same orders and channels as before."""
    data = _mesh_cluster(gpu="H100-SXM")
    data["groups"][0]["fabric"]["kind"] = "nvswitch"
    env = CollectiveEnv.from_graph(build_graph(parse_cluster(data)))
    assert mesh_rings(env, env.gpus) == 0
    assert choose(CollectiveCall("all_reduce", env.gpus, GIB), env).channels == env.tuning.max_channels


def test_mixed_cluster_meshes_only_the_mesh_node() -> None:
    """An H100 NVSwitch node and an MI300X mesh node in one data-parallel ring: the MI300X node's part of
    every channel follows its disjoint cycles (so no mesh link carries more than its share), the H100 node
    keeps the NVSwitch order, and the ring is limited by the NICs, not by a mesh link."""
    data = _mesh_cluster()
    h100 = {**data["groups"][0], "name": "h", "gpu": "H100-SXM", "fabric": {"kind": "nvswitch", "pcie_gen": 5}}
    data["groups"] = [h100, data["groups"][0]]
    g = build_graph(parse_cluster(data))
    env = CollectiveEnv.from_graph(g)
    group = env.gpus
    assert mesh_rings(env, group) == 7
    ch = choose(CollectiveCall("all_reduce", group, GIB), env).channels
    assert ch == 14
    orders = ring_orders(env, group, ch)
    use: dict[tuple[int, int], int] = {}
    for o in orders:
        assert sorted(o) == list(range(16))
        assert o[8] - 8 == o[7]  # the mesh node is entered on the rail the H100 node was left by
        mesh_part = [i - 8 for i in o[8:]]
        for a, b in pairwise(mesh_part):
            use[(a, b)] = use.get((a, b), 0) + 1
    assert max(use.values()) <= ch // 7
    call = CollectiveCall("all_reduce", group, GIB)
    b = PlanBuilder(group)
    res = plan_collective(b, call, env)
    assert res.choice.bottleneck is not None and res.choice.bottleneck.kind == "network"


def test_summary_states_links_per_gpu_on_a_mesh() -> None:
    from hetero_ns3.topology.summary import summarize

    cluster = parse_cluster(_mesh_cluster())
    (line,) = summarize(build_graph(cluster), cluster=cluster).groups
    assert "mesh (7 links x 512Gbps/GPU)" in line
