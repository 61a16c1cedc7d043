"""HPCC and PFC against the reference implementation their constants come from (issue 14).

Reference figures: the HPCC artifact's RDMA model (``rdma-hw.cc`` CC_MODE 3, ``switch-node.cc`` INT,
``switch-mmu.cc`` dynamic-threshold shared buffer) as carried by aliyun/ns-3-alibabacloud@c2bfbf4 with the
three local fixes of ``bench/reference_patches.py``, driven by ``bench/reference_incast_driver.cc``
(``bench/reference_incast.sh``; docs/roce.md, "Reference implementation: HPCC and PFC"). Ratios use each
simulator's own wire bytes (ours 62 header bytes per frame + 42 INT with HPCC, the reference's 52 + 42).

HPCC, 8 x 10 MB into one host (``star:9``, 100 Gb/s, 1 us links, 32 MiB buffer), all flows at t = 0 in
both: the reference has no random draw that HPCC sees, and flows started at seed-drawn offsets in
[0, 1 us) (``--jitter-ns=1000``, seeds 1-5) move its makespan / ideal by at most 0.0033, so the tolerance is
0.01 (ours before the pacing-gap rescale missed the ``run.py`` row by 0.047; our ``recommended`` preset is
0.018 off it). Peak queue (the start-up burst): 5 %. Per-flow FCTs and Jain are not compared: which flows finish first
is decided by sub-microsecond ties in both simulators (the reference's Jain moves from 0.94 to 0.91
with the 1 us start offsets at the same makespan).

PFC, 8 x 1 MB into one host with a 1 MiB switch buffer (the reference's settings: dynamic threshold 1/8 of
the free buffer, headroom 3 x rate x delay = 37 500 B per port, resume offset 3 KiB): CC none (no random
draw: one run; tolerances 0.01 on the ratio, 10 % on the paused time, 25 % on PAUSE frames, 5 % on the
peak queue) and DCQCN (the reference's 30-seed means; ours over 6 seeds: 15 % / 20 % / 5 %; medians of
the ratio within 0.01; the mean of the ratio is carried by rare slow seeds in both, 1.30x and 1.13x at
worst). Before ours drained an ingress port's headroom first, its PAUSE count was half the reference's and
the 1000-byte case lost 3 % of the link (ratio 1.030).
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from hetero_ns3.network.config import (
    BufferConfig,
    CcConfig,
    HpccConfig,
    NetworkConfig,
    NicConfig,
    PfcConfig,
)
from hetero_ns3.network.incast import incast_flows, jain_index
from hetero_ns3.network.ns3.roce import egress_port, simulate_flows
from hetero_ns3.topology import resolve_topology

pytestmark = pytest.mark.ns3

RATE = 100e9
N = 8

# row -> (our HpccConfig overrides on the `paper` preset, {payload: (reference makespan / ideal, peak queue B)}).
# runpy: `run.py --cc hp --bw 100` (eta 0.95, MI_THRESH 0, RATE_AI 40 Mb/s, MIN_RATE 1 Gb/s); paper40: the same
# with MI_THRESH 5 (third.cc's default, the paper's maxStage); paper: our preset as is (W_AI 50 Mb/s; the
# reference with --hpai=50 --mi=5; its minimum rate stays 1 Gb/s, ours 100 Mb/s, never reached here).
HPCC_REFERENCE = {
    "runpy": (  # = the `hpcc-artifact` preset (tests/unit/test_roce_config.py)
        HpccConfig(max_stage=0, rate_ai_bps=40e6, min_rate_bps=1e9),
        {4096: (1.071, 0.444e6), 1000: (1.057, 0.401e6)},
    ),
    "paper40": (HpccConfig(rate_ai_bps=40e6, min_rate_bps=1e9), {4096: (1.105, 0.444e6), 1000: (1.065, 0.401e6)}),
    "paper": (HpccConfig(), {4096: (1.104, 0.444e6), 1000: (1.064, 0.401e6)}),
}

# payload -> reference (makespan / ideal, PAUSE frames, paused host-seconds summed, peak queue B), CC none.
PFC_NONE_REFERENCE = {4096: (1.0042, 191, 4352.8e-6, 0.597e6), 1000: (1.0042, 190, 4451.2e-6, 0.550e6)}
# payload -> reference over seeds 1-30, DCQCN: (median ratio, mean PAUSEs, mean paused s, mean peak queue B).
PFC_DCQCN_REFERENCE = {4096: (1.0042, 218.7, 3675.9e-6, 0.5945e6), 1000: (1.0042, 254.6, 3494.2e-6, 0.5454e6)}


def _nic(payload: int) -> NicConfig:
    nic = NicConfig()
    return replace(nic, segment_bytes={**nic.segment_bytes, "network": payload}, default_segment_bytes=payload)


def _run(config: NetworkConfig, size: int, seed: int = 1):
    graph = resolve_topology(f"star:{N + 1}", RATE, 1e-6)
    port = egress_port(graph, "sw0", "h0")
    res = simulate_flows(graph, incast_flows(N, size), config, seed=seed, sample_ports=[port])
    assert res.completed == N
    assert int(res.ports["drops_total"].sum()) == 0
    return res


def _ratio(res, size: int, payload: int, header: int) -> float:
    frames = N * -(-size // payload)
    ideal = (N * size + frames * header) * 8 / RATE
    return float(res.flows["finish_s"].max()) / ideal


@pytest.mark.parametrize("payload", [4096, 1000])
@pytest.mark.parametrize("row", sorted(HPCC_REFERENCE))
def test_hpcc_incast_matches_the_reference_implementation(capi, row, payload):
    """Same makespan / ideal and start-up queue as the artifact's HPCC code on the 8-to-1 incast of 10 MB."""
    hpcc, refs = HPCC_REFERENCE[row]
    ref_ratio, ref_peak = refs[payload]
    config = NetworkConfig(cc=CcConfig(kind="hpcc", preset="paper", hpcc=hpcc), nic=_nic(payload))
    res = _run(config, 10_000_000)
    assert int(res.ports["pfc_pause_sent"].sum()) == 0
    header = config.nic.header_bytes + config.nic.int_header_bytes
    assert abs(_ratio(res, 10_000_000, payload, header) - ref_ratio) <= 0.01
    assert abs(float(res.queues["bytes"].max()) / ref_peak - 1) <= 0.05


