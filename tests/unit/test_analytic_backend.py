"""The flow-level backend against closed forms: FCTs, fair sharing, DAG timing, ECMP."""

import numpy as np
import pandas as pd
import pytest

from hetero_ns3.errors import ScenarioError, SimulationError
from hetero_ns3.network.analytic import AnalyticConfig, Framing, simulate_flows, simulate_plan
from hetero_ns3.plan.builder import PlanBuilder
from hetero_ns3.plan.dag import critical_path_s
from hetero_ns3.topology import leaf_spine, star
from hetero_ns3.topology.graph import HOST, SWITCH, GraphLink, GraphNode, make_graph

ENGINES = ["native", "numpy"]


@pytest.fixture(params=ENGINES)
def cfg(request):
    """Every closed-form test runs on both event loops."""
    return AnalyticConfig(engine=request.param)


RATE = 100e9
DELAY = 1e-6
CFG = AnalyticConfig()
FR = CFG.framing
GOODPUT = RATE / 8 * FR.payload_bytes / (FR.payload_bytes + FR.overhead_bytes)  # payload bytes/s
PKT_S = (FR.payload_bytes + FR.overhead_bytes) * 8 / RATE  # one full packet on one link


def latency(hops: int) -> float:
    return hops * DELAY + (hops - 1) * PKT_S


def flows_df(rows):
    return pd.DataFrame(rows, columns=["src", "dst", "size_bytes", "start_s"])


def test_single_flow_fct_is_size_over_goodput_plus_path_latency(cfg):
    g = leaf_spine(2, 2, 2, RATE, DELAY)
    size = 12_345_678
    out = simulate_flows(g, flows_df([("h0", "h3", size, 0.5e-3)]), cfg)
    expected = size / GOODPUT + latency(4)
    assert out.fct_s[0] == pytest.approx(expected, rel=1e-9)
    assert out.start_s[0] == 0.5e-3
    assert list(out.columns) == [
        "id",
        "src",
        "dst",
        "size_bytes",
        "start_s",
        "finish_s",
        "fct_s",
        "ideal_fct_s",
        "label",
    ]
    assert out.ideal_fct_s[0] == pytest.approx(expected, rel=1e-9)


def test_small_flow_serializes_its_own_size_per_hop(cfg):
    g = star(2, RATE, DELAY)
    out = simulate_flows(g, flows_df([("h0", "h1", 100, 0.0)]), cfg)
    per_hop = (100 + FR.overhead_bytes) * 8 / RATE
    assert out.fct_s[0] == pytest.approx(100 / GOODPUT + 2 * DELAY + per_hop, rel=1e-9)


def test_framing_sets_goodput(cfg):
    g = star(2, RATE, 0.0)
    cfg = AnalyticConfig(framing=Framing(4096, 82), store_and_forward=False, engine=cfg.engine)
    out = simulate_flows(g, flows_df([("h0", "h1", 4096 * 1000, 0.0)]), cfg)
    assert out.fct_s[0] == pytest.approx(4096 * 1000 / (RATE / 8 * 4096 / (4096 + 82)), rel=1e-12)


def test_two_flows_into_one_host_share_its_link_equally(cfg):
    g = star(3, RATE, DELAY)
    size = 10**7
    out = simulate_flows(g, flows_df([("h0", "h2", size, 0.0), ("h1", "h2", size, 0.0)]), cfg)
    np.testing.assert_allclose(out.fct_s, 2 * size / GOODPUT + latency(2), rtol=1e-9)
    np.testing.assert_allclose(out.ideal_fct_s, size / GOODPUT + latency(2), rtol=1e-9)


def test_rates_are_recomputed_when_a_flow_finishes(cfg):
    g = star(3, RATE, 0.0)
    cfg = AnalyticConfig(store_and_forward=False, engine=cfg.engine)
    s = 10**7
    out = simulate_flows(g, flows_df([("h0", "h2", s, 0.0), ("h1", "h2", 2 * s, 0.0)]), cfg)
    # Both at half rate until the small one ends at 2s/C; the big one then has s left at full rate.
    np.testing.assert_allclose(out.fct_s, [2 * s / GOODPUT, 3 * s / GOODPUT], rtol=1e-12)


def test_late_flow_joins_and_slows_the_first(cfg):
    g = star(3, RATE, 0.0)
    cfg = AnalyticConfig(store_and_forward=False, engine=cfg.engine)
    s = 10**7
    t1 = 0.5 * s / GOODPUT  # the first flow is half done
    out = simulate_flows(g, flows_df([("h0", "h2", s, 0.0), ("h1", "h2", s, t1)]), cfg)
    # From t1 both share: the first has s/2 left at C/2 -> ends at t1 + s/C; the second then
    # has s/2 left alone -> ends at t1 + s/C + s/(2C).
    np.testing.assert_allclose(out.finish_s, [t1 + s / GOODPUT, t1 + 1.5 * s / GOODPUT], rtol=1e-12)


