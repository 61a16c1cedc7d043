"""Per-rank step programs of transformer pieces: compute kernels and the TP / EP / CP collectives between them.

Steps (:class:`Compute`, :class:`Comm`, :class:`Join`) and the rank's shapes (:class:`LayerContext`) are in
:mod:`hetero_ns3.workload.steps`, the attention core in :mod:`hetero_ns3.workload.attention`; both are re-exported
here. With T = b x s tokens and 2-byte activations, every TP collective of a layer moves ``2 T h`` bytes
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
from hetero_ns3.workload.steps import ACT_BYTES, Comm, Compute, Join, LayerContext, Step, gemm, gemm_bwd, mem

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
]


def _dims(c: LayerContext) -> tuple[int, int, int, int]:
    md, t = c.model, c.tp
    return c.tokens, md.hidden, (md.q_dim + 2 * md.kv_dim) // t, md.ffn_hidden // t


def _sp(c: LayerContext) -> bool:
    return c.sequence_parallel and c.tp > 1


def _col_parallel_bwd(c: LayerContext, name: str, dgrad: Kernel, wgrad: Kernel) -> list[Step]:
    """Backward of a column-parallel linear: its input-gradient reduction overlaps the weight gradient."""
    if c.tp == 1:
        return [Compute(name, (dgrad, wgrad))]
    if _sp(c):
        return [
            Comm(f"{name}.ag_input", "all_gather", c.act_bytes, "tp", "async"),
            Compute(f"{name}.dgrad", (dgrad,)),
            Join(),
            Comm(f"{name}.rs_grad", "reduce_scatter", c.act_bytes, "tp", "async"),
            Compute(f"{name}.wgrad", (wgrad,)),
            Join(),
        ]
    return [
        Compute(f"{name}.dgrad", (dgrad,)),
        Comm(f"{name}.ar_grad", "all_reduce", c.act_bytes, "tp", "async"),
        Compute(f"{name}.wgrad", (wgrad,)),
        Join(),
    ]


def _tp_enter(c: LayerContext, name: str) -> list[Comm]:
    """Forward entry of a TP region: all-gather under SP, nothing otherwise."""
    return [Comm(f"{name}.ag", "all_gather", c.act_bytes, "tp")] if _sp(c) else []


def _tp_exit(c: LayerContext, name: str) -> list[Comm]:
    """Forward exit of a TP region: reduce-scatter under SP, all-reduce otherwise (tp > 1)."""
    if c.tp == 1:
        return []
    if _sp(c):
        return [Comm(f"{name}.rs", "reduce_scatter", c.act_bytes, "tp")]
    return [Comm(f"{name}.ar", "all_reduce", c.act_bytes, "tp")]


ROPE_BYTES = 4.0
"""Rotary position embedding per query / key element, forward and again backward: Megatron-LM applies it
fused (``apply_rope_fusion``, on unless ``--no-rope-fusion``; Transformer Engine's fused RoPE kernel), one
read and one write of each 2-byte element."""


def _rope(c: LayerContext, name: str) -> tuple[Kernel, ...]:
    """The rotary embedding of this rank's queries and keys (none for learned absolute positions)."""
    md = c.model
    if md.learned_pos_emb:
        return ()
    return (mem(name, ROPE_BYTES * c.tokens * (md.q_dim + md.kv_dim) // c.tp),)


QK_NORM_BYTES = 4.0
"""Query / key head normalization per element (``qk_norm``): one read and one write of each 2-byte element
forward; backward 1.5x, as the layer norms (:func:`attention_backward`)."""


def _qk_norm(c: LayerContext, name: str, scale: float = 1.0) -> tuple[Kernel, ...]:
    """The head norms of this rank's queries and keys (none without ``model.qk_norm``)."""
    md = c.model
    if not md.qk_norm:
        return ()
    return (mem(name, scale * QK_NORM_BYTES * c.tokens * (md.q_dim + md.kv_dim) // c.tp),)


def _norm_bytes(c: LayerContext) -> float:
    return 2.0 * ACT_BYTES * c.tokens_elementwise * c.model.hidden


def _bda_bytes(c: LayerContext) -> float:
    """Bias + dropout + residual add: read two tensors, write one (+ a 1-byte mask with dropout)."""
    return (3.0 * ACT_BYTES + (1 if c.model.dropout else 0)) * c.tokens_elementwise * c.model.hidden


def _overlapped(c: LayerContext, name: str, first: tuple[Kernel, ...], mid: list[Step], last: Kernel) -> list[Step]:
    """Forward TP region with Megatron-Core's ``tp_comm_overlap`` (Transformer Engine userbuffers):
    the entry all-gather runs alongside the first GEMM and the exit reduction alongside the last GEMM,
    each region costing max(collective, GEMM) instead of their sum."""
    steps: list[Step] = []
    enter = _tp_enter(c, name)
    if enter:
        e = enter[0]
        steps += [Comm(e.name, e.collective, e.bytes, "tp", "async"), Compute(f"{name}.in", first), Join()]
    else:
        steps.append(Compute(f"{name}.in", first))
    steps += mid
    out = _tp_exit(c, name)
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
    T, h, qkv_n, _ = _dims(c)
    if c.tp_comm_overlap and c.tp > 1:
        return [
            Compute("attn.ln", (mem("ln1", _norm_bytes(c)),)),
            *_overlapped(
                c,
                "attn",
                (gemm("qkv", T, qkv_n, h), *_qk_norm(c, "qk_norm"), *_rope(c, "rope")),
                _core_steps(c, "attn.mid"),
                gemm("proj", T, h, c.model.q_dim // c.tp),
            ),
            Compute("attn.bda", (mem("bda1", _bda_bytes(c)),)),
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
        Compute("attn.ln", (mem("ln1", _norm_bytes(c)),)),
        *_tp_enter(c, "attn"),
        *core,
        *_tp_exit(c, "attn"),
        Compute("attn.bda", (mem("bda1", _bda_bytes(c)),)),
    ]


def attention_backward(c: LayerContext) -> list[Step]:
    T, h, qkv_n, _ = _dims(c)
    steps: list[Step] = [Compute("attn.bda.bwd", (mem("bda1.bwd", _bda_bytes(c)),))]
    if _sp(c):
        steps.append(Comm("attn.ag_grad", "all_gather", c.act_bytes, "tp"))
    if c.cp > 1:
        steps.append(Compute("attn.bwd", gemm_bwd("proj", T, h, c.model.q_dim // c.tp)))
        if c.recomputes("core_attn"):
            steps += cp_attention_steps(c, False, "recompute.attn.cp")
        steps += cp_attention_steps(c, True)
        rope = (*_rope(c, "rope.bwd"), *_qk_norm(c, "qk_norm.bwd", 1.5))
        if rope:
            steps.append(Compute("attn.rope.bwd", rope))
    else:
        kern = [*gemm_bwd("proj", T, h, c.model.q_dim // c.tp)]
        if c.recomputes("core_attn"):
            kern += attention_core(c, False)
        kern += [*attention_core(c, True), *_rope(c, "rope.bwd"), *_qk_norm(c, "qk_norm.bwd", 1.5)]
        steps.append(Compute("attn.bwd", tuple(kern)))
    if c.recomputes("layernorm"):
        steps.append(Compute("recompute.attn.ln", (mem("ln1", _norm_bytes(c)),)))
    steps += _col_parallel_bwd(c, "qkv", *gemm_bwd("qkv", T, qkv_n, h))
    steps.append(Compute("attn.ln.bwd", (mem("ln1.bwd", 1.5 * _norm_bytes(c)),)))
    return steps


def _act_bytes(c: LayerContext, f_local: int, tokens: int) -> float:
    return ACT_BYTES * tokens * f_local * (3 if c.model.gated_mlp else 2)


def mlp_forward(c: LayerContext) -> list[Step]:
    T, h, _, f = _dims(c)
    up = f * (2 if c.model.gated_mlp else 1)
    if c.tp_comm_overlap and c.tp > 1:
        return [
            Compute("mlp.ln", (mem("ln2", _norm_bytes(c)),)),
            *_overlapped(
                c,
                "mlp",
                (gemm("fc1", T, up, h),),
                [Compute("mlp.mid", (mem("act", _act_bytes(c, f, T)),))],
                gemm("fc2", T, h, f),
            ),
            Compute("mlp.bda", (mem("bda2", _bda_bytes(c)),)),
        ]
    return [
        Compute("mlp.ln", (mem("ln2", _norm_bytes(c)),)),
        *_tp_enter(c, "mlp"),
        Compute("mlp", (gemm("fc1", T, up, h), mem("act", _act_bytes(c, f, T)), gemm("fc2", T, h, f))),
        *_tp_exit(c, "mlp"),
        Compute("mlp.bda", (mem("bda2", _bda_bytes(c)),)),
    ]


def mlp_backward(c: LayerContext) -> list[Step]:
    T, h, _, f = _dims(c)
    up = f * (2 if c.model.gated_mlp else 1)
    steps: list[Step] = [Compute("mlp.bda.bwd", (mem("bda2.bwd", _bda_bytes(c)),))]
    if c.recomputes("mlp"):
        steps += _recomputed(mlp_forward(c), ("ln2", "bda2"))
    if _sp(c):
        steps.append(Comm("mlp.ag_grad", "all_gather", c.act_bytes, "tp"))
    steps.append(Compute("mlp.bwd", (*gemm_bwd("fc2", T, h, f), mem("act.bwd", 1.5 * _act_bytes(c, f, T)))))
    if c.recomputes("layernorm") and not c.recomputes("mlp"):
        steps.append(Compute("recompute.mlp.ln", (mem("ln2", _norm_bytes(c)),)))
    steps += _col_parallel_bwd(c, "fc1", *gemm_bwd("fc1", T, up, h))
    steps.append(Compute("mlp.ln.bwd", (mem("ln2.bwd", 1.5 * _norm_bytes(c)),)))
    return steps


def moe_dispatch_bytes(c: LayerContext) -> float:
    """All-to-all send bytes of one rank: its (sequence-sharded) tokens, top_k copies, 2 bytes each."""
    return float(ACT_BYTES * c.tokens_elementwise * c.model.top_k * c.model.hidden)


def _moe_exchange(c: LayerContext, name: str, forward_in: bool) -> list[Step]:
    a2a: list[Step] = [Comm(f"{name}.a2a", "all_to_all", moe_dispatch_bytes(c), "ep")] if c.ep > 1 else []
    if c.tp == 1:
        return a2a
    gathered = moe_dispatch_bytes(c) * c.tp
    tp: list[Step] = [
        Comm(f"{name}.{'ag' if forward_in else 'rs'}", "all_gather" if forward_in else "reduce_scatter", gathered, "tp")
    ]
    return a2a + tp if forward_in else tp + a2a


def _experts(c: LayerContext) -> tuple[int, int, int, int]:
    md = c.model
    local = md.experts // c.ep
    tokens_local = c.tokens_elementwise * md.top_k * c.tp  # after dispatch and TP gather
    per_expert = max(1, tokens_local // local)
    return local, per_expert, md.hidden, md.ffn_hidden // c.tp


def moe_forward(c: LayerContext) -> list[Step]:
    md = c.model
    local, m_e, h, f = _experts(c)
    up = f * (2 if md.gated_mlp else 1)
    Te = c.tokens_elementwise
    perm = ACT_BYTES * 2.0 * Te * md.top_k * h
    shared, bda = _shared_expert(c, False), _bda_bytes(c)
    return [
        Compute("moe.route", (mem("ln2", _norm_bytes(c)), gemm("router", Te, md.experts, h), mem("permute", perm))),
        *_moe_exchange(c, "moe.dispatch", True),
        Compute(
            "moe.experts",
            (
                gemm("fc1", m_e, up, h, local),
                mem("act", _act_bytes(c, f, m_e * local)),
                gemm("fc2", m_e, h, f, local),
            ),
        ),
        *_moe_exchange(c, "moe.combine", False),
        *(
            [Compute("moe.unpermute", (mem("unpermute", perm),)), *shared, Compute("moe.bda", (mem("bda2", bda),))]
            if shared
            else [Compute("moe.unpermute", (mem("unpermute", perm), mem("bda2", bda)))]
        ),
    ]


def _shared_expert(c: LayerContext, backward: bool) -> list[Step]:
    """The shared expert of an MoE layer (``model.shared_ffn``): a tensor-parallel MLP on every token, run after
    the routed experts' combine (Megatron-Core's ``MoELayer`` without ``moe_shared_expert_overlap``); its forward
    gathers / reduces like the dense MLP, its backward mirrors :func:`mlp_backward`."""
    md = c.model
    if not md.shared_ffn:
        return []
    T, h, sf = c.tokens, md.hidden, md.shared_ffn // c.tp
    up = sf * (2 if md.gated_mlp else 1)
    if not backward:
        kernels = (gemm("fc1", T, up, h), mem("act", _act_bytes(c, sf, T)), gemm("fc2", T, h, sf))
        return [*_tp_enter(c, "moe.shared"), Compute("moe.shared", kernels), *_tp_exit(c, "moe.shared")]
    steps: list[Step] = [Comm("moe.shared.ag_grad", "all_gather", c.act_bytes, "tp")] if _sp(c) else []
    steps.append(Compute("moe.shared.bwd", (*gemm_bwd("fc2", T, h, sf), mem("act.bwd", 1.5 * _act_bytes(c, sf, T)))))
    return steps + _col_parallel_bwd(c, "moe.shared.fc1", *gemm_bwd("fc1", T, up, h))


def moe_backward(c: LayerContext) -> list[Step]:
    md = c.model
    local, m_e, h, f = _experts(c)
    up = f * (2 if md.gated_mlp else 1)
    Te = c.tokens_elementwise
    perm = ACT_BYTES * 2.0 * Te * md.top_k * h
    whole = c.recomputes("moe")
    act = (mem("act", _act_bytes(c, f, m_e * local)),) if c.recomputes("moe_act") and not whole else ()
    norm = (mem("ln2", _norm_bytes(c)),) if c.recomputes("layernorm") and not whole else ()
    # the recomputed norm output is first needed by the shared expert's weight gradient where there is one
    shared_norm, route_norm = (norm, ()) if md.shared_ffn else ((), norm)
    head: list[Step] = [Compute("moe.unpermute.bwd", (mem("bda2.bwd", _bda_bytes(c)), mem("unpermute.bwd", perm)))]
    if whole or md.shared_ffn:
        # the residual add's backward, then the checkpointed MoE layer's forward again (``moe``), the shared
        # expert's backward, and the routed path's
        head = [
            Compute("moe.bda.bwd", (mem("bda2.bwd", _bda_bytes(c)), *shared_norm)),
            *(_recomputed(moe_forward(c), ("ln2", "bda2")) if whole else []),
            *_shared_expert(c, True),
            Compute("moe.unpermute.bwd", (mem("unpermute.bwd", perm),)),
        ]
    return [
        *head,
        *_moe_exchange(c, "moe.combine.bwd", True),
        Compute(
            "moe.experts.bwd",
            (
                *act,
                *gemm_bwd("fc2", m_e, h, f, local),
                mem("act.bwd", 1.5 * _act_bytes(c, f, m_e * local)),
                *gemm_bwd("fc1", m_e, up, h, local),
            ),
        ),
        *_moe_exchange(c, "moe.dispatch.bwd", False),
        Compute(
            "moe.route.bwd",
            (
                *route_norm,
                mem("permute.bwd", perm),
                *gemm_bwd("router", Te, md.experts, h),
                mem("ln2.bwd", 1.5 * _norm_bytes(c)),
            ),
        ),
    ]


def _at_layer(c: LayerContext, layer: int) -> LayerContext:
    """``c`` with layer ``layer``'s attention window."""
    w = c.model.layer_window(layer)
    return c if w == c.window else replace(c, window=w)


def layer_forward(c: LayerContext, layer: int) -> list[Step]:
    """Forward program of transformer layer ``layer``."""
    c = _at_layer(c, layer)
    mlp = moe_forward(c) if c.model.is_moe_layer(layer) else mlp_forward(c)
    return attention_forward(c) + mlp


def layer_backward(c: LayerContext, layer: int) -> list[Step]:
    """Backward program of layer ``layer`` (with its forward re-run first under full recomputation)."""
    c = _at_layer(c, layer)
    mlp = moe_backward(c) if c.model.is_moe_layer(layer) else mlp_backward(c)
    pre = [_tag_recompute(s) for s in layer_forward(c, layer)] if c.recompute == "full" else []
    return pre + mlp + attention_backward(c)


def _recomputed(steps: list[Step], outside: tuple[str, ...]) -> list[Step]:
    """A module's forward ``steps`` re-run in the backward (selective ``mlp`` / ``moe``): renamed ``recompute.*``,
    without the kernels named in ``outside`` (the norm before the module, the residual add after it) and the
    compute steps left empty by that."""
    out: list[Step] = []
    for st in steps:
        if isinstance(st, Compute):
            kernels = tuple(k for k in st.kernels if k.name not in outside)
            if kernels:
                out.append(Compute(f"recompute.{st.name}", kernels))
        else:
            out.append(_tag_recompute(st))
    return out


def _tag_recompute(s: Step) -> Step:
    if isinstance(s, Compute):
        return Compute(f"recompute.{s.name}", s.kernels)
    if isinstance(s, Comm):
        return Comm(f"recompute.{s.name}", s.collective, s.bytes, s.dim, s.mode)
    return s


def embedding_forward(c: LayerContext) -> list[Step]:
    """Vocab-parallel embedding lookup, its TP reduction, position embedding and dropout."""
    T, h = c.tokens, c.model.hidden
    steps: list[Step] = [Compute("emb", (mem("emb.lookup", 2.0 * ACT_BYTES * T * h),))]
    steps += _tp_exit(c, "emb")
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
    """Gradient of the embedding lookup: scatter of the token gradients, then the dense table pass."""
    T, h = c.tokens, c.model.hidden
    steps: list[Step] = []
    if _sp(c):
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
    """Final norm, vocab-parallel logits and cross-entropy (3 scalar all-reduces per token when tp > 1).

    The loss kernels' traffic is :data:`CE_BYTES` per local logit (the ``cross_entropy`` of the context).
    """
    T, h = c.tokens, c.model.hidden
    v = c.model.padded_vocab(c.tp) // c.tp
    n = float(T * v)  # local logits
    pre, mid, post, _ = CE_BYTES[c.cross_entropy]
    steps: list[Step] = [Compute("head.ln", (mem("ln_f", _norm_bytes(c)),)), *_tp_enter(c, "head")]
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
    T, h = c.tokens, c.model.hidden
    v = c.model.padded_vocab(c.tp) // c.tp
    steps: list[Step] = [Compute("ce.bwd", (mem("ce.grad", CE_BYTES[c.cross_entropy][3] * T * v),))]
    steps += _col_parallel_bwd(c, "logits", *gemm_bwd("logits", T, v, h))
    steps.append(Compute("head.ln.bwd", (mem("ln_f.bwd", 1.5 * _norm_bytes(c)),)))
    return steps
