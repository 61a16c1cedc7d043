"""Flow routing of the analytic backend: the C and numpy walks over packed next-hop tables give the paths,
latencies and link loads of the original per-destination list walk, and whole runs the pre-change figures."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from hetero_ns3.errors import SimulationError
from hetero_ns3.network.analytic import AnalyticConfig, simulate_plan
from hetero_ns3.network.analytic.native import load_kernel
from hetero_ns3.network.analytic.routes import (
    FlowPaths,
    LinkArrays,
    ecmp_hash,
    graph_next_hop_table,
    link_arrays,
    next_hop_table,
    packet_backend_hash,
    route_flows,
)
from hetero_ns3.plan.builder import PlanBuilder
from hetero_ns3.plan.dag import ExecutionPlan
from hetero_ns3.topology import build_graph, leaf_spine, load_cluster
from hetero_ns3.topology.graph import GraphLink, GraphNode, NetGraph, make_graph
from hetero_ns3.topology.routing import routing_tables

TOPOLOGIES = Path(__file__).resolve().parents[2] / "topologies"
PRESETS = ("h100-fattree", "dgx-h100-rail", "mixed-2node", "h100-leafspine-2to1")


def graph_of(name: str) -> NetGraph:
    if name == "leafspine":
        return leaf_spine(4, 2, 4, 100e9, 1e-6)
    return build_graph(load_cluster(TOPOLOGIES / f"{name}.toml"))


def reference_paths(
    graph: NetGraph, links: LinkArrays, src: np.ndarray, dst: np.ndarray, fid: np.ndarray, size: np.ndarray, ecmp: str
) -> FlowPaths:
    """The routing as it was before the packed tables: one flow at a time through the nested lists."""
    routes = routing_tables(graph)
    rows, lat, ideal = [], [], []
    carried = np.zeros(links.capacity.shape[0])
    for k in range(src.shape[0]):
        u, d, path = int(src[k]), int(dst[k]), []
        while True:
            opts = routes[d][u]
            one = np.array([k])
            if ecmp == "packet":
                hv = packet_backend_hash(one, np.array([u]), np.array([src[k]]), np.array([d]), 7)
            else:
                hv = ecmp_hash(fid[one], np.array([u]), 7)
            li = opts[int(hv[0] % np.uint64(len(opts)))]
            fwd = int(links.a[li]) == u
            path.append(2 * li + (not fwd))
            u = int(links.b[li] if fwd else links.a[li])
            if u == d:
                break
        rows.append(path)
    width = max(map(len, rows))
    res = np.array([p + [links.pad] * (width - len(p)) for p in rows], np.int32)
    for k in range(res.shape[0]):
        r = res[k]
        t = links.delay_s[r].sum()
        if width > 1:
            later = r[1:]
            pkt = np.minimum(float(size[k]), links.payload_bytes[later]) + links.overhead_bytes[later]
            t = t + (pkt * 8.0 / links.rate_bps[later]).sum()
        lat.append(t)
        ideal.append(size[k] / links.capacity[r].min() + t)
        np.add.at(carried, r, float(size[k]))
    hops = np.array([len(p) for p in rows], np.int32)
    return FlowPaths(res, hops, np.array(lat), np.array(ideal), carried)


def random_flows(graph: NetGraph, n: int, seed: int) -> tuple[np.ndarray, ...]:
    rng = np.random.default_rng(seed)
    hosts = np.array(graph.gpu_indices())
    src = rng.choice(hosts, n)
    dst = rng.choice(hosts, n)
    keep = src != dst
    src, dst = src[keep], dst[keep]
    fid = rng.permutation(10 * src.shape[0])[: src.shape[0]].astype(np.int64)
    size = rng.choice([64, 1000, 4096, 70_000, 3 * 10**6], src.shape[0]).astype(np.int64)
    return src, dst, fid, size


def engines() -> list[str]:
    return ["numpy", "native"] if load_kernel() is not None else ["numpy"]


@pytest.mark.parametrize("name", ["leafspine", *PRESETS])
@pytest.mark.parametrize("ecmp", ["flow", "packet"])
def test_walks_match_the_list_walk(name, ecmp):
    g = graph_of(name)
    cfg = AnalyticConfig(ecmp_hash=ecmp)
    links = link_arrays(g, cfg)
    src, dst, fid, size = random_flows(g, 300, 11)
    ref = reference_paths(g, links, src, dst, fid, size, ecmp)
    for engine in engines():
        lib = load_kernel(required=True) if engine == "native" else None
        p = route_flows(g, links, src, dst, fid, size, cfg, 7, lib=lib)
        np.testing.assert_array_equal(p.res, ref.res, err_msg=engine)
        np.testing.assert_array_equal(p.hops, ref.hops)
        np.testing.assert_allclose(p.latency_s, ref.latency_s, rtol=1e-15, atol=0)
        np.testing.assert_allclose(p.ideal_fct_s, ref.ideal_fct_s, rtol=1e-15, atol=0)
        np.testing.assert_allclose(p.res_bytes, ref.res_bytes, rtol=1e-15, atol=0)


@pytest.mark.parametrize("name", ["leafspine", "h100-fattree"])
def test_native_and_numpy_walks_are_identical(name):
    if load_kernel() is None:
        pytest.skip("no C compiler")
    g = graph_of(name)
    cfg = AnalyticConfig()
    links = link_arrays(g, cfg)
    src, dst, fid, size = random_flows(g, 5000, 2)
    a = route_flows(g, links, src, dst, fid, size, cfg, 3, lib=None)
    b = route_flows(g, links, src, dst, fid, size, cfg, 3, lib=load_kernel(required=True))
    for field in ("res", "hops", "latency_s", "ideal_fct_s", "res_bytes"):
        np.testing.assert_array_equal(getattr(b, field), getattr(a, field), err_msg=field)


@pytest.mark.parametrize("engine", engines())
def test_ecmp_hash_spreads_flows_over_equal_cost_next_hops(engine):
    g = leaf_spine(2, 4, 2, 100e9, 1e-6)  # 4 spines: 4 equal-cost paths between leaves
    cfg = AnalyticConfig(engine=engine)
    links = link_arrays(g, cfg)
    lib = load_kernel(required=True) if engine == "native" else None
    n = 4000
    src = np.full(n, g.index("h0"), np.int64)
    dst = np.full(n, g.index("h3"), np.int64)  # on the other leaf
    p = route_flows(g, links, src, dst, np.arange(n, dtype=np.int64), np.full(n, 1000), cfg, 1, lib=lib)
    assert p.res.shape[1] == 4
    spine_hop = np.bincount(p.res[:, 1], minlength=links.pad + 1)
    used = spine_hop[spine_hop > 0]
    assert used.size == 4  # every spine carries some flows
    assert used.min() > 0.2 * n  # and close to a quarter each
    other = route_flows(g, links, src, dst, np.arange(n, dtype=np.int64), np.full(n, 1000), cfg, 2, lib=lib)
    assert not np.array_equal(other.res, p.res)  # the seed changes the choice


@pytest.mark.parametrize("name", ["leafspine", *PRESETS])
def test_packed_tables_keep_the_routing_order(name):
    g = graph_of(name)
    routes = routing_tables(g)
    for t in (next_hop_table(routes, len(g.nodes)), graph_next_hop_table(g)):
        for d in routes:
            for u in range(len(g.nodes)):
                k = t.slot[d] * t.n_nodes + u
                assert t.link[t.off[k] : t.off[k] + t.count[k]].tolist() == list(routes[d][u])


@pytest.mark.parametrize("engine", engines())
def test_unreachable_destination_is_named(engine):
    nodes = [GraphNode("a", "host"), GraphNode("b", "host"), GraphNode("c", "host"), GraphNode("s", "switch")]
    g = make_graph(nodes, [GraphLink("a", "s", 1e9, 0.0), GraphLink("b", "s", 1e9, 0.0)])
    cfg = AnalyticConfig(engine=engine)
    lib = load_kernel(required=True) if engine == "native" else None
    src, dst = np.array([0, 0]), np.array([1, 2])
    with pytest.raises(SimulationError, match="no route from node 'a' to host 'c'"):
        route_flows(g, link_arrays(g, cfg), src, dst, np.arange(2), np.array([10, 10]), cfg, lib=lib)


def plan_on(hosts: list[str], n_tasks: int, seed: int) -> ExecutionPlan:
    rng = np.random.default_rng(seed)
    b = PlanBuilder(hosts)
    n = len(hosts)
    for i in range(n_tasks):
        deps = rng.choice(i, size=min(i, int(rng.integers(0, 3))), replace=False) if i else []
        if rng.random() < 0.7:
            s, d = rng.choice(n, 2, replace=False)
            b.add_flow(int(s), int(d), int(rng.integers(1, 4 * 10**6)), deps=deps)
        else:
            b.add_compute(int(rng.integers(n)), float(rng.uniform(0, 2e-4)), deps=deps)
    return b.build()


#: Iteration time, summed flow FCT and carried bytes of ``plan_on(first 32 hosts, 400, 3)`` with seed 5,
#: from the engine before the packed tables (commit b8ef02a), native event loop.
GOLDEN = {
    ("leafspine", "flow"): (0.008036736814485268, 0.2699313265995281, 2072537752.0),
    ("leafspine", "packet"): (0.008039011681971612, 0.2595373814749396, 2072537752.0),
    ("h100-fattree", "flow"): (0.0015173393966681785, 0.032712392286821025, 4489800360.0),
    ("h100-fattree", "packet"): (0.0014957143085576237, 0.03135827415739808, 4489800360.0),
    ("dgx-h100-rail", "flow"): (0.0014050155044655563, 0.028134579165206453, 3778238566.0),
    ("dgx-h100-rail", "packet"): (0.0014050155044655567, 0.028134579165206453, 3778238566.0),
    ("mixed-2node", "flow"): (0.0023251512041728875, 0.03430025798090962, 2768098846.0),
    ("mixed-2node", "packet"): (0.0023255460032889897, 0.03430701763831913, 2768098846.0),
}


@pytest.mark.parametrize("case", sorted(GOLDEN))
def test_iterations_match_the_pre_change_engine(case):
    if load_kernel() is None:
        pytest.skip("the golden figures come from the native event loop")
    name, ecmp = case
    g = graph_of(name)
    r = simulate_plan(g, plan_on(g.gpu_names()[:32], 400, 3), AnalyticConfig(ecmp_hash=ecmp, ecmp_key="flow"), seed=5)
    got = (float(np.nanmax(r.times.finish_s)), float(r.flows.fct_s.sum()), float(r.link_bytes.sum()))
    assert got == GOLDEN[case]