def line_graph(c1_bps: float, c2_bps: float):
    """Hosts hA, hB, hC on switches sA - sB - sC; host links are 100x faster than the line."""
    nodes = [GraphNode(n, HOST) for n in ("hA", "hB", "hC")] + [GraphNode(n, SWITCH) for n in ("sA", "sB", "sC")]
    links = [GraphLink(f"h{x}", f"s{x}", 100 * c2_bps, 0.0) for x in "ABC"]
    links += [GraphLink("sA", "sB", c1_bps, 0.0), GraphLink("sB", "sC", c2_bps, 0.0)]
    return make_graph(nodes, links)


def test_textbook_max_min_on_a_line(cfg):
    # Long flow A->C, one flow A->B, two flows B->C; A-B has capacity C, B-C 2C (goodput units).
    cfg = AnalyticConfig(framing=Framing(1000, 0), store_and_forward=False, engine=cfg.engine)
    c = 8e9  # bit/s -> 1e9 bytes/s
    g = line_graph(c, 2 * c)
    s = 10**6
    out = simulate_flows(
        g, flows_df([("hA", "hC", s, 0.0), ("hA", "hB", s, 0.0), ("hB", "hC", s, 0.0), ("hB", "hC", s, 0.0)]), cfg
    )
    cb = c / 8
    # Rates 1/2, 1/2, 3/4, 3/4 of C: the one-hop B-C flows end first; A-B stays the bottleneck.
    np.testing.assert_allclose(out.fct_s, [2 * s / cb, 2 * s / cb, s / (0.75 * cb), s / (0.75 * cb)], rtol=1e-12)


def test_dependency_chain_adds_up(cfg):
    g = star(2, RATE, DELAY)
    b = PlanBuilder(["h0", "h1"])
    c1 = b.add_compute("h0", 1e-3)
    f1 = b.add_flow("h0", "h1", 10**6, deps=[c1])
    c2 = b.add_compute("h1", 2e-3, deps=[f1])
    f2 = b.add_flow("h1", "h0", 3 * 10**6, deps=[c2])
    c3 = b.add_compute("h0", 0.5e-3, deps=[f2])
    r = simulate_plan(g, b.build(), cfg)
    fct = [s / GOODPUT + latency(2) for s in (10**6, 3 * 10**6)]
    assert r.times.finish_s[c3] == pytest.approx(1e-3 + fct[0] + 2e-3 + fct[1] + 0.5e-3, rel=1e-9)
    assert r.times.start_s[c2] == pytest.approx(r.times.finish_s[f1], rel=1e-15)
    np.testing.assert_allclose(r.flows.fct_s, fct, rtol=1e-9)
    np.testing.assert_allclose(r.flows.ideal_fct_s, fct, rtol=1e-9)  # alone in the network
    assert r.flows.id.tolist() == r.flows.task.tolist() == [f1, f2]
    assert set(r.flows.columns) >= {"src", "dst", "size_bytes", "start_s", "finish_s", "category", "label"}
    # Link bytes: 1 MB from h0 to sw0 on link 0, 3 MB back on it; the mirror on link 1.
    np.testing.assert_allclose(r.link_bytes, [[1e6, 3e6], [3e6, 1e6]])


def random_plan(n_gpus: int, n_tasks: int, seed: int):
    rng = np.random.default_rng(seed)
    names = [f"h{i}" for i in range(n_gpus)]
    b = PlanBuilder(names)
    for i in range(n_tasks):
        deps = rng.choice(i, size=min(i, rng.integers(0, 4)), replace=False) if i else []
        if rng.random() < 0.5:
            s, d = rng.choice(n_gpus, 2, replace=False)
            b.add_flow(int(s), int(d), int(rng.integers(1, 10**6)), deps=deps)
        else:
            b.add_compute(int(rng.integers(n_gpus)), float(rng.choice([0.0, rng.uniform(1e-6, 1e-3)])), deps=deps)
    return b.build()


def test_infinitely_fast_network_gives_the_critical_path(cfg):
    g = leaf_spine(2, 2, 4, 1e30, 0.0)
    plan = random_plan(8, 400, seed=1)
    r = simulate_plan(g, plan, cfg)
    ref = critical_path_s(plan, 0.0)
    np.testing.assert_allclose(r.times.finish_s, ref.finish_s, rtol=1e-9, atol=1e-15)
    np.testing.assert_allclose(r.times.start_s, ref.start_s, rtol=1e-9, atol=1e-15)


