"""FLOP counts against Narayanan et al. (SC'21) and parameter counts against published model sizes."""

from __future__ import annotations

import pytest

from hetero_ns3.scenario.cluster import ClusterSection, NodeGroupSpec, inline_gpus
from hetero_ns3.workload.models import get_model
from hetero_ns3.workload.parallel import ParallelismSpec
from hetero_ns3.workload.planner import build_plan


def _narayanan(B: int, s: int, n_layers: int, h: int, V: int, recompute: bool) -> float:
    """Eq. (3) of Narayanan et al. SC'21 (with recomputation) and its 3-pass form (without)."""
    if recompute:
        return 96 * B * s * n_layers * h**2 * (1 + s / (6 * h) + V / (16 * n_layers * h))
    return 72 * B * s * n_layers * h**2 * (1 + s / (6 * h) + V / (12 * n_layers * h))


@pytest.mark.parametrize("recompute", [True, False])
@pytest.mark.parametrize(("name", "batch"), [("gpt3-175b", 1536), ("gpt3-13b", 512), ("gpt3-1.3b", 512)])
def test_iteration_flops_match_narayanan(name: str, batch: int, recompute: bool) -> None:
    m = get_model(name)
    V = m.padded_vocab(8)
    ours = m.iteration_flops(batch, "full" if recompute else "none", tp=8)
    ref = _narayanan(batch, m.seq_len, m.layers, m.hidden, V, recompute)
    assert ours == pytest.approx(ref, rel=0.01)


def test_gpt3_175b_recompute_flops_close_to_8_tokens_params() -> None:
    """Narayanan et al. Sec. 5.1: with recomputation F ~ 8 x tokens x parameters (within a few %)."""
    m = get_model("gpt3-175b")
    f = m.iteration_flops(1536, "full", tp=8)
    assert f == pytest.approx(8 * 1536 * 2048 * 175e9, rel=0.05)


def test_padded_vocab_megatron() -> None:
    assert get_model("gpt3-175b").padded_vocab(8) == 51200
    assert get_model("gpt3-175b").padded_vocab(1) == 50304


@pytest.mark.parametrize(
    ("name", "billions", "rel"),
    [
        ("gpt3-175b", 175.0, 0.01),
        ("llama-65b", 65.2, 0.01),
        ("llama2-7b", 6.74, 0.005),
        ("llama2-13b", 13.02, 0.005),
        ("llama2-70b", 68.98, 0.005),
        ("llama3-8b", 8.03, 0.005),
        ("llama3-70b", 70.55, 0.005),
        ("llama3-405b", 405.85, 0.005),
        ("mixtral-8x7b", 46.7, 0.005),
    ],
)
def test_parameter_counts_match_published(name: str, billions: float, rel: float) -> None:
    """Totals published with the models (Llama papers / HF model cards, Mixtral paper: 46.7B)."""
    assert get_model(name).total_params(1) / 1e9 == pytest.approx(billions, rel=rel)


def _gpus(gpu_type: str, nodes: int, per_node: int = 8):
    return inline_gpus(ClusterSection(groups=(NodeGroupSpec(gpu_type, nodes, per_node),)))


@pytest.mark.parametrize(
    "kw",
    [
        {"tp": 2, "pp": 2, "recompute": "none"},
        {"tp": 2, "pp": 2, "recompute": "full", "sequence_parallel": True},
        {"tp": 1, "pp": 4, "recompute": "selective", "schedule": "gpipe"},
        {"tp": 2, "pp": 2, "vpp": 2, "schedule": "interleaved", "recompute": "selective"},
        {"tp": 4, "pp": 1, "recompute": "none", "zero_stage": 1},
    ],
)
def test_compiled_ops_execute_the_model_flops(kw: dict) -> None:
    """Summed over all ranks, the compiled ops execute exactly the closed-form iteration FLOPs."""
    m = get_model("gpt3-125m")
    plan = ParallelismSpec(global_batch=16, micro_batch=2, **kw)
    p = build_plan(m, plan, _gpus("H100-SXM", 1))
    dp = p.placement.dp
    expected = m.iteration_flops(16, plan.recompute, tp=plan.tp)
    assert p.executed_flops == pytest.approx(expected, rel=1e-9), (dp, kw)
    assert p.model_flops == pytest.approx(m.iteration_flops(16, "none", tp=plan.tp))


def test_moe_compiled_flops() -> None:
    m = get_model("mixtral-8x7b")
    from dataclasses import replace

    m = replace(m, layers=4, seq_len=512)
    plan = ParallelismSpec(tp=2, pp=1, ep=2, sequence_parallel=True, global_batch=8, micro_batch=1)
    p = build_plan(m, plan, _gpus("H100-SXM", 1))
    assert p.executed_flops == pytest.approx(m.iteration_flops(8, "none", tp=2), rel=1e-6)
