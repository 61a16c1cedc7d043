"""The default DCQCN preset against the reference implementation it is taken from (issue 14).

Reference figures: the HPCC artifact's RDMA model (``rdma-hw.cc`` CC_MODE 1 with ``run.py --cc dcqcn``), as
carried by aliyun/ns-3-alibabacloud@c2bfbf4, run on the same 8-to-1 incast (8 x 10 MB, ``star:9``, 100 Gb/s,
1 us links, 32 MiB buffer) by ``bench/reference_incast.sh`` with seeds 1-30 per DATA payload size
(docs/roce.md, "Reference implementation"). Makespan / ideal uses each simulator's own wire bytes (ours 62
header bytes per frame, the reference's 52). Ours is averaged over 6 seeds (the seed drives the random ECN
marking; one run's ratio spreads by about 0.04 around the mean in both simulators), so each tolerance is
about 2.5 standard errors of that mean: 0.04 on the ratio, 8 % on the CNP count, 10 % on the queue p99.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from hetero_ns3.network.config import CcConfig, NetworkConfig, NicConfig
from hetero_ns3.network.incast import HEADER_BYTES, incast_flows, jain_index
from hetero_ns3.network.ns3.roce import egress_port, simulate_flows
from hetero_ns3.topology import resolve_topology

pytestmark = pytest.mark.ns3

RATE = 100e9
N = 8
SIZE = 10_000_000
SEEDS = range(1, 7)

# payload bytes -> the reference's means over seeds 1-30: makespan / ideal, CNPs (ECN-marked packets: one ACK
# with the CNP flag each), bottleneck queue p99 in bytes (1 us samples). Its smallest ratio in the 60 runs: 1.128.
REFERENCE = {4096: (1.172, 2540, 2.62e6), 1000: (1.204, 3266, 1.87e6)}


def _incast(payload: int, pacing: str) -> tuple[list[float], list[int], list[float]]:
    """Makespan / ideal, CNPs and queue p99 (bytes) of the default-preset incast over SEEDS."""
    graph = resolve_topology(f"star:{N + 1}", RATE, 1e-6)
    port = egress_port(graph, "sw0", "h0")
    nic = NicConfig()
    nic = replace(nic, segment_bytes={**nic.segment_bytes, "network": payload}, default_segment_bytes=payload)
    nic = replace(nic, pacing_on_rate_change=pacing)
    config = NetworkConfig(cc=CcConfig(kind="dcqcn"), nic=nic)  # the default preset: hpcc-artifact
    ideal = (N * SIZE + N * -(-SIZE // payload) * HEADER_BYTES) * 8 / RATE
    ratios, cnps, p99s = [], [], []
    for seed in SEEDS:
        res = simulate_flows(graph, incast_flows(N, SIZE), config, seed=seed, sample_ports=[port])
        assert res.completed == N
        assert int(res.ports["pfc_pause_sent"].sum()) == 0  # as in the reference: DCQCN, not PFC, holds the queue
        assert jain_index(res.flows) >= 0.99
        ratios.append(float(res.flows["finish_s"].max()) / ideal)
        cnps.append(int(res.flows["cnps"].sum()))
        p99s.append(float(np.percentile(res.queues["bytes"].to_numpy(), 99)))
    return ratios, cnps, p99s


@pytest.mark.parametrize("pacing", ["rescale", "keep"])
@pytest.mark.parametrize("payload", sorted(REFERENCE))
def test_default_dcqcn_incast_matches_the_reference_implementation(capi, payload, pacing):
    """Same makespan / ideal, CNP count and standing queue as the artifact's code on the same incast, fair
    shares, and no run within the issue's 1.10x: the miss is a property of the published constants and code.
    Both with our token-bucket pacing (`rescale`, the default) and with the artifact's own DCQCN rule (`keep`:
    a rate change leaves the pending gap alone)."""
    ref_ratio, ref_cnps, ref_p99 = REFERENCE[payload]
    ratios, cnps, p99s = _incast(payload, pacing)
    assert len(set(ratios)) > 1  # the seeds did change the marking draws: the mean is over distinct runs
    assert min(ratios) > 1.10
    assert abs(np.mean(ratios) - ref_ratio) <= 0.04
    assert abs(np.mean(cnps) / ref_cnps - 1) <= 0.08
    assert abs(np.mean(p99s) / ref_p99 - 1) <= 0.10


def test_keeping_the_gap_after_a_cut_marks_more(capi):
    """The one deliberate difference from the reference (docs/roce.md): when a cut lands, `rescale` stretches
    the gap still owed while `keep` (the artifact) sends that frame on the old schedule, so `keep` queues more
    and draws more CNPs on the same seeds (30-seed means: 2558 against 2468 CNPs, p99 2.60 against 2.48 MB;
    the reference 2540, 2.62 MB)."""
    _r0, cnps_rescale, p99_rescale = _incast(4096, "rescale")
    _r1, cnps_keep, p99_keep = _incast(4096, "keep")
    assert np.mean(cnps_keep) > 1.02 * np.mean(cnps_rescale)
    assert np.mean(p99_keep) > 1.02 * np.mean(p99_rescale)