def test_every_task_respects_its_dependencies_under_contention(cfg):
    g = leaf_spine(2, 1, 4, RATE, DELAY)
    plan = random_plan(8, 600, seed=2)
    r = simulate_plan(g, plan, cfg)
    owner = np.repeat(np.arange(len(plan)), np.diff(plan.dep_ptr))
    assert np.all(r.times.start_s[owner] >= r.times.finish_s[plan.dep_idx] - 1e-15)
    ready = np.zeros(len(plan))
    np.maximum.at(ready, owner, r.times.finish_s[plan.dep_idx])
    np.testing.assert_allclose(r.times.start_s, ready, atol=1e-15)
    # A flow can never beat its uncontended FCT.
    lo = r.flows.size_bytes / GOODPUT
    assert np.all(r.flows.fct_s >= lo * (1 - 1e-9))
    assert r.stats.events > 0 and r.stats.flows == plan.n_flows


def spine_loads(r, g):
    """Bytes each spine carries from leaf0 (column of the leaf0->spine direction)."""
    idx = [i for i, ln in enumerate(g.links) if ln.a == "leaf0" and ln.b.startswith("spine")]
    return r.link_bytes[idx, 0]


def cross_leaf_plan(k: int, size: int):
    b = PlanBuilder([f"h{i}" for i in range(2 * k)])
    for i in range(k):
        b.add_flow(i, k + i, size)
    return b.build()


def test_ecmp_spreads_flows_and_rates_follow_collisions(cfg):
    k, size = 8, 10**6
    g = leaf_spine(2, k, k, RATE, DELAY)
    plan = cross_leaf_plan(k, size)
    r = simulate_plan(g, plan, cfg, seed=0)
    loads = spine_loads(r, g)
    assert loads.sum() == k * size
    per_spine = np.rint(loads / size).astype(int)
    assert np.count_nonzero(per_spine) > 1  # the hash spreads
    # Each flow runs at link/m where m flows share its spine, both up and down.
    fcts = np.sort(r.flows.fct_s.to_numpy())
    expected = np.sort(np.concatenate([np.full(m, m * size / GOODPUT + latency(4)) for m in per_spine if m]))
    np.testing.assert_allclose(fcts, expected, rtol=1e-9)
    agg = k * size / r.flows.finish_s.max()
    assert agg <= k * GOODPUT * (1 + 1e-9)


def test_ecmp_is_deterministic_per_seed(cfg):
    k = 8
    g = leaf_spine(2, k, 32, RATE, DELAY)
    b = PlanBuilder([f"h{i}" for i in range(64)])
    for i in range(32):
        b.add_flow(i, 32 + i, 10**5)
    plan = b.build()
    a0 = spine_loads(simulate_plan(g, plan, cfg, seed=0), g)
    a0b = spine_loads(simulate_plan(g, plan, cfg, seed=0), g)
    np.testing.assert_array_equal(a0, a0b)
    others = [spine_loads(simulate_plan(g, plan, cfg, seed=s), g) for s in (1, 2, 3)]
    assert any(not np.array_equal(a0, o) for o in others)
    assert np.count_nonzero(a0) == k  # 32 flows over 8 spines: every spine used


def test_bad_inputs_are_named():
    g = star(2, RATE, DELAY)
    with pytest.raises(ScenarioError, match="start_s"):
        simulate_flows(g, pd.DataFrame({"src": ["h0"], "dst": ["h1"], "size_bytes": [1]}))
    with pytest.raises(ScenarioError, match=r"flows.dst\[0\] \('h9'\)"):
        simulate_flows(g, flows_df([("h0", "h9", 10, 0.0)]), cfg)
    with pytest.raises(ScenarioError, match="switch"):
        simulate_flows(g, flows_df([("h0", "sw0", 10, 0.0)]), cfg)
    with pytest.raises(ScenarioError, match=r"size_bytes\[0\]"):
        simulate_flows(g, flows_df([("h0", "h1", 0, 0.0)]), cfg)
    with pytest.raises(ScenarioError, match=r"start_s\[0\]"):
        simulate_flows(g, flows_df([("h0", "h1", 10, -1.0)]), cfg)
    with pytest.raises(ScenarioError, match="framing.payload_bytes"):
        Framing(0, 62)
    with pytest.raises(ScenarioError, match="time_tolerance_s"):
        AnalyticConfig(time_tolerance_s=1.0)
    with pytest.raises(ScenarioError, match="kind_framing.nvlink"):
        AnalyticConfig(kind_framing={"nvlink": 4096})


