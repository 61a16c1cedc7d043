"""Pipeline schedules against Megatron-LM's rules and the Narayanan et al. (SC'21) schedule figures."""

from __future__ import annotations

import pytest

from hetero_ns3.scenario.cluster import ClusterSection, NodeGroupSpec, inline_gpus
from hetero_ns3.workload.models import get_model
from hetero_ns3.workload.parallel import ParallelismSpec
from hetero_ns3.workload.planner import build_plan
from hetero_ns3.workload.schedule import peak_in_flight, pipeline_schedule, warmup_steps


@pytest.mark.parametrize("pp", [2, 4, 8])
@pytest.mark.parametrize("m", [8, 16])
def test_1f1b_warmup_is_pp_minus_rank_minus_1(pp: int, m: int) -> None:
    for rank in range(pp):
        steps = pipeline_schedule("1f1b", pp, rank, m)
        first_b = next(i for i, s in enumerate(steps) if s.phase == "B")
        assert first_b == pp - rank - 1 + 1  # warm-up forwards, then one more forward before the first B
        assert warmup_steps("1f1b", pp, rank, m) == pp - rank - 1
        # every microbatch once forward and once backward, backward after its forward
        for phase in "FB":
            assert sorted(s.microbatch for s in steps if s.phase == phase) == list(range(m))
        pos = {(s.phase, s.microbatch): i for i, s in enumerate(steps)}
        assert all(pos[("F", i)] < pos[("B", i)] for i in range(m))
        # Narayanan et al.: a 1F1B stage holds at most pp - rank microbatches
        assert peak_in_flight(steps) == pp - rank


def test_1f1b_order_rank0_pp4_m8() -> None:
    got = [f"{s.phase}{s.microbatch}" for s in pipeline_schedule("1f1b", 4, 0, 8)]
    assert got == ["F0", "F1", "F2", "F3", "B0", "F4", "B1", "F5", "B2", "F6", "B3", "F7", "B4", "B5", "B6", "B7"]
    last = [f"{s.phase}{s.microbatch}" for s in pipeline_schedule("1f1b", 4, 3, 8)]
    assert last == ["F0", "B0", "F1", "B1", "F2", "B2", "F3", "B3", "F4", "B4", "F5", "B5", "F6", "B6", "F7", "B7"]


def test_gpipe_holds_all_microbatches() -> None:
    steps = pipeline_schedule("gpipe", 4, 1, 8)
    assert [s.phase for s in steps] == ["F"] * 8 + ["B"] * 8
    assert peak_in_flight(steps) == 8


def test_interleaved_rank0_matches_megatron_table() -> None:
    """pp=4, vpp=2, M=8 (Narayanan et al. Fig. 4): Megatron's warm-up (pp-r-1)*2 + (vpp-1)*pp = 10 and
    chunk/microbatch order from get_model_chunk_id / microbatch id, written out by hand."""
    got = [f"{s.phase}{s.microbatch}c{s.chunk}" for s in pipeline_schedule("interleaved", 4, 0, 8, 2)]
    expected = [
        "F0c0",
        "F1c0",
        "F2c0",
        "F3c0",
        "F0c1",
        "F1c1",
        "F2c1",
        "F3c1",
        "F4c0",
        "F5c0",
        "F6c0",
        "B0c1",
        "F7c0",
        "B1c1",
        "F4c1",
        "B2c1",
        "F5c1",
        "B3c1",
        "F6c1",
        "B0c0",
        "F7c1",
        "B1c0",
        "B2c0",
        "B3c0",
        "B4c1",
        "B5c1",
        "B6c1",
        "B7c1",
        "B4c0",
        "B5c0",
        "B6c0",
        "B7c0",
    ]
    assert got == expected


@pytest.mark.parametrize(("pp", "vpp", "m"), [(4, 2, 8), (4, 3, 12), (2, 2, 4), (8, 2, 16)])
def test_interleaved_invariants(pp: int, vpp: int, m: int) -> None:
    for rank in range(pp):
        steps = pipeline_schedule("interleaved", pp, rank, m, vpp)
        w = warmup_steps("interleaved", pp, rank, m, vpp)
        assert w == min((pp - rank - 1) * 2 + (vpp - 1) * pp, m * vpp) if m != pp else m * vpp
        assert all(s.phase == "F" for s in steps[:w])
        for c in range(vpp):
            for phase in "FB":
                assert sorted(s.microbatch for s in steps if s.phase == phase and s.chunk == c) == list(range(m))
    # Korthikanti et al. 2022 Sec. 4.2.3: the first stage holds (1 + (p-1)/(p v)) x p microbatches' worth
    steps0 = pipeline_schedule("interleaved", pp, 0, m, vpp)
    held = peak_in_flight(steps0, dict.fromkeys(range(vpp), 1.0 / vpp))
    assert held == pytest.approx(pp * (1 + (pp - 1) / (pp * vpp)))


def test_interleaved_all_warmup_when_m_equals_pp() -> None:
    steps = pipeline_schedule("interleaved", 4, 2, 4, 2)
    assert [s.phase for s in steps] == ["F"] * 8 + ["B"] * 8


def _gpus(n_nodes: int, per_node: int):
    return inline_gpus(ClusterSection(groups=(NodeGroupSpec("H100-SXM", n_nodes, per_node),)))


def _compute_time(schedule: str, vpp: int = 1, m: int = 8) -> float:
    from dataclasses import replace

    model = replace(get_model("gpt3-1.3b"), vocab=1024, learned_pos_emb=False)  # tiny head: even stages
    plan = ParallelismSpec(pp=4, vpp=vpp, schedule=schedule, global_batch=m, partition="uniform")
    p = build_plan(model, plan, _gpus(1, 4))
    p.workload.check()
    return p.compute_time


def test_bubble_fractions() -> None:
    """Narayanan et al. Sec. 2.2: GPipe and 1F1B share the bubble (p-1)/m; interleaving divides it by v."""
    t_gpipe, t_1f1b = _compute_time("gpipe"), _compute_time("1f1b")
    t_int = _compute_time("interleaved", vpp=2)
    assert t_1f1b == pytest.approx(t_gpipe, rel=0.02)
    # ideal time m x t_mb, bubble (p-1) t_mb for 1F1B and (p-1)/v t_mb for interleaved (4 stages, 8 mbs)
    t_mb = t_1f1b / (8 + 3)
    assert t_int == pytest.approx(t_mb * (8 + 3 / 2), rel=0.05)
