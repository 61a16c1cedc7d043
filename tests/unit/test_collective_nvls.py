"""NVLS / NVLS-Tree: catalog flag, NVSwitch endpoints, selection, byte conservation, published busbw.

Published figures: NCCL maintainer in nccl-tests#212 (8x H100 NVLS all-reduce ~480 GB/s busbw, ring
~370), nccl#1455 (NVLS busbw by GPU count: 370 at 2-4 GPUs, 420, 440, 460, 480 at 5-8) and the
dgxc-benchmarking all_reduce_perf sample (shared/reference/calibration/nccl_tests_public.csv).
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from hetero_ns3.collectives import CollectiveCall, CollectiveEnv, choose
from hetero_ns3.collectives.algorithms.nvls import wire_scale
from hetero_ns3.compute.gpus import get_gpu
from hetero_ns3.errors import PlanningError
from hetero_ns3.network.analytic import simulate_plan
from hetero_ns3.plan.dag import FLOW
from hetero_ns3.topology import build_graph, load_cluster, resolve_topology
from tests.collective_helpers import planned

GIB = 1 << 30

#: nccl#1455: measured NVLS-default all-reduce busbw (GB/s) on one DGX H100 by GPU count.
GPU_COUNT_CURVE = {2: 370, 3: 370, 4: 370, 5: 420, 6: 440, 7: 460, 8: 480}

#: dgxc-benchmarking sample all_reduce_perf on 8x H100 (busbw GB/s, out of place), >= 64 MiB.
NCCL_TESTS_LARGE = {
    64 << 20: 361.67,
    128 << 20: 400.53,
    256 << 20: 422.25,
    512 << 20: 436.79,
    1 << 30: 466.33,
    2 << 30: 473.37,
    4 << 30: 477.24,
    8 << 30: 480.16,
    16 << 30: 479.9,
}


@pytest.fixture(scope="module")
def h100():
    g = resolve_topology("dgx-h100-rail")
    return g, CollectiveEnv.from_graph(g)


def _busbw(g, env, n, size, **kw):
    call = CollectiveCall("all_reduce", env.gpus[:n], size, **kw)
    res, plan = planned(env, call)
    t = simulate_plan(g, plan).times.makespan_s
    return res, size / t / 1e9 * 2 * (n - 1) / n


def test_catalog_flag_and_endpoints():
    assert get_gpu("H100-SXM").nvls and get_gpu("H200-SXM").nvls and get_gpu("B200").nvls
    assert not get_gpu("A100-SXM-80GB").nvls and not get_gpu("H100-PCIe").nvls
    g = build_graph(load_cluster("dgx-h100-rail"))
    eps = [n for n in g.nodes if n.role == "nvls"]
    assert len(eps) == 16 and eps[0].name == "n0.nvls" and eps[0].zone == "n0"
    assert "n0.nvls" not in CollectiveEnv.from_graph(g).gpus
    assert not [n for n in build_graph(load_cluster("a100-fattree")).nodes if n.role == "nvls"]


def test_selection_follows_nccl(h100):
    g, env = h100
    group = env.gpus[:8]
    assert choose(CollectiveCall("all_reduce", group, GIB), env).algo == "nvls"
    assert choose(CollectiveCall("all_reduce", group, 4096), env).algo != "nvls"  # latency-bound: LL
    for n in (2, 3, 4):  # S(1 + 1/n) per port is no better than the ring's 2S(n-1)/n
        assert choose(CollectiveCall("all_reduce", env.gpus[:n], GIB), env).algo == "ring"
    # Non-all-reduce ops: NVLS moves as much or more per port at a lower rate, so ring stays (~370).
    assert choose(CollectiveCall("all_gather", group, GIB), env).algo == "ring"
    assert choose(CollectiveCall("reduce_scatter", group, GIB), env).algo == "ring"
    assert choose(CollectiveCall("all_reduce", env.gpus[:16], GIB), env).algo == "nvls_tree"
    one_per_node = (env.gpus[0], env.gpus[8])
    assert choose(CollectiveCall("all_reduce", one_per_node, GIB), env).algo not in ("nvls", "nvls_tree")
    forced = choose(CollectiveCall("all_reduce", group, GIB, algo="ring"), env)
    assert forced.algo == "ring" and forced.source == "override"
    with pytest.raises(PlanningError, match="Simple"):
        choose(CollectiveCall("all_reduce", group, GIB, algo="nvls", protocol="LL"), env)
    with pytest.raises(PlanningError, match="one node"):
        choose(CollectiveCall("all_reduce", env.gpus[:16], GIB, algo="nvls"), env)
    a100 = CollectiveEnv.from_graph(resolve_topology("a100-fattree"))
    assert choose(CollectiveCall("all_reduce", a100.gpus[:8], GIB), a100).algo != "nvls"
    with pytest.raises(PlanningError, match="NVLS"):
        choose(CollectiveCall("all_reduce", a100.gpus[:8], GIB, algo="nvls"), a100)


def _ancestors(plan, tid):
    seen, stack = set(), [tid]
    while stack:
        t = stack.pop()
        for d in plan.deps(t):
            if int(d) not in seen:
                seen.add(int(d))
                stack.append(int(d))
    return seen


@pytest.mark.parametrize("n", [5, 8])
def test_all_reduce_bytes_conserved_and_volume(h100, n):
    """Every GPU receives every round's reduced chunks, each made of all GPUs' reads; S(1+1/N) per port."""
    g, env = h100
    size = 48 << 20
    group = env.gpus[:n]
    res, plan = planned(env, CollectiveCall("all_reduce", group, size))
    assert res.algo == "nvls"
    ep = plan.gpus.index("n0.nvls")
    fl = np.flatnonzero(plan.kind == FLOW)
    labels = np.asarray(plan.labels, dtype=object)[plan.label[fl]]
    chunk = env.tuning.nvls.chunk(size, n)
    f = env.wire_overhead(group[0], group[1]) * wire_scale(env, group[0], chunk)
    for r, gpu in enumerate(group):
        out_b = plan.size_bytes[fl[plan.gpu[fl] == r]].sum() / f
        in_b = plan.size_bytes[fl[plan.dst[fl] == r]].sum() / f
        assert out_b == pytest.approx(size * (1 + 1 / n), rel=1e-4)
        assert in_b == pytest.approx(size * (1 + 1 / n), rel=1e-4)
        mc = fl[(plan.dst[fl] == r) & np.array(["nvls-multicast" in x for x in labels])]
        assert plan.size_bytes[mc].sum() / f == pytest.approx(size, rel=1e-4)  # the whole reduced buffer
        for t in mc:  # ... each round after reads from every GPU of the group
            anc = np.fromiter(_ancestors(plan, int(t)), dtype=np.int64)
            reads = anc[(plan.kind[anc] == FLOW) & (plan.dst[anc] == ep)]
            assert set(plan.gpu[reads].tolist()) == set(range(n)), gpu
    assert not np.any((plan.gpu[fl] == ep) & (plan.dst[fl] == ep))


def test_reduce_scatter_and_all_gather_volumes(h100):
    g, env = h100
    n, size = 8, 32 << 20
    for op, out_v, in_v in (("reduce_scatter", size, size / n), ("all_gather", size / n, size)):
        res, plan = planned(env, CollectiveCall(op, env.gpus[:n], size, algo="nvls"))
        fl = plan.kind == FLOW
        f = env.wire_overhead(env.gpus[0], env.gpus[1]) * wire_scale(env, env.gpus[0], env.tuning.nvls.chunk(size, n))
        for r in range(n):
            assert plan.size_bytes[fl & (plan.gpu == r)].sum() / f == pytest.approx(out_v, rel=1e-4)
            assert plan.size_bytes[fl & (plan.dst == r)].sum() / f == pytest.approx(in_v, rel=1e-4)
        assert simulate_plan(g, plan).times.makespan_s > 0


def test_h100_nvls_busbw_matches_published(h100):
    g, env = h100
    for size in (GIB, 4 * GIB):
        res, bus = _busbw(g, env, 8, size)
        assert res.algo == "nvls"
        assert bus == pytest.approx(480, rel=0.05), size
    res, ring = _busbw(g, env, 8, GIB, algo="ring")
    assert ring == pytest.approx(370, rel=0.03)


def test_gpu_count_curve(h100):
    g, env = h100
    for n, published in GPU_COUNT_CURVE.items():
        _, bus = _busbw(g, env, n, 2 * GIB)
        assert bus == pytest.approx(published, rel=0.10), n


def test_nccl_tests_curve_large_sizes(h100):
    g, env = h100
    for size, published in NCCL_TESTS_LARGE.items():
        _, bus = _busbw(g, env, 8, size)
        assert bus == pytest.approx(published, rel=0.05), size


def test_nvls_tree_two_nodes(h100):
    """NVLS-Tree: every GPU gets the whole reduced buffer; each head sends S/N per tree edge."""
    g, env = h100
    group = env.gpus[:16]
    size = 256 << 20
    res, plan = planned(env, CollectiveCall("all_reduce", group, size))
    assert res.algo == "nvls_tree"
    fl = np.flatnonzero(plan.kind == FLOW)
    labels = np.asarray(plan.labels, dtype=object)[plan.label[fl]]
    up = fl[np.array(["tree-up" in x for x in labels])]
    down = fl[np.array(["tree-down" in x for x in labels])]
    assert plan.size_bytes[up].sum() == size  # 2 nodes: 8 heads x S/8 up, the same down
    assert plan.size_bytes[down].sum() == size
    chunk = env.tuning.nvls.chunk(size, 8, tree=True, nodes=2)
    f = env.wire_overhead(group[0], group[1]) * wire_scale(env, group[0], chunk)
    mc = np.array(["nvls-multicast" in x for x in labels])
    for r in range(16):
        got = plan.size_bytes[fl[mc & (plan.dst[fl] == r)]].sum() / f
        assert got == pytest.approx(size, rel=1e-4)
    t = simulate_plan(g, plan).times.makespan_s
    _, ring_plan = planned(env, CollectiveCall("all_reduce", group, size, algo="ring"))
    assert t < 0.95 * simulate_plan(g, ring_plan).times.makespan_s  # per NIC S/8 each way vs the ring's 2S(n-1)/n/8
    assert math.isfinite(res.predicted_s) and res.predicted_s == pytest.approx(t, rel=0.05)


def test_run_summary_leaves_endpoints_out(h100):
    """A plan with NVLS endpoints: summaries count and break down GPUs only; switch traffic is intra-node."""
    from hetero_ns3.results.meta import GpuMeta
    from hetero_ns3.results.summary import summarize

    g, env = h100
    group = env.gpus[:8]
    res, plan = planned(env, CollectiveCall("all_reduce", group, 64 << 20))
    assert res.algo == "nvls" and plan.gpus[-1] == "n0.nvls"
    s = summarize(plan, simulate_plan(g, plan).times, {x: GpuMeta("H100-SXM", 0) for x in group})
    assert sorted(s.per_gpu) == sorted(group) and list(s.per_gpu_type) == ["H100-SXM"]
    assert s.counts["gpus"] == 8
    traffic = s.counts["traffic"]["comm"]
    assert traffic["inter_node_bytes"] == 0 and traffic["intra_node_bytes"] == traffic["bytes"]
