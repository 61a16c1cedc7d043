"""Per-rank step programs of transformer pieces: compute kernels and the TP / EP / CP collectives between them.

Steps (:class:`Compute`, :class:`Comm`, :class:`Join`), the rank's shapes (:class:`LayerContext`) and the shared
building blocks (TP region entry and exit, recomputation) are in :mod:`hetero_ns3.workload.steps`, the attention
core in :mod:`hetero_ns3.workload.attention`, the MoE layer in :mod:`hetero_ns3.workload.moe`; the public ones
are re-exported here. With T = b x s tokens and 2-byte activations, every TP collective of a layer moves ``2 T h`` bytes
(Megatron-LM, Shoeybi et al. 2019; Korthikanti et al. 2022 for sequence parallelism).
"""

from __future__ import annotations

from dataclasses import replace

from hetero_ns3.compute.roofline import Kernel
from hetero_ns3.workload.attention import (
    FLASH_BWD_DQ_BYTES,
    FLASH_BWD_PRE_BYTES,
    attention_core,
    cp_a2a_steps,
    cp_all_gather_steps,
    cp_attention_steps,
    cp_ring_steps,
    flash_attention_kernels,
)
from hetero_ns3.workload.mamba import mamba_backward, mamba_forward
from hetero_ns3.workload.mla import mla_backward, mla_forward
from hetero_ns3.workload.moe import moe_backward, moe_dispatch_bytes, moe_forward
from hetero_ns3.workload.peft import lora_steps
from hetero_ns3.workload.steps import (
    ACT_BYTES,
    Comm,
    Compute,
    Join,
    LayerContext,
    Step,
    act_bytes,
    bda_bytes,
    col_parallel_bwd,
    gemm,
    gemm_bwd,
    mem,
    norm_bytes,
    recomputed,
    sp_on,
    tag_recompute,
    tagged,
    tp_enter,
    tp_exit,
)

__all__ = [
    "ACT_BYTES",
    "FLASH_BWD_DQ_BYTES",
    "FLASH_BWD_PRE_BYTES",
    "Comm",
    "Compute",
    "Join",
    "LayerContext",
    "Step",
    "attention_backward",
    "attention_core",
    "attention_forward",
    "cp_a2a_steps",
    "cp_all_gather_steps",
    "cp_attention_steps",
    "cp_ring_steps",
    "embedding_backward",
    "embedding_forward",
    "flash_attention_kernels",
    "gemm",
    "gemm_bwd",
    "head_backward",
    "head_forward",
    "layer_backward",
    "layer_forward",
    "mem",
    "mlp_backward",
    "mlp_forward",
    "moe_backward",
    "moe_dispatch_bytes",
    "moe_forward",
    "op_recomputed",
]


def _dims(c: LayerContext) -> tuple[int, int, int, int]:
    md, t = c.model, c.tp
    return c.tokens, md.hidden, (md.q_dim + 2 * md.kv_dim) // t, md.ffn_hidden // t


ROPE_BYTES = 4.0
"""Rotary position embedding per query / key element, forward and again backward: Megatron-LM applies it
fused (``apply_rope_fusion``, on unless ``--no-rope-fusion``; Transformer Engine's fused RoPE kernel), one
read and one write of each 2-byte element."""

UNFUSED_ROPE_BYTES = (24.0, 20.0)
"""Forward and backward bytes per query / key element of Megatron-Core's unfused RoPE
(``_apply_rotary_pos_emb_bshd``), which runs when the cosines and sines carry an attention factor other than 1
(``ModelSpec.rope_attention_factor``: Transformer Engine's fused kernel takes none, and Megatron-Core falls back
with a warning). In elements of the tensor: forward ``t * cos`` (2), the rotated half's negation (1) and
concatenation (2), ``* sin`` (2), the sum (3) and the concatenation with the (empty) pass-through part (2): 12;
backward the two products' gradients (2 + 2), the negation's (1), the split's concatenation (2) and the sum of
the two gradients of ``t`` (3): 10. BF16, 2 bytes each."""


