"""NCCL's per-generation NVLink efficiency (``[links.nvlink] wire_overhead_by_arch``).

Source: NCCL v2.30.7 ``src/graph/topo.h``, effective bandwidth per NVLink by compute capability: SM80
20.0, SM90 20.6, SM100 40.1 GB/s, of a 25 / 25 / 50 GB/s line rate per link and direction.
"""

from __future__ import annotations

import copy

import pytest

from hetero_ns3.collectives import CollectiveCall, CollectiveEnv, busbw_factor, plan_collective
from hetero_ns3.collectives.tuning import _REPO_FILE, load_tuning, tuning_from_dict
from hetero_ns3.errors import ScenarioError
from hetero_ns3.inputs import read_toml
from hetero_ns3.network.analytic import simulate_plan
from hetero_ns3.plan.builder import PlanBuilder
from hetero_ns3.topology import resolve_topology

GIB = 1 << 30


def test_nvlink_overhead_by_generation_follows_nccl_topo() -> None:
    t = load_tuning()
    nv = t.links["nvlink"]
    assert nv.overhead("Ampere") == pytest.approx(25.0 / 20.0)
    assert nv.overhead("Hopper") == pytest.approx(25.0 / 20.6, rel=0.003)  # the calibrated 450/370
    assert nv.overhead("Blackwell") == pytest.approx(50.0 / 40.1)
    assert nv.overhead("CDNA 3") == pytest.approx(64.0 / 46.552)  # MI300X xGMI link: TransferBench mean
    assert nv.overhead("CDNA 2") == nv.wire_overhead  # not listed: the default
    env = CollectiveEnv.from_graph(resolve_topology("a100-fattree"))
    assert env.wire_overhead("n0.g0", "n0.g1") == pytest.approx(1.25)
    assert env.hop_bandwidth_Bps("n0.g0", "n0.g1") == pytest.approx(240e9, rel=1e-6)  # 12 links x 20.0


def test_a100_ring_reaches_nccls_240_gbps() -> None:
    """8x A100 ring all-reduce at 4 GiB: NCCL's 12 links x SM80_NVLINK_BW 20.0 = 240 GB/s busbw (2%)."""
    g = resolve_topology("a100-fattree")
    env = CollectiveEnv.from_graph(g)
    call = CollectiveCall("all_reduce", tuple(env.gpus[:8]), 4 * GIB)
    b = PlanBuilder(call.group)
    plan_collective(b, call, env)
    t = simulate_plan(g, b.build(), seed=1).times.makespan_s
    got = 4 * GIB / t / 1e9 * busbw_factor("all_reduce", 8)
    assert got == pytest.approx(240.0, rel=0.02)


def test_bad_overhead_by_arch_names_the_field() -> None:
    data = copy.deepcopy(read_toml(_REPO_FILE, "tuning"))
    data["links"]["nvlink"]["wire_overhead_by_arch"]["Ampere"] = 0.8
    with pytest.raises(ScenarioError, match=r"links\.nvlink\.wire_overhead_by_arch\.Ampere .*>= 1"):
        tuning_from_dict(data)