def test_unreachable_host_raises(cfg):
    nodes = [GraphNode("h0", HOST), GraphNode("h1", HOST), GraphNode("s0", SWITCH), GraphNode("s1", SWITCH)]
    g = make_graph(nodes, [GraphLink("h0", "s0", RATE, DELAY), GraphLink("h1", "s1", RATE, DELAY)])
    with pytest.raises(SimulationError, match="no route"):
        simulate_flows(g, flows_df([("h0", "h1", 10, 0.0)]), cfg)


def test_kind_framing_applies_per_link_kind(cfg):
    nodes = [GraphNode("g0", HOST), GraphNode("g1", HOST), GraphNode("nvs", SWITCH)]
    links = [GraphLink("g0", "nvs", 8e9, 0.0, kind="nvlink"), GraphLink("g1", "nvs", 8e9, 0.0, kind="nvlink")]
    g = make_graph(nodes, links)
    cfg = AnalyticConfig(kind_framing={"nvlink": Framing(256, 0)}, store_and_forward=False, engine=cfg.engine)
    out = simulate_flows(g, flows_df([("g0", "g1", 10**6, 0.0)]), cfg)
    assert out.fct_s[0] == pytest.approx(10**6 / 1e9, rel=1e-12)


def test_default_framing_matches_the_packet_backend_nic():
    from hetero_ns3.network.config import NicConfig

    nic = NicConfig()
    cfg = AnalyticConfig()
    for kind in ("network", "nvlink", "pcie", "other"):
        assert cfg.framing_of(kind) == Framing(nic.segment_for(kind), nic.header_bytes), kind
    like = AnalyticConfig.like_nic(NicConfig(header_bytes=82, default_segment_bytes=1000), store_and_forward=False)
    assert like.framing_of("unknown") == Framing(1000, 82) and not like.store_and_forward


def _mix64_int(x: int) -> int:
    m = (1 << 64) - 1
    x ^= x >> 30
    x = (x * 0xBF58476D1CE4E5B9) & m
    x ^= x >> 27
    x = (x * 0x94D049BB133111EB) & m
    return x ^ (x >> 31)


def test_packet_hash_follows_the_switch_formula():
    # RoceNode::SelectPort with RdmaNetwork's source port per flow id, in plain Python integers.
    from hetero_ns3.network.analytic.ecmp import packet_backend_hash

    seq, node, src, dst, seed = (
        np.array([0, 7, 12345]),
        np.array([9, 3, 40]),
        np.array([1, 2, 3]),
        np.array([5, 6, 7]),
        11,
    )
    got = packet_backend_hash(seq, node, src, dst, seed)
    for i in range(3):
        sport = 49152 + (((int(seq[i]) * 2654435761) & 0xFFFFFFFF) >> 18) % 16384
        h = _mix64_int(((seed << 32) ^ int(node[i])) & ((1 << 64) - 1))
        h = _mix64_int(h ^ ((int(src[i]) << 32) | int(dst[i])))
        h = _mix64_int(h ^ ((sport << 16) | 4791) ^ (17 << 40))
        assert int(got[i]) == h


def test_packet_hash_mode_routes_deterministically(cfg):
    g = leaf_spine(2, 4, 8, RATE, DELAY)
    plan = cross_leaf_plan(8, 10**5)
    pc = AnalyticConfig(ecmp_hash="packet", engine=cfg.engine)
    a = spine_loads(simulate_plan(g, plan, pc, seed=0), g)
    np.testing.assert_array_equal(a, spine_loads(simulate_plan(g, plan, pc, seed=0), g))
    assert a.sum() == 8 * 10**5
    with pytest.raises(ScenarioError, match="ecmp_hash"):
        AnalyticConfig(ecmp_hash="crc")


def test_link_mtu_overrides_the_kind_payload(cfg):
    nodes = [GraphNode("h0", HOST), GraphNode("h1", HOST), GraphNode("s", SWITCH)]
    links = [GraphLink("h0", "s", 8e9, 0.0, mtu_bytes=1000), GraphLink("h1", "s", 8e9, 0.0, mtu_bytes=1000)]
    g = make_graph(nodes, links)
    c = AnalyticConfig(framing=Framing(4096, 24), store_and_forward=False, engine=cfg.engine)
    out = simulate_flows(g, flows_df([("h0", "h1", 10**6, 0.0)]), c)
    assert out.fct_s[0] == pytest.approx(10**6 / (1e9 * 1000 / 1024), rel=1e-12)
