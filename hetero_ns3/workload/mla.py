"""Multi-latent attention (MLA) of one rank: DeepSeek-V2 / V3's attention block as Megatron-Core runs it.

DeepSeek-V2 (arXiv 2405.04434, Sec. 2.1) compresses the query and the keys / values through low-rank latents;
Megatron-Core's ``MLASelfAttention`` (``megatron/core/transformer/multi_latent_attention.py``) computes, per token:

* the down-projections ``h -> q_lora`` (query) and ``h -> kv_lora + rope`` (keys / values and the rotary key part
  shared by all heads): Transformer Engine ``Linear`` modules duplicated on every tensor-parallel rank, run on the
  rank's sequence-parallel tokens;
* RMS norms of the two latents (``q_layernorm``, ``kv_layernorm``);
* under tensor parallelism the latents all-gathered along the sequence (the up-projections are column-parallel:
  their ``ColumnParallelLinear`` gathers its input, and the rotary key part is gathered explicitly);
* the up-projections ``q_lora -> heads x (head_dim + rope)`` and ``kv_lora -> heads x (head_dim + v_dim)``;
* the fused MLA rotary kernels (``fused_apply_mla_rope_for_q`` / ``_for_kv``), which write the query, key and value
  heads the attention kernel reads (key heads of ``head_dim + rope``, value heads of ``v_dim``);
* the attention core with query / key heads of 192 and value heads of 128 (DeepSeek-V3), and the row-parallel output
  projection ``heads x v_dim -> h``.

With ``recompute_modules`` holding ``mla_up_proj`` the up-projections and the rotary kernels run again in the
backward (Megatron-Core's ``recompute_up_proj``: their outputs are dropped once the attention core has read them).
"""

from __future__ import annotations

from hetero_ns3.compute.roofline import Kernel
from hetero_ns3.workload.attention import attention_core
from hetero_ns3.workload.steps import (
    ACT_BYTES,
    Comm,
    Compute,
    LayerContext,
    Step,
    bda_bytes,
    gemm,
    gemm_bwd,
    mem,
    norm_bytes,
    sp_on,
    tp_exit,
)


def _latent_tokens(c: LayerContext) -> int:
    """Tokens the down-projections and latent norms run on: the rank's sequence-parallel share under SP."""
    return c.tokens_elementwise


def _latent_bytes(c: LayerContext) -> float:
    """Bytes of the latents gathered along the sequence under SP (query latent, or the hidden state the query is
    projected from without ``q_lora_rank``; key / value latent; rotary key)."""
    md = c.model
    return float(ACT_BYTES * c.tokens * ((md.q_lora_rank or md.hidden) + md.kv_lora_rank + md.qk_rope_dim))


def _down(c: LayerContext) -> tuple[Kernel, ...]:
    md, T, h = c.model, _latent_tokens(c), c.model.hidden
    qd, kvd, _, _ = md.mla_widths()
    if qd:
        return gemm("q_down", T, qd, h), gemm("kv_down", T, kvd, h)
    return (gemm("kv_down", T, kvd, h),)


def _latent_norms(c: LayerContext, scale: float = 1.0) -> tuple[Kernel, ...]:
    md, T = c.model, _latent_tokens(c)
    return (mem("latent_norm", scale * 2.0 * ACT_BYTES * T * (md.q_lora_rank + md.kv_lora_rank)),)


def _up(c: LayerContext) -> tuple[Kernel, ...]:
    """The up-projections of the rank's heads (the query straight from h without ``q_lora_rank``)."""
    md, T, t = c.model, c.tokens, c.tp
    qd, _, qu, kvu = md.mla_widths()
    q = gemm("q_up", T, qu // t, qd or md.hidden)
    return q, gemm("kv_up", T, kvu // t, md.kv_lora_rank)


def _rope_bytes(c: LayerContext) -> float:
    """The fused MLA rotary kernels: read the up-projections' outputs (and the rotary key), write the query, key and
    value heads; 2-byte elements. The same again in the backward."""
    md, T = c.model, c.tokens
    n = md.heads // c.tp
    qk, v, nope = md.qk_head_dim, md.v_dim, md.head_dim
    return float(ACT_BYTES * T * (n * (qk + qk) + n * (nope + v) + md.qk_rope_dim + n * (qk + v)))


def _up_and_rope(c: LayerContext) -> tuple[Kernel, ...]:
    return (*_up(c), mem("rope", _rope_bytes(c)))


def mla_forward(c: LayerContext) -> list[Step]:
    """Forward program of an MLA block (norm, projections, core, output projection, residual add)."""
    md, T, h = c.model, c.tokens, c.model.hidden
    steps: list[Step] = [Compute("attn.ln", (mem("ln1", norm_bytes(c)),))]
    steps.append(Compute("attn.down", (*_down(c), *_latent_norms(c))))
    if sp_on(c):
        steps.append(Comm("attn.ag", "all_gather", _latent_bytes(c), "tp"))
    proj = gemm("proj", T, h, md.out_dim // c.tp)
    steps.append(Compute("attn", (*_up_and_rope(c), *attention_core(c, False), proj)))
    steps += tp_exit(c, "attn")
    steps.append(Compute("attn.bda", (mem("bda1", bda_bytes(c)),)))
    return steps


def mla_backward(c: LayerContext) -> list[Step]:
    """Backward program of an MLA block: the forward's steps reversed, the up-projections re-run first under
    ``mla_up_proj``; the latents' gradient reduced over the tensor-parallel group (reduce-scatter under SP)."""
    md, T, h = c.model, c.tokens, c.model.hidden
    steps: list[Step] = [Compute("attn.bda.bwd", (mem("bda1.bwd", bda_bytes(c)),))]
    if sp_on(c):
        steps.append(Comm("attn.ag_grad", "all_gather", c.act_bytes, "tp"))
    kern: list[Kernel] = [*gemm_bwd("proj", T, h, md.out_dim // c.tp)]
    if c.recomputes("mla_up_proj"):
        kern += _up_and_rope(c)
    if c.recomputes("core_attn"):
        kern += attention_core(c, False)
    kern += [*attention_core(c, True), mem("rope.bwd", _rope_bytes(c))]
    qd, _, qu, kvu = md.mla_widths()
    kern += [*gemm_bwd("q_up", T, qu // c.tp, qd or h), *gemm_bwd("kv_up", T, kvu // c.tp, md.kv_lora_rank)]
    steps.append(Compute("attn.bwd", tuple(kern)))
    if c.tp > 1:
        if sp_on(c):
            steps.append(Comm("attn.rs_grad", "reduce_scatter", _latent_bytes(c), "tp"))
        else:
            steps.append(Comm("attn.ar_grad", "all_reduce", _latent_bytes(c), "tp"))
    if c.recomputes("layernorm"):
        steps.append(Compute("recompute.attn.ln", (mem("ln1", norm_bytes(c)),)))
    down_bwd = [k for g in _down(c) for k in gemm_bwd(g.name, g.m, g.n, g.k)]
    steps.append(Compute("attn.down.bwd", (*_latent_norms(c, 1.5), *down_bwd)))
    steps.append(Compute("attn.ln.bwd", (mem("ln1.bwd", 1.5 * norm_bytes(c)),)))
    return steps
