"""Megatron-Bridge's model-FLOP counter for hybrid models (``training/utils/flop_utils.py``, ``hybrid_flops``), the
counter behind the TFLOP/s columns of its performance tables and verification cards, written out for the tests that
check a catalog model against those columns. It differs from ours (``ModelSpec.iteration_flops``) in three terms:
the causal half of the attention square (we count it whole, as Narayanan et al.), the router GEMM (left out) and the
Mamba term (d_inner taken as 2 h, the scan as 7 d_in N)."""

from __future__ import annotations

from hetero_ns3.workload.models import ModelSpec


def hybrid_flops_terms(m: ModelSpec, seq: int) -> dict[str, float]:
    """Forward FLOPs of one sequence of ``seq`` tokens through one layer of each block kind, and the logits."""
    s, h = seq, m.hidden
    p, g, n = m.q_dim / h, m.n_kv_heads, m.heads
    d_in = 2 * h
    return {
        "attention": 4 * s * h * p * (h + h * g / n) + 2 * s * h * p * s,
        "mlp": 4 * s * h * m.ffn_hidden,  # non-gated (squared ReLU): fc1 and fc2
        "moe": 4 * s * h * m.expert_ffn * m.top_k + 4 * s * h * m.shared_ffn,
        "mamba": 2 * s * h * (2 * d_in + 2 * m.mamba_groups * m.mamba_state + m.mamba_heads)
        + 7 * s * d_in * m.mamba_state
        + 2 * s * d_in * h,
        "logits": 2 * s * h * m.padded_vocab(1),
    }


def hybrid_flops_per_token(m: ModelSpec, seq: int) -> float:
    """Forward and backward (three times the forward) FLOPs per token of the whole model, as Megatron-Bridge counts."""
    terms = hybrid_flops_terms(m, seq)
    blocks = [m.layer_block(i) for i in range(m.layers)]
    return 3 * (sum(terms[b] for b in blocks) + terms["logits"]) / seq
