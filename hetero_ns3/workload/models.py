"""Model catalog and per-layer counts (parameters, FLOPs) of decoder-only transformers.

Counts follow the conventions of Narayanan et al. (SC'21, "Efficient Large-Scale Language Model
Training on GPU Clusters Using Megatron-LM", Sec. 5.1 / Appendix): a GEMM of (m x k) by (k x n) is
2mkn FLOPs, attention scores and their product with V are 2 b s^2 h each (full s^2, causal masking
is not subtracted; under a sliding window of w keys 2 b s w h each, the band, likewise unmasked), backward costs twice the forward, element-wise work is not counted.
"""

from __future__ import annotations

import functools
import math
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, Literal

from hetero_ns3.collectives.moe_routing import routing_of
from hetero_ns3.errors import ScenarioError, field_error
from hetero_ns3.paths import PACKAGE_DATA
from hetero_ns3.scenario.fields import load_dataclass
from hetero_ns3.workload.hybrid import HybridLayers
from hetero_ns3.workload.model_checks import check_model

CATALOG_PATH = PACKAGE_DATA / "models.toml"
VOCAB_DIVISOR = 128  # Megatron's make_vocab_size_divisible_by default


@dataclass(frozen=True)
class ModelSpec(HybridLayers):
    """Shape of a decoder-only transformer (the ``[model]`` scenario section).

    Attributes:
        name: catalog name, or any label for a user-defined model.
        layers: transformer layers.
        hidden: hidden size h.
        heads: attention (query) heads.
        kv_heads: key/value heads (GQA groups); 0 means equal to ``heads``.
        kv_channels: size of one attention head (Megatron's ``--kv-channels``, Hugging Face's ``head_dim``);
            0 means hidden / heads. Set where the heads are wider than hidden / heads (Qwen3: 32 heads of 128
            on a hidden size of 2048): the query and output projections are then hidden x heads x
            kv_channels.
        qk_norm: a normalization of every query and key head before the rotary embedding (Megatron's
            ``--qk-layernorm``, Qwen3, OLMo 2).
        ffn_hidden: MLP inner size (each of gate/up for gated MLPs).
        vocab: vocabulary size before padding.
        seq_len: training sequence length s, tokens.
        q_lora_rank: multi-latent attention (MLA, DeepSeek-V2 / V3): the width the query is compressed to before its
            up-projection (Megatron's ``q_lora_rank``; DeepSeek-V3 1536); 0 = the query is projected from the hidden
            state directly. Only with ``kv_lora_rank``.
        kv_lora_rank: MLA's compressed key / value width (Megatron's ``kv_lora_rank``; DeepSeek-V3 512); > 0 turns
            MLA on: ``kv_channels`` is then the non-rotary part of a query / key head (``qk_head_dim``, 128).
        qk_rope_dim: MLA's rotary part of each query / key head, its key part shared by all heads (Megatron's
            ``qk_pos_emb_head_dim``; DeepSeek-V3 64).
        v_head_dim: MLA's value (and attention output) head size (DeepSeek-V3 128); 0 = ``kv_channels``.
        experts: MoE experts per MoE layer (1 = dense model).
        top_k: experts each token is routed to.
        router_groups: group-limited routing (DeepSeek's node-limited routing; Megatron's ``moe_router_num_groups``,
            Hugging Face's ``n_group``; DeepSeek-V3 8): the experts form this many contiguous groups and a token picks
            ``router_group_topk`` of them before its ``top_k`` experts inside them. Changes which ranks and nodes a
            token reaches, so the bytes of the deduplicating exchange (:mod:`hetero_ns3.collectives.moe_routing`);
            1 = plain top-k.
        router_group_topk: groups each token picks (``moe_router_group_topk``, ``topk_group``; DeepSeek-V3 4).
        moe_every: every ``moe_every``-th layer is MoE (1 = all layers).
        moe_ffn: inner size of each routed expert (Megatron's ``moe_ffn_hidden_size``); 0 = ``ffn_hidden``. Set
            where the dense layers' MLP is wider than an expert (DeepSeek-V3: dense 18432, experts 2048).
        dense_layers: the first ``dense_layers`` layers keep a dense MLP (Hugging Face's ``first_k_dense_replace``,
            Megatron's ``moe_layer_freq`` list starting with that many zeros; DeepSeek-V3 3); 0 = none.
        mtp_layers: multi-token prediction modules after the last layer (DeepSeek-V3 1; Megatron's
            ``mtp_num_layers``): each embeds the next tokens again, normalizes and concatenates them with the hidden
            state, projects 2h -> h, runs one more transformer layer of the last layer's kind, and computes logits and
            a loss of its own with the shared output layer. Run on the last virtual pipeline stage, as Megatron's
            layouts place them ("...tmL"). 0 = none.
        shared_ffn: inner size of the shared expert every MoE layer runs on every token beside the routed ones
            (Megatron's ``--moe-shared-expert-intermediate-size``, Hugging Face's ``shared_expert_intermediate_size``;
            several shared experts count as one of their summed size: DeepSeek-V3 2048, Qwen1.5-MoE-A2.7B 5632);
            gated like the routed experts (``gated_mlp``); 0 = none.
        gated_mlp: gated (SwiGLU) MLP with three weight matrices.
        glu_clamp: the routed experts' gated activation clamps its two halves before the product (GPT-OSS: the gate
            at most 7, the linear half within +-7; Megatron-Core's ``activation_func_clamp_value``); 0 = no clamp.
            Megatron-Core runs the clamps and the concatenation of the clamped halves as separate element-wise
            kernels before its fused activation (:func:`hetero_ns3.workload.steps.glu_clamp_bytes`). Needs a
            gated MLP and MoE layers; charged on the routed experts only.
        norm: ``layernorm`` (weight + bias) or ``rmsnorm`` (weight).
        bias: linear layers carry biases.
        tie_embeddings: output layer shares the input embedding.
        learned_pos_emb: learned absolute position embedding table (GPT) instead of rotary.
        rope_attention_factor: the factor the rotary embedding's cosines and sines are multiplied by: YaRN's
            attention (concentration) factor, ``0.1 ln(factor) + 1`` for a YaRN factor without mscale overrides
            (GPT-OSS: factor 32, 1.3466; Megatron-Core's ``_yarn_get_concentration_factor``); 1 = plain RoPE, or
            YaRN with equal ``mscale`` and ``mscale_all_dim`` (DeepSeek-V3). Other than 1, Megatron-Core runs its
            unfused PyTorch RoPE (:data:`hetero_ns3.workload.layers.UNFUSED_ROPE_BYTES`).
        dropout: hidden dropout (its masks are activations kept for backward).
        causal: causal attention mask (flash kernels skip the masked half of the work).
        window: sliding-window attention: the keys a query attends to, itself included (Hugging Face's
            ``sliding_window``, Megatron's ``window_size[0] + 1``; Mistral 7B 4096, GPT-OSS 128); 0 = full
            causal attention in every layer. Needs ``causal``; a window of ``seq_len`` or more changes nothing.
        full_attention_every: with a ``window``, every ``full_attention_every``-th layer (1-based: layers N, 2N,
            ...) keeps full causal attention, the others are windowed (Megatron's ``window_attn_skip_freq``;
            GPT-OSS 2: alternating, Gemma 3 6: five local, one global); 0 = every layer windowed.
        hybrid_pattern: a hybrid model's layer sequence, one character per layer (Megatron-Core's
            ``hybrid_layer_pattern``, Hugging Face's ``hybrid_override_pattern``): ``M`` a Mamba-2 mixer, ``*`` self-attention,
            ``-`` a dense MLP, ``E`` an MoE MLP, each with its own pre-norm and residual add; its length is ``layers``.
            Nemotron-H and Nemotron 3. Empty = every layer is attention plus an MLP (or MoE) block.
        mamba_heads: Mamba-2 heads of a ``M`` layer (Megatron's ``mamba_num_heads``; Nemotron 3 Nano 64); the mixer's inner
            width is ``mamba_heads x mamba_head_dim``.
        mamba_head_dim: size of one Mamba-2 head (``mamba_head_dim``, Hugging Face's ``mamba_head_dim``; 64).
        mamba_state: the SSM state size per head and group (``mamba_state_dim``, ``ssm_state_size``; 128).
        mamba_groups: groups sharing one B and one C projection (``mamba_num_groups``, ``n_groups``; Nemotron 3 Nano 8).
        mamba_conv: width of the causal depthwise convolution (``d_conv``, ``conv_kernel``; 4).
        mamba_chunk: chunk length of the SSD scan (``mamba_chunk_size``, ``chunk_size``; 128).
        rope: rotary position embedding in the attention layers; false = no position embedding at all (Nemotron-H and
            Nemotron 3, Megatron's ``position_embedding_type = "none"``). Ignored with ``learned_pos_emb``.
        document_len: packed sequences (fine-tuning data packed to ``seq_len``, Transformer Engine's THD layout with
            ``cu_seqlens``): every sequence holds ``seq_len / document_len`` documents of this many tokens, each
            attending within itself; must divide ``seq_len``. 0 = one document per sequence (pre-training).
        source: where the shape comes from.
    """

    name: str
    layers: int = field(metadata={"doc": "transformer layers"})
    hidden: int = field(metadata={"doc": "hidden size"})
    heads: int = field(metadata={"doc": "attention heads"})
    ffn_hidden: int = field(metadata={"doc": "MLP inner size"})
    vocab: int = field(metadata={"doc": "vocabulary size"})
    seq_len: int = field(metadata={"doc": "sequence length, tokens"})
    kv_heads: int = 0
    kv_channels: int = 0
    qk_norm: bool = False
    q_lora_rank: int = 0
    kv_lora_rank: int = 0
    qk_rope_dim: int = 0
    v_head_dim: int = 0
    experts: int = 1
    top_k: int = 1
    router_groups: int = 1
    router_group_topk: int = 1
    moe_every: int = 1
    moe_ffn: int = 0
    dense_layers: int = 0
    mtp_layers: int = 0
    shared_ffn: int = 0
    gated_mlp: bool = False
    glu_clamp: float = 0.0
    norm: Literal["layernorm", "rmsnorm"] = "layernorm"
    bias: bool = False
    tie_embeddings: bool = False
    learned_pos_emb: bool = False
    rope_attention_factor: float = 1.0
    dropout: bool = False
    causal: bool = True
    window: int = 0
    full_attention_every: int = 0
    document_len: int = 0
    hybrid_pattern: str = ""
    mamba_heads: int = 0
    mamba_head_dim: int = 64
    mamba_state: int = 128
    mamba_groups: int = 1
    mamba_conv: int = 4
    mamba_chunk: int = 128
    rope: bool = True
    source: str = ""

    def validate(self, where: str) -> None:
        """Check positivity and the shape rules (:func:`hetero_ns3.workload.model_checks.check_model`); errors name
        ``where.field``."""
        check_model(self, where)

    # -- derived shapes ---------------------------------------------------------------------------
    @property
    def n_kv_heads(self) -> int:
        """Key/value heads (``heads`` when ``kv_heads`` is 0)."""
        return self.kv_heads or self.heads

    @property
    def head_dim(self) -> int:
        """Per-head size: ``kv_channels``, else hidden / heads."""
        return self.kv_channels or self.hidden // self.heads

    @property
    def q_dim(self) -> int:
        """Width of Q (and of the attention output): heads x head_dim (= hidden unless ``kv_channels`` is set).
        Under MLA the non-rotary part of Q (:attr:`qk_head_dim` and :attr:`v_dim` give the kernel's sizes)."""
        return self.heads * self.head_dim

    @property
    def mla(self) -> bool:
        """Multi-latent attention (``kv_lora_rank`` > 0)."""
        return self.kv_lora_rank > 0

    @property
    def qk_head_dim(self) -> int:
        """Size of one query / key head in the attention kernel: ``head_dim`` plus MLA's rotary part."""
        return self.head_dim + self.qk_rope_dim

    @property
    def v_dim(self) -> int:
        """Size of one value (and output) head: MLA's ``v_head_dim``, else ``head_dim``."""
        return self.v_head_dim or self.head_dim

    @property
    def out_dim(self) -> int:
        """Width of the attention output, the projection's input: heads x :attr:`v_dim`."""
        return self.heads * self.v_dim

    @property
    def expert_ffn(self) -> int:
        """Inner size of one routed expert: ``moe_ffn``, else ``ffn_hidden``."""
        return self.moe_ffn or self.ffn_hidden

    @property
    def kv_dim(self) -> int:
        """Width of K (and of V): kv_heads x head_dim."""
        return self.n_kv_heads * self.head_dim

    @property
    def routing(self) -> tuple[int, ...]:
        """The router's shape for the token exchange: ``(experts, top_k)``, with the groups when group-limited."""
        return routing_of(self.experts, self.top_k, self.router_groups, self.router_group_topk)

    @property
    def is_moe(self) -> bool:
        return self.experts > 1

    def is_moe_layer(self, layer: int) -> bool:
        """Whether layer ``layer`` (0-based) has an MoE MLP (in a hybrid model: is an ``E`` layer)."""
        if self.hybrid_pattern:
            return self.hybrid_pattern[layer] == "E"
        return self.is_moe and layer >= self.dense_layers and (layer + 1) % self.moe_every == 0

    def layer_kind(self, layer: int) -> tuple[str, int]:
        """What makes layer ``layer``'s programs differ from another's: (its block: ``dense`` or ``moe`` for a
        transformer layer, the hybrid block otherwise, :meth:`layer_block`; its attention window)."""
        block = self.layer_block(layer)
        if block == "transformer":
            block = "moe" if self.is_moe_layer(layer) else "dense"
        elif block == "moe":
            block = "moe mlp"
        return block, self.layer_window(layer)

    def layer_kinds(self) -> dict[tuple[str, int], tuple[int, int]]:
        """Each distinct :meth:`layer_kind` -> (its first layer, how many layers have it), in order of first
        appearance: one program per kind serves every layer of that kind."""
        out: dict[tuple[str, int], tuple[int, int]] = {}
        for i in range(self.layers):
            kind = self.layer_kind(i)
            first, n = out.get(kind, (i, 0))
            out[kind] = (first, n + 1)
        return out

    def layer_window(self, layer: int) -> int:
        """Keys each query of layer ``layer`` (0-based) attends to under its sliding window; 0 for full attention
        (no window, a window of at least ``seq_len``, or a layer ``full_attention_every`` keeps full)."""
        if not self.window or self.window >= self.seq_len or not self.has_attention(layer):
            return 0
        if self.full_attention_every and (layer + 1) % self.full_attention_every == 0:
            return 0
        return self.window

    def attention_keys(self, layer: int = 0) -> int:
        """Keys counted per query in layer ``layer``'s model FLOPs: ``seq_len``, its window (the band the mask allows,
        as the full square is counted for a causal mask), or the packed document's length (``document_len``)."""
        return self.layer_window(layer) or self.document_len or self.seq_len

    def padded_vocab(self, tp: int) -> int:
        """Vocabulary padded to a multiple of 128 x tp (Megatron's ``make_vocab_size_divisible_by``)."""
        m = VOCAB_DIVISOR * tp
        return int(math.ceil(self.vocab / m) * m)

    # -- parameters -------------------------------------------------------------------------------
    def attention_params(self) -> int:
        """Parameters of one attention block (QKV, output projection, biases; under MLA :meth:`mla_params`)."""
        if self.mla:
            return self.mla_params()
        h, q = self.hidden, self.q_dim
        qkv = h * (q + 2 * self.kv_dim) + (q + 2 * self.kv_dim if self.bias else 0)
        out = q * h + (h if self.bias else 0)
        return qkv + out + self.qk_norm_params()

    def mla_params(self) -> int:
        """Parameters of one multi-latent attention block (DeepSeek-V2, arXiv 2405.04434, Sec. 2.1; Megatron-Core's
        ``MLASelfAttention``): its projection matrices (:meth:`mla_matrices`) and the two latent norms.
        DeepSeek-V3: 187.1 M."""
        sharded, duplicated = self.mla_matrices()
        return sharded + duplicated + self.q_lora_rank + self.kv_lora_rank

    def mla_matrices(self) -> tuple[int, int]:
        """Weight elements of an MLA block's projections: (split over TP: the query's up-projection q_lora x heads x
        (head_dim + rope), or h x heads x (head_dim + rope) without ``q_lora_rank``, the key / value up-projection
        kv_lora x heads x (head_dim + v_dim) and the output projection heads x v_dim x h; on every TP rank
        (Megatron-Core's ``parallel_mode = "duplicated"``): the down-projections h x q_lora and h x (kv_lora +
        rope))."""
        h = self.hidden
        qd, kvd, qu, kvu = self.mla_widths()
        return (qd or h) * qu + self.kv_lora_rank * kvu + self.out_dim * h, h * (qd + kvd)

    def mla_widths(self) -> tuple[int, int, int, int]:
        """MLA's projection widths: (query down q_lora, key / value down kv_lora + rope, query up heads x
        qk_head_dim, key / value up heads x (head_dim + v_dim)); the query down-projection is 0 without
        ``q_lora_rank`` (the query is then projected from h)."""
        n = self.heads
        return (
            self.q_lora_rank,
            self.kv_lora_rank + self.qk_rope_dim,
            n * self.qk_head_dim,
            n * (self.head_dim + self.v_dim),
        )

    def qk_norm_params(self) -> int:
        """Parameters of the query and key head norms (one weight of head_dim each; 0 without ``qk_norm``)."""
        return 2 * self.head_dim if self.qk_norm else 0

    def mlp_params(self, ffn: int = 0) -> int:
        """Parameters of one dense MLP (one expert; ``ffn`` its inner size, default ``ffn_hidden``)."""
        h, f = self.hidden, ffn or self.ffn_hidden
        mats = 3 if self.gated_mlp else 2
        return mats * h * f + ((f * (2 if self.gated_mlp else 1) + h) if self.bias else 0)

    def shared_params(self) -> int:
        """Parameters of an MoE layer's shared expert (0 without one)."""
        return self.mlp_params(self.shared_ffn) if self.shared_ffn else 0

    def norm_params(self) -> int:
        """Parameters of one normalization layer."""
        return 2 * self.hidden if self.norm == "layernorm" else self.hidden

    def moe_mlp_params(self) -> int:
        """Parameters of one MoE block: every routed expert, the router and the shared expert."""
        return self.experts * self.mlp_params(self.expert_ffn) + self.hidden * self.experts + self.shared_params()

    def layer_params(self, layer: int = 0) -> int:
        """Parameters of layer ``layer`` (all experts included; a hybrid layer's one block and its norm)."""
        block = self.layer_block(layer)
        if block != "transformer":
            inner = {
                "mamba": self.mamba_params,
                "attention": self.attention_params,
                "mlp": self.mlp_params,
                "moe": self.moe_mlp_params,
            }[block]()
            return inner + self.norm_params()
        mlp = self.moe_mlp_params() if self.is_moe_layer(layer) else self.mlp_params()
        return self.attention_params() + mlp + 2 * self.norm_params()

    def embedding_params(self, tp: int = 1) -> int:
        """Input embedding (padded vocab) plus learned position table."""
        return self.padded_vocab(tp) * self.hidden + (self.seq_len * self.hidden if self.learned_pos_emb else 0)

    def total_params(self, tp: int = 1) -> int:
        """All parameters (untied output layer counted once)."""
        n = sum(self.layer_params(i) for i in range(self.layers)) + self.embedding_params(tp) + self.norm_params()
        if not self.tie_embeddings:
            n += self.padded_vocab(tp) * self.hidden
        return n + self.mtp_layers * self.mtp_params()

    def mtp_params(self) -> int:
        """Parameters of one multi-token prediction module (its embedding and output layer are the model's): the
        two input norms, the 2h -> h projection, its transformer layer (the last layer's kind) and its final
        norm."""
        if not self.mtp_layers:
            return 0
        return 3 * self.norm_params() + 2 * self.hidden * self.hidden + self.layer_params(self.layers - 1)

    # -- FLOPs (Narayanan et al. conventions) ---------------------------------------------------------
    def layer_forward_flops(self, batch: int, layer: int = 0) -> float:
        """Forward FLOPs of one layer for ``batch`` sequences: GEMMs + attention scores (a hybrid layer: its one
        block's; a Mamba-2 mixer: its projections and the SSD scan's products, :meth:`mamba_forward_flops`)."""
        block = self.layer_block(layer)
        if block == "mamba":
            return self.mamba_forward_flops(batch)
        if block == "attention":
            return float(self._attention_block_flops(batch, layer))
        if block in ("mlp", "moe"):
            return float(self._mlp_block_flops(batch, block == "moe"))
        return float(self._attention_block_flops(batch, layer) + self._mlp_block_flops(batch, self.is_moe_layer(layer)))

    def _attention_block_flops(self, batch: int, layer: int) -> float:
        """Forward FLOPs of layer ``layer``'s attention block: its projections and scores."""
        b, s, h, q = batch, self.seq_len, self.hidden, self.q_dim
        qkv = 2 * b * s * h * (q + 2 * self.kv_dim)
        if self.mla:
            sharded, duplicated = self.mla_matrices()  # every projection but the output one (``out`` below)
            qkv = 2 * b * s * (sharded + duplicated - self.out_dim * h)
        return qkv + self.attention_score_flops(batch, layer) + 2 * b * s * self.out_dim * h

    def _mlp_block_flops(self, batch: int, moe: bool) -> int:
        """Forward FLOPs of a dense MLP, or of an MoE block (routed experts, router, shared expert)."""
        b, s, h, up = batch, self.seq_len, self.hidden, 3 if self.gated_mlp else 2
        if not moe:
            return 2 * b * s * h * self.ffn_hidden * up
        shared = 2 * b * s * h * self.shared_ffn * up
        return 2 * b * s * h * self.expert_ffn * up * self.top_k + 2 * b * s * h * self.experts + shared

    def mtp_forward_flops(self, batch: int) -> float:
        """Forward FLOPs of one multi-token prediction module without its logits: the 2h -> h projection and its
        layer (the last layer's kind)."""
        return float(2 * batch * self.seq_len * 2 * self.hidden * self.hidden) + self.layer_forward_flops(
            batch, self.layers - 1
        )

    def attention_score_flops(self, batch: int, layer: int = 0) -> float:
        """Forward FLOPs of QK^T and scores x V of layer ``layer`` for ``batch`` sequences (recomputed by
        selective; 0 for a hybrid layer without attention)."""
        if not self.has_attention(layer):
            return 0.0
        if self.mla:  # QK^T over heads x qk_head_dim, scores x V over heads x v_dim
            return float(
                2 * batch * self.seq_len * self.attention_keys(layer) * self.heads * (self.qk_head_dim + self.v_dim)
            )
        return float(4 * batch * self.seq_len * self.attention_keys(layer) * self.q_dim)

    def logit_forward_flops(self, batch: int, tp: int = 1) -> float:
        """Forward FLOPs of the output (logit) GEMM."""
        return float(2 * batch * self.seq_len * self.hidden * self.padded_vocab(tp))

    def iteration_flops(self, global_batch: int, recompute: str = "none", tp: int = 1, frozen: bool = False) -> float:
        """Model FLOPs of one training iteration (forward + backward [+ recomputation]).

        ``recompute``: ``none`` (3 passes), ``selective`` (+ attention scores), ``full`` (+ one
        forward of every layer). The logit layer is never recomputed. ``frozen``: the weights are not trained
        (LoRA, ``parallelism.peft``): every GEMM counts forward and data gradient only (2 passes), the attention
        scores still 3; the adapters' GEMMs (under 1% at the recipes' ranks) are not counted.
        """
        if recompute not in ("none", "selective", "full"):
            raise ScenarioError(f"recompute ({recompute!r}) must be none, selective or full")
        fwd = sum(self.layer_forward_flops(global_batch, i) for i in range(self.layers))
        fwd += self.mtp_layers * self.mtp_forward_flops(global_batch)
        total = 3 * fwd + 3 * (1 + self.mtp_layers) * self.logit_forward_flops(global_batch, tp)
        if frozen:  # no weight gradients: one GEMM pass less (the attention scores have no weights)
            scores = sum(self.attention_score_flops(global_batch, i) for i in range(self.layers))
            total -= fwd - scores + (1 + self.mtp_layers) * self.logit_forward_flops(global_batch, tp)
        if recompute == "full":
            total += fwd
        elif recompute == "selective":
            total += sum(self.attention_score_flops(global_batch, i) for i in range(self.layers))
        return total