def _pfc_config(kind: str, payload: int) -> NetworkConfig:
    return NetworkConfig(
        cc=CcConfig(kind=kind),
        nic=_nic(payload),
        buffer=BufferConfig(switch_buffer_bytes=1024 * 1024),
        pfc=PfcConfig(headroom_bytes=37_500),
    )


@pytest.mark.parametrize("payload", sorted(PFC_NONE_REFERENCE))
def test_pfc_incast_without_cc_matches_the_reference_implementation(capi, payload):
    """PFC alone holds the incast: same link use, paused time, PAUSE count and peak queue, no drop."""
    ref_ratio, ref_pauses, ref_paused, ref_peak = PFC_NONE_REFERENCE[payload]
    config = _pfc_config("none", payload)
    res = _run(config, 1_000_000)
    assert abs(_ratio(res, 1_000_000, payload, config.nic.header_bytes) - ref_ratio) <= 0.01
    assert abs(float(res.ports["paused_s"].sum()) / ref_paused - 1) <= 0.10
    assert abs(int(res.ports["pfc_pause_sent"].sum()) / ref_pauses - 1) <= 0.25
    assert abs(float(res.queues["bytes"].max()) / ref_peak - 1) <= 0.05
    assert jain_index(res.flows) >= 0.99


@pytest.mark.parametrize("payload", sorted(PFC_DCQCN_REFERENCE))
def test_pfc_incast_with_dcqcn_matches_the_reference_implementation(capi, payload):
    """DCQCN over PFC (the default preset): same PAUSE count, paused time and queue as the reference's means."""
    ref_ratio, ref_pauses, ref_paused, ref_peak = PFC_DCQCN_REFERENCE[payload]
    config = _pfc_config("dcqcn", payload)
    ratios, pauses, paused, peaks = [], [], [], []
    for seed in range(1, 7):
        res = _run(config, 1_000_000, seed)
        assert jain_index(res.flows) >= 0.99
        ratios.append(_ratio(res, 1_000_000, payload, config.nic.header_bytes))
        pauses.append(int(res.ports["pfc_pause_sent"].sum()))
        paused.append(float(res.ports["paused_s"].sum()))
        peaks.append(float(res.queues["bytes"].max()))
    assert len(set(pauses)) > 1  # the seeds changed the marking draws
    assert abs(float(np.median(ratios)) - ref_ratio) <= 0.01
    assert abs(np.mean(pauses) / ref_pauses - 1) <= 0.20
    assert abs(np.mean(paused) / ref_paused - 1) <= 0.15
    assert abs(np.mean(peaks) / ref_peak - 1) <= 0.05


def test_recommended_preset_matches_the_reference_with_its_pacing_rule(capi):
    """eta 0.99, maxStage 0 (`recommended`, the reference run with --utgt=0.99 --mi=0 --hpai=50; its floor
    1 Gb/s): the reference reaches 1.046 at 4096 B. With our token-bucket gap (`rescale`, the default) the
    flows pace later after every per-ACK increase and the incast takes 1.077; with the artifact's
    `RdmaHw::ChangeRate` rule (`frame_gap`) ours gives the reference's figure within 0.01 and its unequal
    shares (docs/roce.md, "Reference implementation: HPCC and PFC")."""
    hpcc = HpccConfig(min_rate_bps=1e9)
    header = NicConfig().header_bytes + NicConfig().int_header_bytes
    ratios, jains = {}, {}
    for rule in ("rescale", "frame_gap"):
        nic = replace(_nic(4096), pacing_on_rate_change=rule)
        config = NetworkConfig(cc=CcConfig(kind="hpcc", preset="recommended", hpcc=hpcc), nic=nic)
        res = _run(config, 10_000_000)
        ratios[rule], jains[rule] = _ratio(res, 10_000_000, 4096, header), jain_index(res.flows)
    assert abs(ratios["frame_gap"] - 1.046) <= 0.01
    assert ratios["rescale"] >= 1.046 + 0.02
    assert jains["rescale"] >= 0.98 > 0.95 > jains["frame_gap"]
