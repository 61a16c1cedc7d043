"""Per-connection ECMP of the analytic backend (``AnalyticConfig.ecmp_key``): every flow of one connection
(NCCL-like queue pair) takes the connection's path, distinct connections still spread, ``flow`` keeps the
per-flow hash, and both agree where nothing collides."""

from __future__ import annotations

import numpy as np
import pytest

from hetero_ns3.errors import ScenarioError, SimulationError
from hetero_ns3.network.analytic import AnalyticConfig, simulate_plan
from hetero_ns3.network.analytic.native import load_kernel
from hetero_ns3.network.analytic.routes import _stats_numpy, gather_rows, link_arrays, route_flows
from hetero_ns3.plan.builder import PlanBuilder
from hetero_ns3.topology import leaf_spine


def engines() -> list[str]:
    return ["numpy", "native"] if load_kernel() is not None else ["numpy"]


def lib_of(engine: str):
    return load_kernel(required=True) if engine == "native" else None


def pair_flows(n_conn: int, per_conn: int) -> tuple:
    """``n_conn`` connections h0 -> h3 (other leaf of a 4-spine fabric), ``per_conn`` flows each."""
    g = leaf_spine(2, 4, 2, 100e9, 1e-6)
    n = n_conn * per_conn
    src = np.full(n, g.index("h0"), np.int64)
    dst = np.full(n, g.index("h3"), np.int64)
    conn = np.repeat(np.arange(n_conn, dtype=np.int64), per_conn)
    return g, src, dst, conn, np.arange(n, dtype=np.int64), np.full(n, 1000, np.int64)


@pytest.mark.parametrize("engine", engines())
@pytest.mark.parametrize("ecmp", ["flow", "packet"])
def test_flows_of_one_connection_share_its_path(engine, ecmp):
    g, src, dst, conn, fid, size = pair_flows(64, 50)
    cfg = AnalyticConfig(ecmp_hash=ecmp, ecmp_key="connection")
    p = route_flows(g, link_arrays(g, cfg), src, dst, fid, size, cfg, 1, lib=lib_of(engine), connection=conn)
    rows = p.res.reshape(64, 50, -1)
    assert (rows == rows[:, :1]).all()  # one path per connection
    spine = rows[:, 0, 1]
    counts = np.bincount(spine)[np.unique(spine)]
    assert counts.size == 4 and counts.min() >= 6  # 64 connections over 4 spines: all used, roughly even
    per_flow = route_flows(g, link_arrays(g, cfg), src, dst, fid, size, cfg, 1, lib=lib_of(engine))
    assert np.unique(per_flow.res.reshape(64, 50, -1)[0, :, 1]).size > 1  # per-flow: one pair's flows spread


@pytest.mark.parametrize("ecmp", ["flow", "packet"])
def test_connection_key_replaces_the_flow_id_in_the_hash(ecmp):
    """A connection's path is the path a lone flow whose id (packet: position) is the connection id takes."""
    g, src, dst, conn, fid, size = pair_flows(40, 3)
    cfg = AnalyticConfig(ecmp_hash=ecmp, ecmp_key="connection")
    links = link_arrays(g, cfg)
    shuffled = np.random.default_rng(0).permutation(conn.shape[0])
    p = route_flows(g, links, src, dst, fid, size, cfg, 4, connection=conn[shuffled])
    ids = np.arange(40, dtype=np.int64)
    lone = route_flows(g, links, src[:40], dst[:40], ids, size[:40], AnalyticConfig(ecmp_hash=ecmp), 4)
    np.testing.assert_array_equal(p.res, lone.res[conn[shuffled]])