def _load_raw_catalog() -> dict[str, dict[str, Any]]:
    with open(CATALOG_PATH, "rb") as fh:
        return tomllib.load(fh).get("model", {})


@functools.cache
def _catalog() -> Mapping[str, ModelSpec]:
    raw = _load_raw_catalog()
    return MappingProxyType(
        {
            name: load_dataclass(ModelSpec, {"name": name, **tbl}, f"models.toml:model.{name}")
            for name, tbl in raw.items()
        }
    )


def model_catalog() -> Mapping[str, ModelSpec]:
    """All models shipped with hetero_ns3, by name."""
    return _catalog()


def get_model(name: str) -> ModelSpec:
    """The catalog model ``name``; ScenarioError listing valid names if unknown."""
    cat = model_catalog()
    if name not in cat:
        raise ScenarioError(f"model {name!r} is not in the catalog; valid names: {sorted(cat)}")
    return cat[name]


def load_model_section(table: Mapping[str, Any], where: str = "model") -> ModelSpec:
    """Load a scenario's ``[model]`` table: a catalog ``name`` with optional field overrides, or a full model."""
    if "name" not in table:
        raise ScenarioError(f"{where}.name is missing; give a catalog model ({sorted(model_catalog())}) or your own")
    name = str(table["name"])
    raw = _load_raw_catalog()
    base = dict(raw.get(name, {}))
    if not base and "layers" not in table:
        raise field_error(
            f"{where}.name",
            name,
            "is not a catalog model and no shape is given",
            f"use one of {sorted(raw)} or give layers, hidden, heads, ffn_hidden, vocab, seq_len",
        )
    base.update(table)
    return load_dataclass(ModelSpec, base, where)
