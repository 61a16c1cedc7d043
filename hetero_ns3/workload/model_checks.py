"""The shape rules of a model description (:class:`hetero_ns3.workload.models.ModelSpec`): what ``[model]`` may say.

Each rule raises a :class:`~hetero_ns3.errors.ScenarioError` naming ``where.field``, the value and the fix.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from hetero_ns3.collectives.moe_routing import routing_problem
from hetero_ns3.errors import divisors, field_error

if TYPE_CHECKING:
    from hetero_ns3.workload.models import ModelSpec

HYBRID_BLOCKS = {"M": "mamba", "*": "attention", "-": "mlp", "E": "moe"}
"""The layer symbols of a hybrid pattern (Megatron-Core's ``hybrid_layer_allocation.Symbols``) and the block each
stands for."""


def check_model(m: ModelSpec, where: str) -> None:
    """Check positivity and the shape rules of ``m``; errors name ``where.field``."""
    for key in ("layers", "hidden", "heads", "ffn_hidden", "vocab", "seq_len", "experts", "top_k", "moe_every"):
        if getattr(m, key) < 1:
            raise field_error(f"{where}.{key}", getattr(m, key), "must be >= 1")
    if m.kv_heads < 0:
        raise field_error(f"{where}.kv_heads", m.kv_heads, "must be >= 0 (0 = same as heads)")
    if m.kv_channels < 0:
        raise field_error(f"{where}.kv_channels", m.kv_channels, "must be >= 0 (0 = hidden / heads)")
    if not m.kv_channels and m.hidden % m.heads:
        raise field_error(
            f"{where}.heads",
            m.heads,
            f"must divide {where}.hidden ({m.hidden})",
            f"or give {where}.kv_channels, the size of one head",
        )
    if m.heads % m.n_kv_heads:
        raise field_error(f"{where}.kv_heads", m.kv_heads, f"must divide {where}.heads ({m.heads})")
    for key in (
        "q_lora_rank",
        "kv_lora_rank",
        "qk_rope_dim",
        "v_head_dim",
        "moe_ffn",
        "dense_layers",
        "mtp_layers",
    ):
        if getattr(m, key) < 0:
            raise field_error(f"{where}.{key}", getattr(m, key), "must be >= 0 (0 = off)")
    if (m.q_lora_rank or m.qk_rope_dim or m.v_head_dim) and not m.kv_lora_rank:
        raise field_error(
            f"{where}.kv_lora_rank",
            m.kv_lora_rank,
            "must be > 0 where q_lora_rank, qk_rope_dim or v_head_dim is set (multi-latent attention)",
            f"set {where}.kv_lora_rank (DeepSeek-V3: 512) or leave the other three at 0",
        )
    if m.mla and m.n_kv_heads != m.heads:
        raise field_error(f"{where}.kv_heads", m.kv_heads, "must equal heads (or be 0) under multi-latent attention")
    if m.dense_layers >= m.layers or (m.dense_layers and not m.experts > 1):
        raise field_error(
            f"{where}.dense_layers",
            m.dense_layers,
            f"must be below {where}.layers ({m.layers}) and needs MoE layers ({where}.experts > 1)",
            "or set it to 0",
        )
    if m.top_k > m.experts:
        raise field_error(f"{where}.top_k", m.top_k, f"exceeds {where}.experts ({m.experts})")
    groups = (m.router_groups, m.router_group_topk)
    problem = routing_problem((m.experts, m.top_k, *groups)) if min(groups) >= 1 else "must be >= 1"
    if groups != (1, 1) and problem:
        raise field_error(
            f"{where}.router_groups",
            groups,
            f"(with router_group_topk) {problem}",
            "as Hugging Face's n_group / topk_group (DeepSeek-V3: 8 and 4), or 1 and 1 for plain top-k",
        )
    if m.shared_ffn < 0:
        raise field_error(f"{where}.shared_ffn", m.shared_ffn, "must be >= 0 (0 = no shared expert)")
    if m.shared_ffn and not m.is_moe:
        raise field_error(
            f"{where}.shared_ffn", m.shared_ffn, f"needs MoE layers ({where}.experts > 1)", "or set it to 0"
        )
    if m.rope_attention_factor <= 0:
        raise field_error(f"{where}.rope_attention_factor", m.rope_attention_factor, "must be > 0 (1 = plain RoPE)")
    if m.glu_clamp < 0:
        raise field_error(f"{where}.glu_clamp", m.glu_clamp, "must be >= 0 (0 = no clamp)")
    if m.glu_clamp and not (m.gated_mlp and m.is_moe):
        raise field_error(
            f"{where}.glu_clamp",
            m.glu_clamp,
            f"is modelled on the routed experts of a gated MLP ({where}.gated_mlp = {m.gated_mlp}, "
            f"{where}.experts = {m.experts})",
            f"set {where}.gated_mlp = true and experts > 1, or glu_clamp = 0",
        )
    if m.window < 0:
        raise field_error(f"{where}.window", m.window, "must be >= 0 (0 = full attention)")
    if m.full_attention_every < 0:
        raise field_error(
            f"{where}.full_attention_every", m.full_attention_every, "must be >= 0 (0 = every layer windowed)"
        )
    if m.window and not m.causal:
        raise field_error(
            f"{where}.window", m.window, "needs a causal mask", f"set {where}.causal = true or window = 0"
        )
    if m.document_len < 0 or (m.document_len and m.seq_len % m.document_len):
        raise field_error(
            f"{where}.document_len",
            m.document_len,
            f"must divide {where}.seq_len ({m.seq_len}) (0 = one document per sequence)",
            f"choose among {divisors(m.seq_len)[-6:]} or a smaller divisor",
        )
    if m.document_len and m.window:
        raise field_error(
            f"{where}.document_len",
            m.document_len,
            f"is not modelled with a sliding window ({where}.window = {m.window})",
            "set one of the two to 0",
        )
    _check_hybrid(m, where)


def _check_hybrid(m: ModelSpec, where: str) -> None:
    """The rules of a hybrid layer pattern and of its Mamba-2 mixers."""
    for key, least in (("mamba_heads", 0), ("mamba_head_dim", 1), ("mamba_state", 1), ("mamba_groups", 1),
                       ("mamba_conv", 1), ("mamba_chunk", 1)):  # fmt: skip
        if getattr(m, key) < least:
            raise field_error(f"{where}.{key}", getattr(m, key), f"must be >= {least}")
    pattern = m.hybrid_pattern
    if not pattern:
        if m.mamba_heads:
            raise field_error(
                f"{where}.mamba_heads",
                m.mamba_heads,
                "needs Mamba layers, which only a hybrid pattern places",
                f'give {where}.hybrid_pattern (Nemotron 3 Nano: "MEMEM*EMEMEM*...") or set mamba_heads = 0',
            )
        return
    bad = sorted(set(pattern) - set(HYBRID_BLOCKS))
    if bad:
        raise field_error(
            f"{where}.hybrid_pattern",
            pattern,
            f"holds {bad[0]!r}, which is not a layer symbol",
            "use M (Mamba-2), * (attention), - (MLP) and E (MoE), one per layer, as Megatron-Core's hybrid_layer_pattern",
        )
    if len(pattern) != m.layers:
        raise field_error(
            f"{where}.hybrid_pattern",
            pattern,
            f"has {len(pattern)} layers where {where}.layers is {m.layers}",
            f"set {where}.layers = {len(pattern)} (one symbol per layer)",
        )
    if ("E" in pattern) != m.is_moe:
        raise field_error(
            f"{where}.hybrid_pattern",
            pattern,
            f"{'has' if 'E' in pattern else 'has no'} MoE layers (E) where {where}.experts is {m.experts}",
            "place E layers and set experts > 1, or neither",
        )
    if "M" in pattern and not m.mamba_heads:
        raise field_error(
            f"{where}.mamba_heads",
            m.mamba_heads,
            "must be >= 1 where the pattern has Mamba layers (M)",
            "Nemotron 3 Nano: 64",
        )
    if m.mamba_heads % m.mamba_groups:
        raise field_error(f"{where}.mamba_groups", m.mamba_groups, f"must divide {where}.mamba_heads ({m.mamba_heads})")
    for key, off in (
        ("dense_layers", 0),
        ("moe_every", 1),
        ("mtp_layers", 0),
        ("document_len", 0),
        ("kv_lora_rank", 0),
    ):
        if getattr(m, key) != off:
            raise field_error(
                f"{where}.{key}",
                getattr(m, key),
                "is not modelled with a hybrid pattern (the pattern places every layer)",
                f"set it to {off}",
            )
