"""Invariants of the collective planner's plans: bytes, acyclicity, dependencies, data reach."""

from __future__ import annotations

import numpy as np
import pytest

from hetero_ns3.collectives import CollectiveCall, CollectiveEnv, estimate_plan, plan_collective
from hetero_ns3.collectives.testbeds import rail_cluster
from hetero_ns3.plan.builder import PlanBuilder
from hetero_ns3.plan.dag import FLOW, critical_path_s
from hetero_ns3.topology import star


@pytest.fixture(scope="module")
def star_env():
    return CollectiveEnv.from_graph(star(8, 100e9, 1e-6))


@pytest.fixture(scope="module")
def cluster_env():
    return CollectiveEnv.from_graph(rail_cluster(2, 4, nvlink_bps=3.6e12, nic_bps=400e9))


def _plan(env, op, size, group=None, **kw):
    b = PlanBuilder(env.gpus)
    call = CollectiveCall(op, tuple(group or env.gpus), size, **kw)
    res = plan_collective(b, call, env)
    return b.build(), res


def _sent_by(plan, gpu_index):
    f = plan.kind == FLOW
    return int(plan.size_bytes[f & (plan.gpu == gpu_index)].sum())


@pytest.mark.parametrize(
    ("op", "factor"),
    [
        ("all_reduce", lambda n: 2 * (n - 1) / n),
        ("all_gather", lambda n: (n - 1) / n),
        ("reduce_scatter", lambda n: (n - 1) / n),
    ],
)
@pytest.mark.parametrize("channels", [1, 3, 8])
def test_ring_bytes_per_rank(star_env, op, factor, channels):
    n = 8
    size = n * channels * 4096 * 3  # divisible: every segment and slice is whole
    plan, res = _plan(star_env, op, size, algo="ring", protocol="Simple", channels=channels)
    assert res.algo == "ring" and res.channels == channels
    for r in range(n):
        assert _sent_by(plan, r) == pytest.approx(factor(n) * size, rel=0, abs=0)


def test_protocol_wire_bytes(star_env):
    size = 8 * 4096
    simple, _ = _plan(star_env, "all_gather", size, algo="ring", protocol="Simple", channels=1)
    ll, _ = _plan(star_env, "all_gather", size, algo="ring", protocol="LL", channels=1)
    ll128, _ = _plan(star_env, "all_gather", size, algo="ring", protocol="LL128", channels=1)
    assert _sent_by(ll, 0) == 2 * _sent_by(simple, 0)
    assert _sent_by(ll128, 0) == pytest.approx(_sent_by(simple, 0) * 128 / 120, abs=8)


def test_nvlink_wire_overhead(cluster_env):
    group = tuple(f"n0.g{i}" for i in range(4))
    plan, _ = _plan(cluster_env, "all_gather", 4 * 37000, group=group, algo="ring", protocol="Simple", channels=1)
    over = cluster_env.wire_overhead("n0.g0", "n0.g1")  # per GPU generation (NCCL topo.h)
    g0 = cluster_env.gpus.index("n0.g0")
    assert _sent_by(plan, g0) == pytest.approx(3 * 37000 * over, abs=4)


def _channel_reach(plan, ch):
    """Per task, bitmask of ranks whose entry it transitively depends on (channel ch plus entries)."""
    labels = plan.labels
    in_ch = np.array([f" ch{ch} " in labels[i] + " " or labels[i].endswith(" entry") for i in plan.label])
    is_entry = np.array([labels[i].endswith(" entry") for i in plan.label])
    mask = [0] * len(plan)
    for i in range(len(plan)):
        m = 1 << int(plan.gpu[i]) if is_entry[i] else 0
        for d in plan.deps(i):
            m |= mask[int(d)]
        mask[i] = m if in_ch[i] else 0
    return mask, in_ch


@pytest.mark.parametrize("op", ["all_reduce", "all_gather"])
def test_every_rank_ends_with_every_chunk(cluster_env, op):
    """On every channel, each rank's last received data depends on every rank's contribution."""
    plan, res = _plan(cluster_env, op, 1 << 22, algo="ring", channels=4)
    full = (1 << len(plan.gpus)) - 1
    for ch in range(4):
        mask, in_ch = _channel_reach(plan, ch)
        for r in range(len(plan.gpus)):
            recv = np.nonzero(in_ch & (plan.kind == FLOW) & (plan.dst == r))[0]
            assert recv.size
            got = 1 << r
            for i in recv:
                got |= mask[int(i)]
            assert got == full, (ch, r)  # all-gather: every other rank's segment arrived
            if op == "all_reduce":  # the last segment in carries every rank's contribution
                assert mask[int(recv.max())] == full, (ch, r)


def test_tree_all_reduce_reaches_everyone(cluster_env):
    plan, res = _plan(cluster_env, "all_reduce", 1 << 20, algo="tree", channels=2)
    full = (1 << len(plan.gpus)) - 1
    for ch in range(2):
        mask, in_ch = _channel_reach(plan, ch)
        for r in range(len(plan.gpus)):
            recv = np.nonzero(in_ch & (plan.kind == FLOW) & (plan.dst == r))[0]
            if recv.size:  # the root of a tree receives only on the way up
                assert mask[int(recv.max())] == full or plan.gpus[r] in res.exits