@pytest.mark.parametrize("ecmp", ["flow", "packet"])
def test_connection_routing_is_the_same_in_c_and_numpy(ecmp):
    if load_kernel() is None:
        pytest.skip("no C compiler")
    g = leaf_spine(4, 4, 4, 100e9, 1e-6)
    rng = np.random.default_rng(3)
    hosts = np.array(g.host_indices())
    pairs = rng.choice(hosts, (30, 2))
    pairs = pairs[pairs[:, 0] != pairs[:, 1]]
    conn = rng.integers(0, pairs.shape[0], 2000) * 7 + 5  # sparse ids: the sorting path
    src, dst = pairs[conn // 7, 0], pairs[conn // 7, 1]
    size = rng.choice([64, 4096, 3 * 10**6], conn.shape[0]).astype(np.int64)
    cfg = AnalyticConfig(ecmp_hash=ecmp)
    links = link_arrays(g, cfg)
    fid = np.arange(conn.shape[0], dtype=np.int64)
    a = route_flows(g, links, src, dst, fid, size, cfg, 9, connection=conn)
    b = route_flows(g, links, src, dst, fid, size, cfg, 9, lib=load_kernel(required=True), connection=conn)
    for field in ("res", "hops", "latency_s", "ideal_fct_s", "res_bytes"):
        np.testing.assert_array_equal(getattr(b, field), getattr(a, field), err_msg=field)


def test_a_connection_between_different_hosts_is_refused():
    g, src, dst, conn, fid, size = pair_flows(2, 2)
    dst[3] = g.index("h2")
    cfg = AnalyticConfig()
    with pytest.raises(SimulationError, match="share connection 1 but not their hosts"):
        route_flows(g, link_arrays(g, cfg), src, dst, fid, size, cfg, connection=conn)
    with pytest.raises(SimulationError, match=r"connection\[0\] \(-1\) is negative"):
        route_flows(g, link_arrays(g, cfg), src, dst, fid, size, cfg, connection=conn - 1)


def test_flow_key_ignores_connections():
    g, src, dst, conn, fid, size = pair_flows(8, 20)
    cfg = AnalyticConfig(ecmp_key="flow")
    links = link_arrays(g, cfg)
    a = route_flows(g, links, src, dst, fid, size, cfg, 2, connection=conn)
    b = route_flows(g, links, src, dst, fid, size, cfg, 2)
    np.testing.assert_array_equal(a.res, b.res)


def chain_plan(hosts: list[str]):
    """Flows one after another (never two at once) on 3 channels between hosts of different leaves."""
    b = PlanBuilder(hosts)
    last: list[int] = []
    for i in range(60):
        s, d = (0, 5) if i % 2 else (6, 1)
        t = b.add_flow(
            s, d, 100_000 + 1000 * i, deps=last, label=f"ring ch{i % 3} step{i}", category="dp", channel=i % 3
        )
        last = [b.add_compute(d, 2e-6, deps=[t])]
    return b.build()


@pytest.mark.parametrize("engine", engines())
def test_both_keys_agree_when_nothing_collides(engine):
    g = leaf_spine(2, 4, 4, 100e9, 1e-6)
    plan = chain_plan(g.host_names())
    assert plan.flow_connections().max() == 5  # 2 directions x 3 channels
    by_conn = simulate_plan(g, plan, AnalyticConfig(ecmp_key="connection", engine=engine), seed=3)
    by_flow = simulate_plan(g, plan, AnalyticConfig(ecmp_key="flow", engine=engine), seed=3)
    t_conn, t_flow = np.nanmax(by_conn.times.finish_s), np.nanmax(by_flow.times.finish_s)
    assert t_conn == pytest.approx(t_flow, rel=1e-12)
    assert not np.array_equal(by_conn.link_bytes, by_flow.link_bytes)  # yet the paths differ


def test_connections_collide_where_flows_would_spread():
    """Two connections pinned to one spine share it for their whole life: slower than per-flow spreading."""
    g = leaf_spine(2, 2, 2, 100e9, 1e-6)
    b = PlanBuilder(g.host_names())
    for _ in range(40):  # 40 concurrent messages on each of 2 connections h0 -> h2 and h1 -> h3
        b.add_flow(0, 2, 1_000_000, label="ch0", category="dp")
        b.add_flow(1, 3, 1_000_000, label="ch0", category="dp")
    plan = b.build()
    times = {}
    for seed in range(8):
        r = simulate_plan(g, plan, AnalyticConfig(ecmp_key="connection"), seed=seed)
        times[seed] = float(np.nanmax(r.times.finish_s))
    t_flow = float(np.nanmax(simulate_plan(g, plan, AnalyticConfig(ecmp_key="flow"), seed=0).times.finish_s))
    fast, slow = min(times.values()), max(times.values())
    assert slow == pytest.approx(2 * fast, rel=0.02)  # both on one spine: half the bandwidth each
    # per-flow hashing spreads each connection's messages over both spines: never the pinned collision
    assert fast * (1 - 1e-12) <= t_flow < 0.75 * slow


def test_invalid_ecmp_key_is_named():
    with pytest.raises(ScenarioError, match=r"analytic.ecmp_key \('qp'\) is not an ECMP key; use one of"):
        AnalyticConfig(ecmp_key="qp")


@pytest.mark.parametrize("width", [1, 3, 4, 7, 8])
def test_gather_rows_is_a_row_index(width):
    a = np.random.default_rng(width).integers(-5, 10**6, (37, width)).astype(np.int32)
    rows = np.random.default_rng(1).integers(0, 37, 500)
    np.testing.assert_array_equal(gather_rows(a, rows), a[rows])


@pytest.mark.parametrize("engine", engines())
@pytest.mark.parametrize("saf", [True, False])
def test_shared_paths_have_the_per_flow_figures(engine, saf):
    """Latency, ideal FCT and link bytes of connection-routed flows are those of each flow on its path."""
    g = leaf_spine(4, 4, 4, 100e9, 1e-6)
    rng = np.random.default_rng(5)
    hosts = np.array(g.host_indices())
    pairs = rng.choice(hosts, (50, 2))
    pairs = pairs[pairs[:, 0] != pairs[:, 1]]
    conn = rng.integers(0, pairs.shape[0], 3000)
    size = rng.choice([1, 64, 4095, 4096, 70_000, 3 * 10**6], conn.shape[0]).astype(np.int64)
    cfg = AnalyticConfig(store_and_forward=saf)
    links = link_arrays(g, cfg)
    lib = lib_of(engine)
    fid = np.arange(conn.shape[0], dtype=np.int64)
    p = route_flows(g, links, pairs[conn, 0], pairs[conn, 1], fid, size, cfg, 2, lib=lib, connection=conn)
    lat, ideal, carried = _stats_numpy(p.res, size, links, saf)
    np.testing.assert_array_equal(p.latency_s, lat)
    np.testing.assert_array_equal(p.ideal_fct_s, ideal)
    np.testing.assert_array_equal(p.res_bytes, carried)
