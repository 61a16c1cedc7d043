"""Topologies in the packet simulator: permutation goodput, intra-node fabrics, NVLink segment size.

Goodput of a host is compared with the same transfer alone on the same fabric (the "NIC goodput":
line rate minus framing and the path's latency), measured in the same test.
"""

from __future__ import annotations

import dataclasses
import random

import numpy as np
import pandas as pd
import pytest

from hetero_ns3.topology import build_graph, parse_cluster, plain_network, resolve_topology
from hetero_ns3.topology.spec import NetworkSpec, TierSpec

pytestmark = pytest.mark.ns3

RATE = 100e9


def _sim(graph, rows, spray=False, cc="dcqcn", seed=1):
    from hetero_ns3.network.config import CcConfig, NetworkConfig, NicConfig, RoutingConfig
    from hetero_ns3.network.ns3.roce import simulate_flows

    flows = pd.DataFrame(rows, columns=["src", "dst", "size_bytes"])
    flows["start_s"] = 0.0
    # Spraying reorders packets: pair it with a receiver that accepts out-of-order data (as real
    # fabrics with adaptive routing do); per-flow ECMP keeps go-back-N.
    cfg = NetworkConfig(
        cc=CcConfig(kind=cc),
        routing=RoutingConfig(packet_spray=spray, ecmp_seed=seed),
        nic=NicConfig(reorder_tolerant=spray),
    )
    return simulate_flows(graph, flows, cfg, seed=1)


def _cross_permutation(n: int, seed: int) -> list[int]:
    """A random permutation in which every host sends across the bisection (first half <-> second half)."""
    rng = random.Random(seed)
    half = n // 2
    a, b = list(range(half, n)), list(range(half))
    rng.shuffle(a)
    rng.shuffle(b)
    return a + b


