"""GPU port traffic over time from a flows table, against hand-computed answers."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from hetero_ns3.results.links import _bytes_at, busiest_ports


def test_cumulative_bytes_of_flows_at_their_mean_rate():
    edges = np.array([0.0, 0.5, 1.0, 2.0, 3.0])
    got = _bytes_at(edges, np.array([0.0, 1.0, 2.0]), np.array([1.0, 3.0, 2.0]), np.array([1000.0, 2000.0, 7.0]))
    assert got == pytest.approx([0.0, 500.0, 1000.0, 2007.0, 3007.0])  # the zero-length flow is a step at t = 2


def test_busiest_ports_rank_and_rate():
    flows = pd.DataFrame(
        {
            "src": ["a.g0", "a.g0", "a.g1"],
            "dst": ["b.g0", "b.g0", "a.g0"],
            "intra_node": [False, False, True],
            "size_bytes": [1_000_000_000, 1_000_000_000, 10],
            "start_s": [0.0, 0.5, 0.0],
            "finish_s": [1.0, 1.0, 1.0],
        }
    )
    ports, series = busiest_ports(flows, top=2, bins=4)
    assert list(ports["port"]) == ["a.g0 nic-out", "b.g0 nic-in"]
    # 1 GB over [0, 1] s is 8 Gbit/s; the second flow adds 16 Gbit/s over [0.5, 1]
    assert series["a.g0 nic-out"].to_numpy() == pytest.approx([8.0, 8.0, 24.0, 24.0])
    assert ports["mean_rate_Gbps"].iloc[0] == pytest.approx(16.0) and ports["peak_rate_Gbps"].iloc[0] == pytest.approx(
        24.0
    )


def test_an_nvswitch_reduction_endpoint_is_not_a_gpu_port():
    """NVLS flows run between GPUs and the NVSwitch's endpoint ``n0.nvls``; the endpoint aggregates every GPU
    of the node, so it topped the "busiest GPU ports" of the report although it is no GPU. The GPUs' own
    ports still carry those flows."""
    flows = pd.DataFrame(
        {
            "src": ["n0.g0", "n0.g1", "n0.nvls", "n0.nvls"],
            "dst": ["n0.nvls", "n0.nvls", "n0.g0", "n0.g1"],
            "intra_node": [True] * 4,
            "size_bytes": [1000, 1000, 1000, 1000],
            "start_s": [0.0, 0.0, 1.0, 1.0],
            "finish_s": [1.0, 1.0, 2.0, 2.0],
        }
    )
    ports, _ = busiest_ports(flows, top=8, bins=2)
    assert sorted(ports["port"]) == ["n0.g0 nvlink-in", "n0.g0 nvlink-out", "n0.g1 nvlink-in", "n0.g1 nvlink-out"]
    assert set(ports["bytes"]) == {1000}