@pytest.mark.parametrize(
    "op", ["all_reduce", "all_gather", "reduce_scatter", "broadcast", "reduce", "all_to_all", "send_recv"]
)
def test_plans_are_acyclic_and_deps_respected(cluster_env, op):
    plan, res = _plan(cluster_env, op, 3 << 20)
    plan.validate()  # deps point to earlier ids: acyclic by construction
    owner = np.repeat(np.arange(len(plan)), np.diff(plan.dep_ptr))
    assert np.all(plan.dep_idx < owner)
    times = estimate_plan(plan, cluster_env)
    # In the simulated timeline no task starts before its dependencies (chunks wait for receipt).
    assert np.all(times.start_s[owner] >= times.finish_s[plan.dep_idx] - 1e-15)
    assert np.all(times.finish_s >= times.start_s)
    # Exits are the last tasks of the call on each GPU.
    for g, ex in res.exits.items():
        gi = plan.gpus.index(g)
        mine = np.nonzero((plan.gpu == gi) | ((plan.kind == FLOW) & (plan.dst == gi)))[0]
        assert times.finish_s[list(ex)].max() >= times.finish_s[mine].max() - 1e-15


def test_reductions_are_compute_on_receiver(star_env):
    plan, res = _plan(star_env, "reduce_scatter", 8 * 1 << 20, algo="ring", protocol="Simple", channels=2)
    red = np.array([plan.labels[i].endswith(" reduce") for i in plan.label])
    assert red.sum() > 0
    assert np.all(plan.kind[red] == 0) and np.all(plan.stream[red] >= 1)
    assert set(np.unique(plan.stream[red])) == {1, 2}  # one comm stream per channel
    # every reduction waits for a flow into its GPU
    for i in np.nonzero(red)[0][:50]:
        deps = plan.deps(int(i))
        assert any(plan.kind[d] == FLOW and plan.dst[d] == plan.gpu[i] for d in deps)
    # 3 bytes touched per received byte at the default HBM bandwidth (plain hosts)
    t = star_env.tuning
    total = plan.duration_s[red].sum()
    received = 7 / 8 * 8 * (1 << 20) * 8
    expect = received * t.reduction_bytes_touched / (t.default_hbm_bw_Bps * t.hbm_efficiency)
    lat = plan.duration_s[red].sum() - expect
    # beyond the memory time: at most one network step latency per rank, channel and step
    assert total >= expect and lat <= 8 * 2 * 7 * t.hw_latency("network", "ring", "Simple") + 1e-12


def test_entry_deps_and_chaining(star_env):
    b = PlanBuilder(star_env.gpus)
    pre = {g: [b.add_compute(g, 1e-3, label="fwd")] for g in star_env.gpus}
    r1 = plan_collective(
        b, CollectiveCall("all_reduce", star_env.gpus, 1 << 20), star_env, entry_deps=pre, category="dp"
    )
    r2 = plan_collective(b, CollectiveCall("all_gather", star_env.gpus, 1 << 20), star_env, entry_deps=r1.exits)
    plan = b.build()
    times = critical_path_s(plan, 1e-6)
    first = np.arange(r1.first_task, r1.end_task)
    assert times.start_s[first].min() >= 1e-3 - 1e-12
    # per rank: nothing of the second call on GPU g starts before the first call's exit on g
    for i in range(r2.first_task, r2.end_task):
        g = plan.gpus[int(plan.gpu[i])]
        assert times.start_s[i] >= times.finish_s[list(r1.exits[g])].max() - 1e-12, (i, g)
    assert "dp" in plan.categories


def test_single_rank_and_zero_bytes(star_env):
    plan, res = _plan(star_env, "all_reduce", 1 << 20, group=("h3",))
    assert plan.n_flows == 0 and set(res.exits) == {"h3"} and res.predicted_s == 0.0
    plan, res = _plan(star_env, "all_gather", 0)
    assert plan.n_flows == 0 and len(res.exits) == 8


def test_tiny_sizes_do_not_expand(star_env):
    plan, res = _plan(star_env, "all_reduce", 4096)
    assert res.channels == 1 and plan.n_flows <= 2 * 8 * 7
    big, res = _plan(star_env, "all_reduce", 8 << 30)
    assert big.n_flows <= star_env.tuning.max_flows_per_call


def test_large_ring_keeps_every_step():
    """32 ranks: no slicing beyond the flow budget, but all 2(n-1) causal steps stay (C n 2(n-1) flows)."""
    env = CollectiveEnv.from_graph(star(32, 100e9, 1e-6))
    n, size = 32, 32 * 4 * 4096 * 256
    plan, res = _plan(env, "all_reduce", size, algo="ring", protocol="Simple", channels=4)
    assert plan.n_flows == 4 * n * 2 * (n - 1)
    for r in (0, 17, 31):
        assert _sent_by(plan, r) == 2 * (n - 1) * size // n
    t = estimate_plan(plan, env).makespan_s
    busbw = size / t * 2 * (n - 1) / n
    assert busbw >= 0.9 * 100e9 / 8 * env.tuning.links["network"].efficiency
    full = (1 << n) - 1
    mask, in_ch = _channel_reach(plan, 3)
    last = int(np.nonzero(in_ch & (plan.kind == FLOW) & (plan.dst == 9))[0].max())
    assert mask[last] == full
