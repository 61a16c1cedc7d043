"""Heads wider than hidden / heads (``model.kv_channels``) and query / key head norms (``model.qk_norm``), against
closed forms and the published size of Qwen3-30B-A3B (docs/workload.md "Head size and head norms")."""

from __future__ import annotations

from dataclasses import replace

import pytest

from hetero_ns3.errors import ScenarioError
from hetero_ns3.workload import layers as L
from hetero_ns3.workload.memory import layer_params_per_rank
from hetero_ns3.workload.models import load_model_section, model_catalog
from hetero_ns3.workload.steps import Compute

QWEN, LLAMA = model_catalog()["qwen3-30b-a3b"], model_catalog()["llama3-8b"]


def _kernels(steps: list[L.Step]) -> dict[str, object]:
    return {k.name: k for s in steps if isinstance(s, Compute) for k in s.kernels}


def test_qwen3_30b_a3b_has_its_published_total_and_active_parameters() -> None:
    """Qwen3 technical report: 30.5 B parameters, 3.3 B activated. Heads of 128 on hidden 2048: Q and the output
    projection are 2048 x 4096; heads of hidden / heads = 64 would give 30.08 B."""
    assert QWEN.head_dim == 128 and QWEN.q_dim == 4096 and QWEN.kv_dim == 512
    assert QWEN.total_params() == pytest.approx(30.5e9, rel=0.01)
    expert = QWEN.mlp_params()
    active = QWEN.total_params() - QWEN.layers * (QWEN.experts - QWEN.top_k) * expert
    assert active == pytest.approx(3.3e9, rel=0.03)
    narrow = replace(QWEN, kv_channels=0)  # heads of 2048 / 32 = 64
    assert narrow.total_params() == pytest.approx(30.08e9, rel=0.001)


def test_qwen3_235b_a22b_has_its_published_total_and_active_parameters() -> None:
    """Qwen3 technical report: 235 B parameters, 22 B activated; 64 query heads of 128 on hidden 4096 (Q and the
    output projection 4096 x 8192), 4 key-value heads, 94 layers of 128 experts of FFN 1536 (the catalog entry of the
    session-36 held-out rows)."""
    big = model_catalog()["qwen3-235b-a22b"]
    assert big.head_dim == 128 and big.q_dim == 8192 and big.kv_dim == 512
    assert big.total_params() == pytest.approx(235e9, rel=0.005)
    active = big.total_params() - big.layers * (big.experts - big.top_k) * big.mlp_params()
    assert active == pytest.approx(22e9, rel=0.03)


def test_head_size_defaults_to_hidden_over_heads() -> None:
    assert LLAMA.kv_channels == 0 and LLAMA.head_dim == LLAMA.hidden // LLAMA.heads and LLAMA.q_dim == LLAMA.hidden
    same = replace(LLAMA, kv_channels=LLAMA.hidden // LLAMA.heads)
    assert same.layer_forward_flops(2) == LLAMA.layer_forward_flops(2)
    assert same.total_params() == LLAMA.total_params()


@pytest.mark.parametrize("tp", [1, 2, 4])
def test_projections_and_attention_follow_the_head_size(tp: int) -> None:
    """QKV: T x (q + 2 kv) / tp x h; output projection T x h x q / tp; attention over heads / tp heads of 128; FLOPs
    per layer 2 T h (q + 2 kv) + 4 T s q + 2 T q h + MLP (Narayanan et al. with Q's width for the attention)."""
    c = L.LayerContext(QWEN, 2, tp, tp > 1, 1, "none")
    k = _kernels(L.attention_forward(c))
    T, h, q, kv = c.tokens, QWEN.hidden, QWEN.q_dim, QWEN.kv_dim
    assert (k["qkv"].m, k["qkv"].n, k["qkv"].k) == (T, (q + 2 * kv) // tp, h)
    assert (k["proj"].m, k["proj"].n, k["proj"].k) == (T, h, q // tp)
    assert k["attn.core"].k == 128 and k["attn.core"].batch == 2 * QWEN.heads // tp
    b = _kernels(L.attention_backward(c))
    assert (b["proj.dgrad"].m, b["proj.dgrad"].n, b["proj.dgrad"].k) == (T, q // tp, h)
    s = QWEN.seq_len
    mlp = QWEN.top_k * 2 * 2 * s * h * QWEN.ffn_hidden * 3 + 2 * 2 * s * h * QWEN.experts
    want = 2 * 2 * s * h * (q + 2 * kv) + 4 * 2 * s * s * q + 2 * 2 * s * q * h + mlp
    assert QWEN.layer_forward_flops(2) == want
    assert QWEN.attention_score_flops(2) == 4 * 2 * s * s * q


def test_query_and_key_head_norms_read_and_write_each_element() -> None:
    """qk_norm: 2 + 2 bytes per query and key element forward, 1.5x that backward (as the layer norms); none
    without it; their inputs are kept for backward (2 bytes per element) and their weights (head_dim each) are
    replicated on every TP rank."""
    for tp in (1, 2):
        c = L.LayerContext(QWEN, 1, tp, tp > 1, 1, "none")
        elems = c.tokens * (QWEN.q_dim + QWEN.kv_dim) // tp
        assert _kernels(L.attention_forward(c))["qk_norm"].bytes == 4.0 * elems
        assert _kernels(L.attention_backward(c))["qk_norm.bwd"].bytes == 6.0 * elems
    plain = replace(QWEN, qk_norm=False)
    c = L.LayerContext(plain, 1, 1, False, 1, "none")
    assert not {"qk_norm", "qk_norm.bwd"} & set(_kernels(L.attention_forward(c) + L.attention_backward(c)))
    assert QWEN.attention_params() - plain.attention_params() == 2 * 128
    assert layer_params_per_rank(QWEN, 0, 2, 8).dense - layer_params_per_rank(plain, 0, 2, 8).dense == 2 * 128


def test_head_size_inputs_are_checked() -> None:
    with pytest.raises(ScenarioError, match=r"model\.heads.*kv_channels"):
        load_model_section({"name": "x", "layers": 2, "hidden": 1000, "heads": 3, "ffn_hidden": 8, "vocab": 10,
                            "seq_len": 8})  # fmt: skip
    ok = load_model_section({"name": "x", "layers": 2, "hidden": 1000, "heads": 3, "kv_channels": 64,
                             "ffn_hidden": 8, "vocab": 10, "seq_len": 8})  # fmt: skip
    assert ok.q_dim == 192
    with pytest.raises(ScenarioError, match=r"model\.kv_channels"):
        load_model_section({"name": "qwen3-30b-a3b", "kv_channels": -1})
