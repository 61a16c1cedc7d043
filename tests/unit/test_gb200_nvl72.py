"""GB200 NVL72: the catalog's GB200, the rack-scale NVLink domain as one node, NVLS across 72 GPUs.

Analytic answers: the GB200 is the B200 GPU at 1200 W (same SMs, dense peaks 2500 / 5000 TFLOP/s); with no
measured matmul ceilings of the MAMF table's GB200 row, so a large GEMM runs faster than on B200 by exactly the
ratio of peak x efficiency (4-5%, not the 11% of the peaks); Azure's earlier cuBLASLt figure, converted to the MAMF
table's method, sits 16% below it. An all-reduce over one rack moves S(1 + 1/N) bytes per GPU port
through the NVLink switch (NVLS), never touches the network, and its bus bandwidth lies above what any ring
over 900 GB/s links reaches after NCCL's per-link efficiency and below the NVLS rate cap.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from hetero_ns3.collectives import CollectiveCall, CollectiveEnv
from hetero_ns3.collectives.algorithms.nvls import nvls_heads, wire_scale
from hetero_ns3.compute.gpus import get_gpu
from hetero_ns3.compute.roofline import Roofline, _wave_factor, default_efficiency
from hetero_ns3.network.analytic import simulate_plan
from hetero_ns3.plan.dag import FLOW
from hetero_ns3.topology import build_graph, load_cluster
from hetero_ns3.workload.layers import gemm
from tests.collective_helpers import planned

GIB = 1 << 30


def test_gb200_is_the_b200_gpu_at_1200_w() -> None:
    gb, b = get_gpu("GB200"), get_gpu("B200")
    assert (gb.architecture, gb.sm_count, gb.nvls) == (b.architecture, b.sm_count, True)
    assert gb.peak_flops("bf16") == pytest.approx(2500e12)
    assert gb.peak_flops("fp8") == pytest.approx(5000e12)
    assert gb.hbm_bw_Bps == pytest.approx(8.0e12)
    assert gb.nvlink_bw_Bps == pytest.approx(900e9)  # 1.8 TB/s both directions
    assert gb.tdp_w == 1200 and gb.hbm_bytes == 185 * 2**30


def test_gb200_ceilings_are_the_mamf_tables_row() -> None:
    """The MAMF table (S. Bekman's ml-engineering, revision 744d01e, August 2026) measures GB200 at BF16 1822.0 /
    2500 and FP8 3615.6 / 5000 TFLOP/s: 4.4 / 5.3% above B200's 1745.0 / 3432.5 at 1000 W, far less than the
    11% of the nominal peaks (1200 W buys clocks the tensor cores cannot hold at full load)."""
    gb, b = get_gpu("GB200"), get_gpu("B200")
    assert gb.mamf_bf16 == pytest.approx(1822.0 / 2500, abs=1e-4)
    assert gb.mamf_fp8 == pytest.approx(3615.6 / 5000, abs=1e-4)
    gain_bf16 = gb.mamf_bf16 * 2500 / (b.mamf_bf16 * 2250)
    gain_fp8 = gb.mamf_fp8 * 5000 / (b.mamf_fp8 * 4500)
    assert 1.03 < gain_bf16 < 1.06 and 1.03 < gain_fp8 < 1.06


def test_azures_gb200_figure_sits_a_fifth_below_the_mamf_row() -> None:
    """Azure's AI-benchmarking-guide (cuBLASLt, fixed square shapes, 10,000 warm-up iterations; best listed
    shape) against the MAMF table (brute-force shape search) on the GPUs both measured in 2024: A100 80GB FP16
    256.5 against BF16 271.2 TFLOP/s, H100 FP8 1382.2 against 1402.6, H200 FP8 1366.3 against 1453.4, mean ratio
    0.957 (each within 3% of it). GB200's 2906.9 TFLOP/s (Azure, CUDA 12.8, 2025), the catalog's FP8 ceiling
    until session 26, is 0.80 of the MAMF row: five standard deviations of the method ratio away, so the gap is
    the software of early 2025, not the method. The catalog's A100 / H100 / H200 ceilings are the MAMF figures
    used."""
    ratios = np.array([256.5 / 271.2, 1382.2 / 1402.6, 1366.3 / 1453.4])
    k = ratios.mean()
    assert k == pytest.approx(0.957, abs=5e-4)
    assert np.abs(ratios / k - 1).max() < 0.03
    assert get_gpu("A100-SXM-80GB").mamf_bf16 == pytest.approx(271.2 / 312, abs=1e-3)
    assert get_gpu("H100-SXM").mamf_fp8 == pytest.approx(1402.6 / 1979, abs=1e-3)
    assert get_gpu("H200-SXM").mamf_fp8 == pytest.approx(1453.4 / 1979, abs=1e-3)
    gb200_azure = 2906.9 / (get_gpu("GB200").mamf_fp8 * 5000)
    assert gb200_azure == pytest.approx(0.804, abs=1e-3)
    assert (k - gb200_azure) / ratios.std() > 5


def test_gb200_gemm_follows_its_measured_ceilings() -> None:
    """Both precisions take the measured ceilings (gemm = 0.85 x MAMF / 0.869), and a large GEMM's time ratio to
    B200 is peak x efficiency, wave quantization identical (same SM count)."""
    gb, b = get_gpu("GB200"), get_gpu("B200")
    e_gb, e_b = default_efficiency(gb), default_efficiency(b)
    assert e_gb.gemm == pytest.approx(0.85 * 0.7288 / 0.869)
    assert e_gb.gemm_fp8 == pytest.approx(0.85 * 0.7231 / 0.869)
    assert e_b.gemm == pytest.approx(0.85 * 0.776 / 0.869)
    rf = Roofline("bf16")
    for g in (gb, b):
        rf._eff[g.name] = replace(default_efficiency(g), launch_overhead_s=0.0)
    k = gemm("g", 8192, 8192, 8192)
    assert _wave_factor(e_gb, 8192, 8192, gb.sm_count) == _wave_factor(e_b, 8192, 8192, b.sm_count)
    ratio = rf.kernel_time(k, b) / rf.kernel_time(k, gb)
    assert ratio == pytest.approx((2500 * e_gb.gemm) / (2250 * e_b.gemm), rel=1e-9)
    assert 1.03 < ratio < 1.06


@pytest.fixture(scope="module")
def nvl72():
    g = build_graph(load_cluster("gb200-nvl72"))
    return g, CollectiveEnv.from_graph(g)


def test_nvl72_preset_is_two_72_gpu_nvlink_domains(nvl72) -> None:
    c = load_cluster("gb200-nvl72")
    gpus = c.gpus()
    assert len(gpus) == 144 and {x.node for x in gpus} == {0, 1}
    assert all(x.gpu_type == "GB200" and x.nic_rate_bps == 400e9 for x in gpus)
    g, env = nvl72
    eps = [n.name for n in g.nodes if n.role == "nvls"]
    assert eps == ["n0.nvls", "n1.nvls"]
    assert {env.node_of(x) for x in env.gpus[:72]} == {env.node_of(env.gpus[0])}
    assert env.node_of(env.gpus[72]) != env.node_of(env.gpus[0])


def test_rack_all_reduce_is_nvls_inside_the_rack(nvl72) -> None:
    g, env = nvl72
    n, size = 72, GIB
    group = env.gpus[:n]
    res, plan = planned(env, CollectiveCall("all_reduce", group, size))
    assert res.algo == "nvls"
    fl = np.flatnonzero(plan.kind == FLOW)
    ep = plan.gpus.index("n0.nvls")
    assert set(plan.gpu[fl].tolist()) | set(plan.dst[fl].tolist()) <= set(range(n)) | {ep}  # NVLink only
    # NCCL's NVLS graph has at most 32 channels, one head each: 32 of the 72 GPUs reduce and store a chunk.
    heads = nvls_heads(group, 32)
    assert len(heads) == 32 and len(set(heads)) == 32 and heads[0] == group[0]
    f = env.wire_overhead(group[0], group[1]) * wire_scale(env, group[0], env.tuning.nvls.chunk(size, 32))
    for r in range(n):
        want = size * (1 + 1 / 32) if group[r] in heads else size  # a head's chunk more, each way
        assert plan.size_bytes[fl[plan.gpu[fl] == r]].sum() / f == pytest.approx(want, rel=1e-4)
        assert plan.size_bytes[fl[plan.dst[fl] == r]].sum() / f == pytest.approx(want, rel=1e-4)
    sim = simulate_plan(g, plan)
    algbw = size / sim.times.makespan_s / 1e9
    busbw = algbw * 2 * (n - 1) / n
    ring_ceiling = 900 / env.wire_overhead(group[0], group[1])  # GB/s a ring's busbw cannot exceed
    nvls_cap = ring_ceiling * env.tuning.nvls.efficiency["Blackwell"]
    assert busbw > ring_ceiling
    assert algbw < nvls_cap


def test_nvls_tree_across_racks_crosses_the_network_from_32_heads_per_rack(nvl72) -> None:
    """Two racks (144 GPUs): NVLS-Tree's network legs start and end only at each rack's 32 heads, and with
    two nodes (one tree) the heads of one rack send the whole buffer up (S / 32 each) and receive it back."""
    g, env = nvl72
    group, size = tuple(env.gpus), GIB
    res, plan = planned(env, CollectiveCall("all_reduce", group, size))
    assert res.algo == "nvls_tree"
    fl = np.flatnonzero(plan.kind == FLOW)
    names = plan.gpus
    gpus = set(env.gpus)
    pairs = [(i, names[plan.gpu[i]], names[plan.dst[i]]) for i in fl]
    net = [i for i, a, z in pairs if a in gpus and z in gpus and env.node_of(a) != env.node_of(z)]
    senders = {names[plan.gpu[i]] for i in net}
    receivers = {names[plan.dst[i]] for i in net}
    heads = set(nvls_heads(group[:72], 32)) | set(nvls_heads(group[72:], 32))
    assert senders == receivers == heads
    sent = {h: 0.0 for h in heads}
    for i in net:
        sent[names[plan.gpu[i]]] += plan.size_bytes[i]
    assert sum(sent.values()) == pytest.approx(2 * size, rel=1e-6)  # up and down, payload bytes
    assert all(v == pytest.approx(size / 32, rel=1e-3) for v in sent.values())