def _host_goodput_ratio(graph, dst: list[int], size: int, qps: int, spray=False) -> np.ndarray:
    """Per host: its goodput in the permutation / the same transfer alone (h0 -> dst[0])."""
    rows = [(f"h{i}", f"h{d}", size // qps) for i, d in enumerate(dst) for _ in range(qps)]
    solo = _sim(graph, [r for r in rows if r[0] == "h0"], spray=spray).flows.finish_s.max()
    fin = _sim(graph, rows, spray=spray).flows.groupby("src").finish_s.max()
    return (solo / fin).to_numpy()


def test_star_random_permutation_reaches_nic_goodput(capi):
    g = resolve_topology("star:16", link_rate_bps=RATE)
    ratio = _host_goodput_ratio(g, _cross_permutation(16, 7), 1_000_000, qps=1)
    assert ratio.min() >= 0.9


def _fattree(r_edge: float):
    net = NetworkSpec("fattree", k=4, tiers={"edge": TierSpec(oversubscription=r_edge)})
    n = round(64 * r_edge / 4)
    return plain_network(n, net, RATE), n


def test_fattree_permutation_ecmp_nonblocking_vs_oversubscribed(capi):
    """Per-flow ECMP, 16 QPs per host pair (as NCCL spreads channels over QPs).

    Oversubscribed 2:1 at the edge, every flow crossing the bisection: about 1/ratio of the NIC
    goodput (less a hashing imbalance). Non-blocking: hash collisions cost about a quarter.
    """
    g1, n1 = _fattree(1.0)
    g2, n2 = _fattree(2.0)
    nb = _host_goodput_ratio(g1, _cross_permutation(n1, 2), 2_000_000, qps=16)
    ov = _host_goodput_ratio(g2, _cross_permutation(n2, 2), 2_000_000, qps=16)
    assert 0.35 <= ov.mean() <= 0.55
    assert ov.max() <= 0.6
    assert nb.mean() >= 0.65
    assert nb.mean() >= 1.5 * ov.mean()


def test_fattree_permutation_spray_nonblocking_reaches_90pct(capi):
    """Per-packet spraying with a reorder-tolerant receiver: no hash collisions, >= 90% of NIC goodput."""
    g, n = _fattree(1.0)
    ratio = _host_goodput_ratio(g, _cross_permutation(n, 2), 2_000_000, qps=1, spray=True)
    assert ratio.min() >= 0.9


def _two_node_cluster(fabric: dict, nics: dict, gpu: str = "H100-SXM"):
    data = {
        "name": "pair",
        "groups": [{"name": "g", "count": 2, "gpu": gpu, "gpus_per_node": 8, "fabric": fabric, "nics": nics}],
        "network": {"kind": "rail"},
    }
    return build_graph(parse_cluster(data))


def test_pcie_root_complex_is_shared(capi):
    """L40S-like node: 4 GPUs behind PCIe switch 0 send to the 4 behind switch 1 through one Gen4 x16
    uplink: together they get the PCIe rate (252 Gbps), each a quarter of what one gets alone."""
    g = _two_node_cluster(
        {
            "kind": "pcie",
            "pcie_gen": 4,
            "pcie_switches": [{"gpus": [0, 1, 2, 3], "nics": [0]}, {"gpus": [4, 5, 6, 7], "nics": [1]}],
        },
        {"count": 2, "rate": "200Gbps"},
        gpu="L40S",
    )
    size = 2_000_000
    # The property is the uplink's capacity, not congestion control: without CC the four share it at its
    # rate (DCQCN's default preset adds its own recovery time on top, see docs/roce.md "Presets").
    solo = _sim(g, [("n0.g0", "n0.g4", size)], cc="none").flows.fct_s.iloc[0]
    four = _sim(g, [(f"n0.g{i}", f"n0.g{4 + i}", size) for i in range(4)], cc="none").flows.fct_s
    assert four.max() / solo == pytest.approx(4.0, rel=0.1)


def test_gpu_to_remote_gpu_limited_by_nic_not_pcie(capi):
    """H100 nodes: PCIe Gen5 x16 (504 Gbps) feeds each GPU's own 400G NIC, so two GPUs sending to
    their rail peers on another node both get close to 400 Gbps, never more."""
    g = _two_node_cluster({"kind": "nvswitch"}, {"count": 8, "rate": "400Gbps"})
    size = 4_000_000
    r = _sim(g, [("n0.g0", "n1.g0", size), ("n0.g1", "n1.g1", size)]).flows
    rate = size * 8 / r.fct_s
    assert rate.min() >= 0.9 * 400e9
    assert rate.max() <= 400e9


def _nvlink_run(seg: int):
    g = _two_node_cluster({"kind": "nvswitch", "nvlink_segment": seg}, {"count": 8, "rate": "400Gbps"})
    rows = [(f"n0.g{i}", f"n0.g{(i + 1) % 8}", 8_000_000) for i in range(8)]  # NVLink ring
    rows.append(("n0.g4", "n0.g1", 8_000_000))  # contention on g1's NVLink
    rows += [(f"n0.g{i}", f"n1.g{i}", 1_000_000) for i in range(8)]  # network traffic alongside
    return _sim(g, rows)


def test_nvlink_segment_size_costs_little_accuracy(capi):
    """64 KiB NVLink segments vs 4 KiB: completion times within 3 %, several times fewer events."""
    ref = _nvlink_run(4096)
    big = _nvlink_run(65536)
    err = np.abs(big.flows.fct_s.to_numpy() / ref.flows.fct_s.to_numpy() - 1)
    assert err.max() <= 0.03
    assert big.events * 3 <= ref.events


def test_rail_same_rail_permutation_runs_at_nic_rate(capi):
    """Rail-optimized, 4 H100 nodes: every GPU sends to the same GPU index of another node (a random
    node permutation). Same-rail traffic meets on one rail switch, never collides: >= 90 % of 400G."""
    data = {
        "name": "rail4",
        "groups": [
            {
                "name": "h",
                "count": 4,
                "gpu": "H100-SXM",
                "fabric": {"kind": "nvswitch"},
                "nics": {"count": 8, "rate": "400Gbps"},
            }
        ],
        "network": {"kind": "rail"},
    }
    g = build_graph(parse_cluster(data))
    perm = [2, 3, 1, 0]
    size = 2_000_000
    rows = [(f"n{i}.g{j}", f"n{perm[i]}.g{j}", size) for i in range(4) for j in range(8)]
    solo = _sim(g, rows[:1]).flows.fct_s.iloc[0]
    fct = _sim(g, rows).flows.fct_s
    assert (solo / fct).min() >= 0.9
    assert size * 8 / solo >= 0.9 * 400e9


def test_nvlink_flow_runs_at_nvlink_rate(capi):
    """One GPU-to-GPU flow inside an H100 node runs at the NVLink rate (3.6 Tbps), far above its NIC."""
    g = _two_node_cluster({"kind": "nvswitch"}, {"count": 8, "rate": "400Gbps"})
    size = 16_000_000
    fct = _sim(g, [("n0.g0", "n0.g5", size)]).flows.fct_s.iloc[0]
    assert size * 8 / fct == pytest.approx(3.6e12, rel=0.05)


def test_fattree_shift_permutation_dmodk_reaches_90pct(capi):
    """Static D-mod-K routes (InfiniBand fat-tree style), one QP per pair, every host sending to host
    ``i + 8`` (a shift across the bisection, as a ring's node-to-node step): no two flows share a link, so
    every host reaches >= 90% of its NIC goodput; the same flows under per-flow ECMP collide (mean < 0.8)."""
    net = NetworkSpec("fattree", k=4)
    shift = [(i + 8) % 16 for i in range(16)]
    dmodk = _host_goodput_ratio(plain_network(16, dataclasses.replace(net, routing="dmodk"), RATE), shift, 2_000_000, 1)
    ecmp = _host_goodput_ratio(plain_network(16, net, RATE), shift, 2_000_000, 1)
    assert dmodk.min() >= 0.9
    assert ecmp.mean() < 0.8