def _rope(c: LayerContext, name: str, backward: bool = False) -> tuple[Kernel, ...]:
    """The rotary embedding of this rank's queries and keys (none for learned absolute positions)."""
    md = c.model
    if md.learned_pos_emb or not md.rope:
        return ()
    per = UNFUSED_ROPE_BYTES[backward] if md.rope_attention_factor != 1.0 else ROPE_BYTES
    return (mem(name, per * c.tokens * (md.q_dim + md.kv_dim) // c.tp),)


QK_NORM_BYTES = 4.0
"""Query / key head normalization per element (``qk_norm``): one read and one write of each 2-byte element
forward; backward 1.5x, as the layer norms (:func:`attention_backward`)."""


def _qk_norm(c: LayerContext, name: str, scale: float = 1.0) -> tuple[Kernel, ...]:
    """The head norms of this rank's queries and keys (none without ``model.qk_norm``)."""
    md = c.model
    if not md.qk_norm:
        return ()
    return (mem(name, scale * QK_NORM_BYTES * c.tokens * (md.q_dim + md.kv_dim) // c.tp),)


def _overlapped(c: LayerContext, name: str, first: tuple[Kernel, ...], mid: list[Step], last: Kernel) -> list[Step]:
    """Forward TP region with Megatron-Core's ``tp_comm_overlap`` (Transformer Engine userbuffers):
    the entry all-gather runs alongside the first GEMM and the exit reduction alongside the last GEMM,
    each region costing max(collective, GEMM) instead of their sum."""
    steps: list[Step] = []
    enter = tp_enter(c, name)
    if enter:
        e = enter[0]
        steps += [Comm(e.name, e.collective, e.bytes, "tp", "async"), Compute(f"{name}.in", first), Join()]
    else:
        steps.append(Compute(f"{name}.in", first))
    steps += mid
    out = tp_exit(c, name)
    if out:
        x = out[0]
        steps += [Comm(x.name, x.collective, x.bytes, "tp", "async"), Compute(f"{name}.out", (last,)), Join()]
    else:
        steps.append(Compute(f"{name}.out", (last,)))
    return steps


def _core_steps(c: LayerContext, name: str) -> list[Step]:
    """The forward attention core as steps: one compute step, or the context-parallel scheme (cp > 1)."""
    return cp_attention_steps(c, False) if c.cp > 1 else [Compute(name, attention_core(c, False))]


def attention_forward(c: LayerContext) -> list[Step]:
    if c.model.mla:
        return mla_forward(c)
    T, h, qkv_n, _ = _dims(c)
    if c.tp_comm_overlap and c.tp > 1:
        return [
            Compute("attn.ln", (mem("ln1", norm_bytes(c)),)),
            *_overlapped(
                c,
                "attn",
                (gemm("qkv", T, qkv_n, h), *_qk_norm(c, "qk_norm"), *_rope(c, "rope")),
                _core_steps(c, "attn.mid"),
                gemm("proj", T, h, c.model.q_dim // c.tp),
            ),
            Compute("attn.bda", (mem("bda1", bda_bytes(c)),)),
        ]
    if c.cp > 1:
        core: list[Step] = [
            Compute("attn", (gemm("qkv", T, qkv_n, h), *_qk_norm(c, "qk_norm"), *_rope(c, "rope"))),
            *_core_steps(c, "attn"),
            Compute("attn.proj", (gemm("proj", T, h, c.model.q_dim // c.tp),)),
        ]
    else:
        qkv = (gemm("qkv", T, qkv_n, h), *_qk_norm(c, "qk_norm"), *_rope(c, "rope"))
        core = [Compute("attn", (*qkv, *attention_core(c, False), gemm("proj", T, h, c.model.q_dim // c.tp)))]
    return [
        Compute("attn.ln", (mem("ln1", norm_bytes(c)),)),
        *tp_enter(c, "attn"),
        *core,
        *tp_exit(c, "attn"),
        Compute("attn.bda", (mem("bda1", bda_bytes(c)),)),
    ]


def attention_backward(c: LayerContext) -> list[Step]:
    if c.model.mla:
        return mla_backward(c)
    T, h, qkv_n, _ = _dims(c)
    steps: list[Step] = [Compute("attn.bda.bwd", (mem("bda1.bwd", bda_bytes(c)),))]
    if sp_on(c):
        steps.append(Comm("attn.ag_grad", "all_gather", c.act_bytes, "tp"))
    if c.cp > 1:
        steps.append(Compute("attn.bwd", gemm_bwd("proj", T, h, c.model.q_dim // c.tp)))
        if c.recomputes("core_attn"):
            steps += cp_attention_steps(c, False, "recompute.attn.cp")
        steps += cp_attention_steps(c, True)
        rope = (*_rope(c, "rope.bwd", True), *_qk_norm(c, "qk_norm.bwd", 1.5))
        if rope:
            steps.append(Compute("attn.rope.bwd", rope))
    else:
        kern = [*gemm_bwd("proj", T, h, c.model.q_dim // c.tp)]
        if c.recomputes("core_attn"):
            kern += attention_core(c, False)
        kern += [*attention_core(c, True), *_rope(c, "rope.bwd", True), *_qk_norm(c, "qk_norm.bwd", 1.5)]
        steps.append(Compute("attn.bwd", tuple(kern)))
    if c.recomputes("layernorm"):
        steps.append(Compute("recompute.attn.ln", (mem("ln1", norm_bytes(c)),)))
    steps += col_parallel_bwd(c, "qkv", *gemm_bwd("qkv", T, qkv_n, h))
    steps.append(Compute("attn.ln.bwd", (mem("ln1.bwd", 1.5 * norm_bytes(c)),)))
    return steps


def mlp_forward(c: LayerContext) -> list[Step]:
    T, h, _, f = _dims(c)
    up = f * (2 if c.model.gated_mlp else 1)
    if c.tp_comm_overlap and c.tp > 1:
        return [
            Compute("mlp.ln", (mem("ln2", norm_bytes(c)),)),
            *_overlapped(
                c,
                "mlp",
                (gemm("fc1", T, up, h),),
                [Compute("mlp.mid", (mem("act", act_bytes(c, f, T)),))],
                gemm("fc2", T, h, f),
            ),
            Compute("mlp.bda", (mem("bda2", bda_bytes(c)),)),
        ]
    return [
        Compute("mlp.ln", (mem("ln2", norm_bytes(c)),)),
        *tp_enter(c, "mlp"),
        Compute("mlp", (gemm("fc1", T, up, h), mem("act", act_bytes(c, f, T)), gemm("fc2", T, h, f))),
        *tp_exit(c, "mlp"),
        Compute("mlp.bda", (mem("bda2", bda_bytes(c)),)),
    ]


def mlp_backward(c: LayerContext) -> list[Step]:
    T, h, _, f = _dims(c)
    up = f * (2 if c.model.gated_mlp else 1)
    steps: list[Step] = [Compute("mlp.bda.bwd", (mem("bda2.bwd", bda_bytes(c)),))]
    if c.recomputes("mlp"):
        steps += recomputed(mlp_forward(c), ("ln2", "bda2"))
    if sp_on(c):
        steps.append(Comm("mlp.ag_grad", "all_gather", c.act_bytes, "tp"))
    steps.append(Compute("mlp.bwd", (*gemm_bwd("fc2", T, h, f), mem("act.bwd", 1.5 * act_bytes(c, f, T)))))
    if c.recomputes("layernorm") and not c.recomputes("mlp"):
        steps.append(Compute("recompute.mlp.ln", (mem("ln2", norm_bytes(c)),)))
    steps += col_parallel_bwd(c, "fc1", *gemm_bwd("fc1", T, up, h))
    steps.append(Compute("mlp.ln.bwd", (mem("ln2.bwd", 1.5 * norm_bytes(c)),)))
    return steps


def _at_layer(c: LayerContext, layer: int) -> LayerContext:
    """``c`` with layer ``layer``'s attention window."""
    w = c.model.layer_window(layer)
    return c if w == c.window else replace(c, window=w)


_HYBRID_FORWARD = {"mamba": mamba_forward, "attention": attention_forward, "mlp": mlp_forward, "moe": moe_forward}
_HYBRID_BACKWARD = {"mamba": mamba_backward, "attention": attention_backward, "mlp": mlp_backward, "moe": moe_backward}
"""A hybrid layer's one block (``ModelSpec.layer_block``): its forward and backward programs, each with its own
pre-norm and residual add."""


def _layer_forward(c: LayerContext, layer: int) -> list[Step]:
    c = _at_layer(c, layer)
    block = c.model.layer_block(layer)
    if block != "transformer":
        return _HYBRID_FORWARD[block](c)
    mlp = moe_forward(c) if c.model.is_moe_layer(layer) else mlp_forward(c)
    return attention_forward(c) + mlp


def layer_forward(c: LayerContext, layer: int) -> list[Step]:
    """Forward program of transformer layer ``layer`` (with LoRA adapters under PEFT: :mod:`~hetero_ns3.workload.peft`)."""
    return lora_steps(_layer_forward(c, layer), c)


def op_recomputed(c: LayerContext, layer: int) -> list[Step]:
    """What torchtitan's per-operator selective checkpoint (``recompute = "op"``; ``selective_ac_option = "op"``,
    ``torchtitan/models/llama3/parallelize_llama.py``) re-runs of layer ``layer`` at the start of its backward: the
    whole forward but the ops whose outputs its policy saved. It saves the attention core (SDPA's flash / efficient
    kernels) and every second ``aten.mm`` of the layer counted in execution order (q, k, v, o, then w1, w3, w2 of a
    gated MLP or fc1, fc2): it re-runs k, o and w3 (fc2), so of the fused QKV GEMM the key part, of a gated fc1 half.
    FP8 linears (torchao's ``_scaled_mm``) are not on the list: every linear GEMM is re-run, with its input cast.
    Norms, rotary, activation and residual adds are re-run in every case."""
    core = {k.name for k in attention_core(c, False)}
    T, h, _, f = _dims(c)
    gated = c.model.gated_mlp

    def rerun(k: Kernel) -> Kernel | None:
        if k.name in core:
            return None
        if c.quantized_linears:
            return k
        if k.name == "qkv":
            return gemm("qkv", T, c.model.kv_dim // c.tp, h)  # wk, the second matmul; wq and wv saved
        if k.name == "fc1":
            return gemm("fc1", T, f, h) if gated else None  # w3 (the sixth) re-run, w1 (fifth) saved
        if k.name == "fc2":
            return None if gated else k  # w2 (the seventh) saved; a plain MLP's fc2 is the sixth
        return k

    out: list[Step] = []
    for st in _layer_forward(c, layer):
        if isinstance(st, Compute):
            kernels = tuple(x for x in map(rerun, st.kernels) if x is not None)
            if kernels:
                out.append(Compute(f"recompute.{st.name}", kernels))
        else:
            out.append(tag_recompute(st))
    return out


def layer_backward(c: LayerContext, layer: int) -> list[Step]:
    """Backward program of layer ``layer`` (with its forward re-run first under full recomputation, or what the
    per-operator policy did not save, :func:`op_recomputed`; under PEFT without the base weight gradients, with the
    adapters')."""
    c = _at_layer(c, layer)
    block = c.model.layer_block(layer)
    if block != "transformer":
        body = _HYBRID_BACKWARD[block](c)
    else:
        mlp = moe_backward(c) if c.model.is_moe_layer(layer) else mlp_backward(c)
        body = mlp + attention_backward(c)
    pre: list[Step] = []
    if c.recompute == "full":
        pre = [tag_recompute(s) for s in _layer_forward(c, layer)]
    elif c.recompute == "op":
        pre = op_recomputed(c, layer)
    return lora_steps(pre + body, c)


def embedding_forward(c: LayerContext) -> list[Step]:
    """Vocab-parallel embedding lookup, its TP reduction, position embedding and dropout."""
    T, h = c.tokens, c.model.hidden
    steps: list[Step] = [Compute("emb", (mem("emb.lookup", 2.0 * ACT_BYTES * T * h),))]
    steps += tp_exit(c, "emb")
    tail = []
    if c.model.learned_pos_emb:
        tail.append(mem("emb.pos", 3.0 * ACT_BYTES * c.tokens_elementwise * h))
    if c.model.dropout:
        tail.append(mem("emb.dropout", (2.0 * ACT_BYTES + 1) * c.tokens_elementwise * h))
    if tail:
        steps.append(Compute("emb.post", tuple(tail)))
    return steps


def emb_table_grad_bytes(main_grad_bytes: float) -> float:
    """HBM bytes per element of the rank's ``V/tp x h`` embedding table, every micro-batch: PyTorch's (dense)
    embedding backward writes a zeroed BF16 gradient of the whole table (2 bytes) and Megatron-Core's DDP
    backward hook adds it into the main gradient (``main_grad.add_(grad)``: read g + 2, write g, g = 4 for FP32,
    2 for BF16 / FP16 gradient reduction): 12 bytes with FP32 main gradients. The table's weight gradient does
    not go through the fused-accumulation GEMMs the linear layers use."""
    return 2.0 + 2.0 + 2.0 * main_grad_bytes


def embedding_backward(c: LayerContext) -> list[Step]:
    """Gradient of the embedding lookup: scatter of the token gradients, then the dense table pass (nothing when the
    table is frozen under PEFT: token indices need no gradient)."""
    T, h = c.tokens, c.model.hidden
    steps: list[Step] = []
    if c.frozen:
        return steps
    if sp_on(c):
        steps.append(Comm("emb.ag_grad", "all_gather", c.act_bytes, "tp"))
    table = emb_table_grad_bytes(c.main_grad_bytes) * (c.model.padded_vocab(c.tp) // c.tp) * h
    steps.append(Compute("emb.bwd", (mem("emb.grad", 3.0 * ACT_BYTES * T * h), mem("emb.table_grad", table))))
    return steps


CE_BYTES: dict[str, tuple[float, float, float, float]] = {
    "unfused": (10.0, 20.0, 8.0, 14.0),
    "fused": (6.0, 12.0, 8.0, 14.0),
    "te": (2.0, 0.0, 0.0, 4.0),
}
"""HBM bytes per local logit of the cross-entropy loss, by ``[compute] cross_entropy``: (forward before
the max all-reduce, between it and the sum all-reduce, after it; backward). Counted from the sources'
tensor passes over the ``T x V/tp`` logits (BF16 out of the logits GEMM):

* ``unfused``, Megatron-Core ``tensor_parallel/cross_entropy.py`` (Megatron-LM's default): FP32 copy
  (read 2, write 4) and row max (read 4); in-place subtraction of the max (4 + 4), in-place exp (4 + 4)
  and row sum (4); in-place division by the sum, the softmax kept for backward (4 + 4). Backward: in-place
  product with the incoming gradient (4 + 4) and autograd's cast back to BF16 for the logits GEMM (4 + 2).
* ``fused``, Megatron-Core ``fusions/fused_cross_entropy.py`` (``cross_entropy_loss_fusion``): the copy and
  the max in one kernel (2 + 4), subtraction and exp in one in-place kernel (4 + 4) and the sum (4), the
  division (4 + 4); backward as unfused (its gradient leaves in the logits' dtype).
* ``te``, Transformer Engine ``pytorch/triton/cross_entropy.py`` (``cross_entropy_fusion_impl = "te"``): one
  online-softmax read of the BF16 logits (2); the loss from per-row scalars; backward one pass writing the
  gradient over the logits in place (2 + 2).
"""


def head_forward(c: LayerContext) -> list[Step]:
    """Final norm, vocab-parallel logits and cross-entropy (3 scalar all-reduces per token when tp > 1), after the
    multi-token prediction modules where the model has them (:func:`mtp_forward`).

    The loss kernels' traffic is :data:`CE_BYTES` per local logit (the ``cross_entropy`` of the context).
    """
    mtp = [st for _ in range(c.model.mtp_layers) for st in mtp_forward(c)]
    return mtp + _head_forward(c)


def mtp_forward(c: LayerContext) -> list[Step]:
    """One multi-token prediction module (``model.mtp_layers``; DeepSeek-V3, arXiv 2412.19437, Sec. 2.2;
    Megatron-Core's ``MultiTokenPredictionLayer``): the embedding of the tokens shifted by one (the model's
    vocab-parallel table), an RMS norm of it and of the hidden state, their concatenation projected 2h -> h
    (``eh_proj``, column-parallel, its output gathered), one transformer layer of the last layer's kind (its steps
    named as a layer's: its routing synchronises the host like any MoE layer's), and its own final norm, logits and
    loss through the shared output layer."""
    T, h, Te = c.tokens, c.model.hidden, c.tokens_elementwise
    steps = _prefixed(embedding_forward(c), "mtp")
    norms = mem("mtp.norms", 2 * 2.0 * ACT_BYTES * Te * h)
    cat = mem("mtp.cat", 2 * 2.0 * ACT_BYTES * Te * h)
    steps.append(Compute("mtp.in", (norms, cat)))
    if sp_on(c):  # the column-parallel projection gathers its 2h-wide input
        steps.append(Comm("mtp.in.ag", "all_gather", 2 * c.act_bytes, "tp"))
    steps.append(Compute("mtp.proj", (gemm("mtp_proj", T, h // c.tp, 2 * h),)))
    if c.tp > 1:
        steps.append(Comm("mtp.proj.ag", "all_gather", c.act_bytes, "tp"))
    steps += layer_forward(c, c.model.layers - 1)
    return steps + _prefixed(_head_forward(c), "mtp")


def mtp_backward(c: LayerContext) -> list[Step]:
    """Backward of one multi-token prediction module (:func:`mtp_forward` reversed; its layer's as
    :func:`layer_backward`)."""
    T, h, Te = c.tokens, c.model.hidden, c.tokens_elementwise
    steps = _prefixed(_head_backward(c), "mtp") + layer_backward(c, c.model.layers - 1)
    if sp_on(c):  # the gradient of the projection's output, back from sequence shards to every token
        steps.append(Comm("mtp.proj.ag_grad", "all_gather", c.act_bytes, "tp"))
    steps += _prefixed(col_parallel_bwd(c, "proj", *gemm_bwd("mtp_proj", T, h // c.tp, 2 * h)), "mtp")
    steps.append(Compute("mtp.in.bwd", (mem("mtp.norms.bwd", 1.5 * 2 * 2.0 * ACT_BYTES * Te * h),)))
    return steps + _prefixed(embedding_backward(c), "mtp")


def _prefixed(steps: list[Step] | list[Comm], prefix: str) -> list[Step]:
    """``steps`` with ``prefix.`` before each name (:func:`~hetero_ns3.workload.steps.tagged`)."""
    return [tagged(s, prefix) for s in steps]


def _head_forward(c: LayerContext) -> list[Step]:
    T, h = c.tokens, c.model.hidden
    v = c.model.padded_vocab(c.tp) // c.tp
    n = float(T * v)  # local logits
    pre, mid, post, _ = CE_BYTES[c.cross_entropy]
    steps: list[Step] = [Compute("head.ln", (mem("ln_f", norm_bytes(c)),)), *tp_enter(c, "head")]
    steps.append(Compute("head.logits", (gemm("logits", T, v, h), mem("ce.max", pre * n))))
    if c.tp > 1:
        steps += [
            Comm("ce.ar_max", "all_reduce", 4.0 * T, "tp"),
            Compute("ce.pred", (mem("ce.pred", 4.0 * T),)),
            Comm("ce.ar_pred", "all_reduce", 4.0 * T, "tp"),
            Compute("ce.exp", (mem("ce.exp", mid * n),)),
            Comm("ce.ar_sum", "all_reduce", 4.0 * T, "tp"),
        ]
    exp: tuple[Kernel, ...] = (mem("ce.exp", mid * n),) if c.tp == 1 and mid else ()
    soft: tuple[Kernel, ...] = (mem("ce.softmax", post * n),) if post else ()
    steps.append(Compute("ce.loss", (*exp, mem("ce.loss", 3 * 4.0 * T), *soft)))
    return steps


def head_backward(c: LayerContext) -> list[Step]:
    """Backward of :func:`head_forward`: the loss and logits, then the multi-token prediction modules'."""
    steps = _head_backward(c)
    for _ in range(c.model.mtp_layers):
        steps += mtp_backward(c)
    return lora_steps(steps, c)


def _head_backward(c: LayerContext) -> list[Step]:
    T, h = c.tokens, c.model.hidden
    v = c.model.padded_vocab(c.tp) // c.tp
    steps: list[Step] = [Compute("ce.bwd", (mem("ce.grad", CE_BYTES[c.cross_entropy][3] * T * v),))]
    steps += col_parallel_bwd(c, "logits", *gemm_bwd("logits", T, v, h))
    steps.append(Compute("head.ln.bwd", (mem("ln_f.bwd", 1.5 * norm_bytes(c)),)))
    return steps
