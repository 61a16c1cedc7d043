"""Per-rank step programs of transformer pieces: compute kernels and the TP / EP collectives between them.

A program is a list of steps executed in order on one rank:

* :class:`Compute` — kernels run back to back on the compute stream;
* :class:`Comm` — a collective of the layer's TP or EP group; ``blocking`` collectives sit on the
  compute stream (Megatron issues them synchronously), ``async`` ones run on the comm stream
  overlapping the following compute until a :class:`Join`;
* :class:`Join` — the next compute waits for every outstanding async collective.

Collective sizes follow NCCL's ``size`` (nccl-tests): all-reduce = buffer bytes; all-gather = output
bytes; reduce-scatter = input bytes; all-to-all = send-buffer bytes of one rank. With T = b x s tokens
and 2-byte activations, every TP collective of a layer moves ``2 T h`` bytes (Megatron-LM, Shoeybi
et al. 2019; Korthikanti et al. 2022 for sequence parallelism).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Literal

from hetero_ns3.compute.roofline import Kernel, OpClass
from hetero_ns3.workload.models import ModelSpec

ACT_BYTES = 2  # bf16/fp16 activations


@dataclass(frozen=True, slots=True)
class Compute:
    name: str
    kernels: tuple[Kernel, ...]


@dataclass(frozen=True, slots=True)
class Comm:
    name: str
    collective: Literal["all_reduce", "all_gather", "reduce_scatter", "all_to_all"]
    bytes: float
    dim: Literal["tp", "ep", "cp"]
    mode: Literal["blocking", "async"] = "blocking"


@dataclass(frozen=True, slots=True)
class Join:
    pass


Step = Compute | Comm | Join


@dataclass(frozen=True)
class LayerContext:
    """Shapes seen by one rank: model, micro_batch b, tp, sequence parallelism, ep, recompute."""

    model: ModelSpec
    micro_batch: int
    tp: int
    sequence_parallel: bool
    ep: int
    recompute: str
    flash_attention: bool = True
    tp_comm_overlap: bool = False
    cp: int = 1
    cp_comm_type: Literal["p2p", "all_gather", "a2a"] = "p2p"

    @property
    def seq_local(self) -> int:
        """Tokens of one sequence on this rank: s / cp (context parallelism splits every sequence)."""
        return self.model.seq_len // self.cp

    @property
    def tokens(self) -> int:
        """Tokens of a microbatch on this rank, T = b x s / cp."""
        return self.micro_batch * self.seq_local

    @property
    def tokens_elementwise(self) -> int:
        """Tokens an element-wise op touches on one rank (T / tp under sequence parallelism)."""
        return self.tokens // self.tp if self.sequence_parallel and self.tp > 1 else self.tokens

    @property
    def act_bytes(self) -> float:
        """Bytes of one activation tensor [T, h] (the size of every TP collective of a layer)."""
        return float(ACT_BYTES * self.tokens * self.model.hidden)


def gemm(name: str, m: int, n: int, k: int, batch: int = 1) -> Kernel:
    """Kernel of ``batch`` products (m x k) @ (k x n) in 2-byte precision."""
    return Kernel(
        name, "gemm", 2.0 * m * n * k * batch, float(ACT_BYTES * (m * k + k * n + m * n) * batch), m, n, k, batch
    )


def gemm_bwd(name: str, m: int, n: int, k: int, batch: int = 1) -> tuple[Kernel, Kernel]:
    """Data-gradient (m x n @ n x k) and weight-gradient (k x m @ m x n) kernels of a forward GEMM."""
    return gemm(f"{name}.dgrad", m, k, n, batch), gemm(f"{name}.wgrad", k, n, m, batch)


def mem(name: str, nbytes: float) -> Kernel:
    """Element-wise kernel moving ``nbytes`` bytes."""
    return Kernel(name, "memory", 0.0, float(nbytes))


FLASH_BWD_PRE_BYTES = 2 * ACT_BYTES
"""Per element of O: the backward pre-pass reads O and dO (then writes one FP32 row sum per query row)."""
FLASH_BWD_DQ_BYTES = 4 + 4 + 2
"""Per element of dQ: the FP32 accumulator cleared (4 B), read back (4 B) and written as BF16 (2 B)."""


def flash_attention_kernels(
    b: int, s: int, hl: int, kl: int, hd: int, causal: bool, backward: bool, kv: int = 0
) -> tuple[Kernel, ...]:
    """Fused (flash) attention of ``b`` sequences of ``s`` query tokens against ``kv`` key / value tokens
    (``kv`` 0: ``s``, self-attention), ``hl`` query and ``kl`` key/value heads of size ``hd`` on one rank.

    Forward: one kernel, model FLOPs ``4 b s kv hl hd`` (``work`` 1/2 under a causal mask), traffic Q, K, V,
    O. Backward: the main kernel (twice the forward FLOPs; reads Q, K, V, O, dO, writes dQ, dK, dV) and the
    two memory-bound kernels every flash backward runs beside it (FlashAttention-2/3's
    ``flash_bwd_dot_do_o`` / ``convert_dq``, cuDNN's ``compute_dot_do_o`` / ``convert_dq_to_16bits``, seen
    in ``hetero_ns3/data/measured/h200/layers_profile.txt``): the pre-pass ``rowsum(dO * O)`` and the FP32
    dQ accumulator's clear and conversion. Kernel ``m`` carries ``s`` (query rows), ``k`` ``hd`` and ``batch``
    ``b x hl`` (the roofline's sequence-length, head-dimension and occupancy laws).
    """
    kv = kv or s
    flops = 4.0 * b * s * kv * hl * hd
    q = float(b * s * hl * hd)
    kvb = float(b * kv * kl * hd)

    def core(name: str, op: OpClass, f: float, nbytes: float) -> Kernel:
        """The main kernel, with the grid the roofline's sequence, head-dimension and occupancy laws read."""
        return Kernel(name, op, f, nbytes, m=s, k=hd, batch=b * hl, work=0.5 if causal else 1.0, causal=causal)

    if not backward:
        return (core("attn.core", "attention_fwd", flops, ACT_BYTES * (2 * q + 2 * kvb)),)
    return (
        mem("attn.core.bwd.pre", FLASH_BWD_PRE_BYTES * q + 4.0 * b * hl * s),
        core("attn.core.bwd", "attention_bwd", 2 * flops, ACT_BYTES * (4 * q + 4 * kvb)),
        mem("attn.core.bwd.dq", FLASH_BWD_DQ_BYTES * q),
    )


def cp_attention_steps(c: LayerContext, backward: bool, name: str = "attn.cp") -> list[Step]:
    """Attention core of one rank under context parallelism (``cp`` > 1), by ``c.cp_comm_type`` (Megatron-Core's
    ``--cp-comm-type``): ``p2p`` the key / value ring (:func:`cp_ring_steps`, the default), ``all_gather``
    (:func:`cp_all_gather_steps`) or ``a2a`` (:func:`cp_a2a_steps`)."""
    if c.cp_comm_type == "all_gather":
        return cp_all_gather_steps(c, backward, name)
    if c.cp_comm_type == "a2a":
        return cp_a2a_steps(c, backward, name)
    return cp_ring_steps(c, backward, name)


def _half_work(kernels: tuple[Kernel, ...]) -> tuple[Kernel, ...]:
    """Kernels of a causal rectangle: model FLOPs count the full rectangle, the kernel executes half of it."""
    return tuple(replace(k, work=0.5) if k.op != "memory" else k for k in kernels)


def cp_all_gather_steps(c: LayerContext, backward: bool, name: str = "attn.cp") -> list[Step]:
    """Context parallelism by an all-gather of keys and values (Megatron-Core ``cp_comm_type = "all_gather"``,
    Transformer Engine's ``AttnFuncWithCPAndKVAllGather``; the scheme of the Llama 3 paper, arXiv 2407.21783,
    Sec. 3.3.2): the rank gathers every rank's K and V before attention (blocking: exposed, small under GQA),
    attends its two load-balanced query chunks to the gathered keys (``s / cp x s`` under the causal mask, half
    of it executed, the same on every rank) and, in the backward, gathers K and V again and reduce-scatters
    their gradient. Traffic per rank and layer: ``cp - 1`` K / V blocks forward, ``2 (cp - 1)`` backward."""
    md, t, cp = c.model, c.tp, c.cp
    b, sl, hl, kl, hd = c.micro_batch, c.seq_local, md.heads // t, md.n_kv_heads // t, md.head_dim
    core = flash_attention_kernels(b, sl, hl, kl, hd, False, backward, kv=md.seq_len)
    if md.causal:
        core = _half_work(core)
    kv = cp * float(ACT_BYTES * 2 * b * sl * kl * hd)
    if not backward:
        return [Comm(f"{name}.kv_ag", "all_gather", kv, "cp"), Compute(f"{name}.fwd", core)]
    return [
        Comm(f"{name}.kv_ag_bwd", "all_gather", kv, "cp"),
        Compute(f"{name}.bwd", core),
        Comm(f"{name}.dkv_rs", "reduce_scatter", kv, "cp"),
    ]


def cp_a2a_steps(c: LayerContext, backward: bool, name: str = "attn.cp") -> list[Step]:
    """Context parallelism by all-to-alls (Megatron-Core ``cp_comm_type = "a2a"``; DeepSpeed-Ulysses, Jacobs et
    al., arXiv 2309.14509): an all-to-all turns the rank's sequence shard of Q, K and V into all ``s`` tokens of
    ``1 / cp`` of its heads, attention runs over the whole sequence on those heads, and a second all-to-all
    returns the output to sequence shards; the backward mirrors it (dO in, dQ / dK / dV out). Needs the rank's
    query and key / value heads divisible by cp. Blocking (on the compute stream)."""
    md, t, cp = c.model, c.tp, c.cp
    b, sl, hl, kl, hd = c.micro_batch, c.seq_local, md.heads // t, md.n_kv_heads // t, md.head_dim
    core = flash_attention_kernels(b, md.seq_len, hl // cp, kl // cp, hd, md.causal, backward)
    q = float(ACT_BYTES * b * sl * hl * hd)
    qkv = q + float(ACT_BYTES * 2 * b * sl * kl * hd)
    if not backward:
        return [
            Comm(f"{name}.qkv_a2a", "all_to_all", qkv, "cp"),
            Compute(f"{name}.fwd", core),
            Comm(f"{name}.o_a2a", "all_to_all", q, "cp"),
        ]
    return [
        Comm(f"{name}.do_a2a", "all_to_all", q, "cp"),
        Compute(f"{name}.bwd", core),
        Comm(f"{name}.dqkv_a2a", "all_to_all", qkv, "cp"),
    ]


def cp_ring_steps(c: LayerContext, backward: bool, name: str = "attn.cp") -> list[Step]:
    """Context parallelism by a ring of key / value blocks (Megatron-Core's default ``cp_comm_type = "p2p"``,
    Transformer Engine's ``AttnFuncWithCPAndKVP2P``).

    Each sequence is cut into ``2 cp`` chunks of ``s / (2 cp)`` tokens and rank ``r`` holds chunks ``r`` and
    ``2 cp - 1 - r`` (load balancing under a causal mask). Step 0 attends the local queries to the local keys: a
    causal kernel over ``s / cp`` tokens. Each of the ``cp - 1`` further steps attends to the key / value
    block received from the ring neighbour: under a causal mask either all local queries to half the block or
    half the queries to all of it, i.e. an unmasked ``s / cp x s / (2 cp)`` kernel (without a mask: ``s / cp``
    square). Every rank executes ``1 / cp`` of the attention FLOPs; model FLOPs count each step as the full
    ``s / cp`` square (``work`` 1/2 for the half-block steps), so that they sum to the unsplit kernel's.

    Communication: the forward passes each rank's K and V (``2 b (s / cp) kv_heads / tp hd`` elements, 2 bytes)
    ``cp - 1`` hops around the ring, the backward K, V and their gradient: an all-gather over the CP group of
    ``cp`` blocks (``cp - 1`` blocks sent per rank; twice that in the backward). Each hop overlaps the
    previous step's kernel, so the exchange runs asynchronously beside all steps but the last, and the last
    step waits for it: ``max((cp - 1) hops, steps 0 .. cp - 2) + last step``, the critical path of the ring in
    both regimes (hop shorter or longer than a step). The partial results are merged by memory-bound passes:
    forward, each step's output rescaled by its log-sum-exp and added into the result (``cp`` passes reading
    two 2-byte tensors and writing one); backward, each further step's dQ and dK / dV added into the rank's
    gradients (``cp - 1`` passes each).
    """
    md, t, cp = c.model, c.tp, c.cp
    b, sl, hl, kl, hd = c.micro_batch, c.seq_local, md.heads // t, md.n_kv_heads // t, md.head_dim
    local = flash_attention_kernels(b, sl, hl, kl, hd, md.causal, backward)
    block = flash_attention_kernels(b, sl, hl, kl, hd, False, backward, kv=sl // 2 if md.causal else sl)
    if md.causal:  # model FLOPs count the full square (as everywhere): the block executes half of it
        block = _half_work(tuple(replace(k, flops=2 * k.flops) if k.op != "memory" else k for k in block))
    kv_block = float(ACT_BYTES * 2 * b * sl * kl * hd)
    hops = cp * kv_block * (2 if backward else 1)
    kind = "bwd" if backward else "fwd"
    q_elems = float(b * sl * hl * hd)
    if backward:  # dQ and dK / dV of each step added into the rank's gradients (read both, write one)
        merge = mem(f"{name}.accumulate", 3 * ACT_BYTES * (cp - 1) * (q_elems + kv_block / ACT_BYTES))
    else:  # each step's partial output rescaled by its softmax statistics and added into the result
        merge = mem(f"{name}.correct", 3 * ACT_BYTES * cp * q_elems)
    return [
        Comm(f"{name}.kv_{kind}", "all_gather", hops, "cp", "async"),
        Compute(f"{name}.{kind}", local + block * (cp - 2)),
        Join(),
        Compute(f"{name}.{kind}.last", (*block, merge)),
    ]


def _attn_core(c: LayerContext, backward: bool) -> tuple[Kernel, ...]:
    """Attention core (scores, softmax, weighted sum) of one rank: fused flash kernels or Megatron's unfused path."""
    if not c.flash_attention:
        return _attn_unfused(c, backward)
    md, t = c.model, c.tp
    return flash_attention_kernels(
        c.micro_batch, c.seq_local, md.heads // t, md.n_kv_heads // t, md.head_dim, md.causal, backward
    )


def _attn_unfused(c: LayerContext, backward: bool) -> tuple[Kernel, ...]:
    """Megatron-LM's non-flash attention core (``CoreAttention``, 2020-2022 releases).

    Forward: ``baddbmm`` Q K^T (batch b x heads/tp, s x s x head_dim), the fused scale-mask-softmax
    kernel (reads and writes the 2-byte s x s scores), attention dropout (reads the probabilities,
    writes them and a 1-byte mask) and ``bmm`` of the probabilities with V. The full s x s product
    is computed (no causal skipping), which is also what the paper's FLOP formula counts. Backward
    mirrors it: two GEMMs per product, dropout and softmax backward over the s x s tensors.
    """
    md, b, s, t = c.model, c.micro_batch, c.model.seq_len, c.tp
    hl, hd = md.heads // t, md.head_dim
    bh = b * hl
    sq = float(bh * s * s)  # elements of the score tensor
    drop = (2 * ACT_BYTES + 1) * sq  # read, write, 1-byte mask
    if not backward:
        fwd = [gemm("attn.qk", s, s, hd, bh), mem("attn.softmax", 2 * ACT_BYTES * sq)]
        if md.dropout:
            fwd.append(mem("attn.dropout", drop))
        return (*fwd, gemm("attn.pv", s, hd, s, bh))
    bwd = [gemm("attn.pv.dgrad", s, s, hd, bh), gemm("attn.pv.wgrad", s, hd, s, bh)]
    if md.dropout:
        bwd.append(mem("attn.dropout.bwd", drop))
    bwd.append(mem("attn.softmax.bwd", 3 * ACT_BYTES * sq))
    return (*bwd, gemm("attn.qk.dgrad", s, hd, s, bh), gemm("attn.qk.wgrad", s, hd, s, bh))


def _dims(c: LayerContext) -> tuple[int, int, int, int]:
    md, t = c.model, c.tp
    return c.tokens, md.hidden, (md.hidden + 2 * md.kv_dim) // t, md.ffn_hidden // t


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
    return cp_attention_steps(c, False) if c.cp > 1 else [Compute(name, _attn_core(c, False))]


def attention_forward(c: LayerContext) -> list[Step]:
    T, h, qkv_n, _ = _dims(c)
    if c.tp_comm_overlap and c.tp > 1:
        return [
            Compute("attn.ln", (mem("ln1", _norm_bytes(c)),)),
            *_overlapped(
                c, "attn", (gemm("qkv", T, qkv_n, h),), _core_steps(c, "attn.mid"), gemm("proj", T, h, h // c.tp)
            ),
            Compute("attn.bda", (mem("bda1", _bda_bytes(c)),)),
        ]
    if c.cp > 1:
        core: list[Step] = [
            Compute("attn", (gemm("qkv", T, qkv_n, h),)),
            *_core_steps(c, "attn"),
            Compute("attn.proj", (gemm("proj", T, h, h // c.tp),)),
        ]
    else:
        core = [Compute("attn", (gemm("qkv", T, qkv_n, h), *_attn_core(c, False), gemm("proj", T, h, h // c.tp)))]
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
        steps.append(Compute("attn.bwd", gemm_bwd("proj", T, h, h // c.tp)))
        if c.recompute == "selective":
            steps += cp_attention_steps(c, False, "recompute.attn.cp")
        steps += cp_attention_steps(c, True)
    else:
        kern = [*gemm_bwd("proj", T, h, h // c.tp)]
        if c.recompute == "selective":
            kern += _attn_core(c, False)
        kern += _attn_core(c, True)
        steps.append(Compute("attn.bwd", tuple(kern)))
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
    if _sp(c):
        steps.append(Comm("mlp.ag_grad", "all_gather", c.act_bytes, "tp"))
    steps.append(Compute("mlp.bwd", (*gemm_bwd("fc2", T, h, f), mem("act.bwd", 1.5 * _act_bytes(c, f, T)))))
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
        Compute("moe.unpermute", (mem("unpermute", perm), mem("bda2", _bda_bytes(c)))),
    ]


def moe_backward(c: LayerContext) -> list[Step]:
    md = c.model
    local, m_e, h, f = _experts(c)
    up = f * (2 if md.gated_mlp else 1)
    Te = c.tokens_elementwise
    perm = ACT_BYTES * 2.0 * Te * md.top_k * h
    return [
        Compute("moe.unpermute.bwd", (mem("bda2.bwd", _bda_bytes(c)), mem("unpermute.bwd", perm))),
        *_moe_exchange(c, "moe.combine.bwd", True),
        Compute(
            "moe.experts.bwd",
            (
                *gemm_bwd("fc2", m_e, h, f, local),
                mem("act.bwd", 1.5 * _act_bytes(c, f, m_e * local)),
                *gemm_bwd("fc1", m_e, up, h, local),
            ),
        ),
        *_moe_exchange(c, "moe.dispatch.bwd", False),
        Compute(
            "moe.route.bwd",
            (mem("permute.bwd", perm), *gemm_bwd("router", Te, md.experts, h), mem("ln2.bwd", 1.5 * _norm_bytes(c))),
        ),
    ]


def layer_forward(c: LayerContext, layer: int) -> list[Step]:
    """Forward program of transformer layer ``layer``."""
    mlp = moe_forward(c) if c.model.is_moe_layer(layer) else mlp_forward(c)
    return attention_forward(c) + mlp


def layer_backward(c: LayerContext, layer: int) -> list[Step]:
    """Backward program of layer ``layer`` (with its forward re-run first under full recomputation)."""
    mlp = moe_backward(c) if c.model.is_moe_layer(layer) else mlp_backward(c)
    pre = [_tag_recompute(s) for s in layer_forward(c, layer)] if c.recompute == "full" else []
    return pre + mlp + attention_backward(c)


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


def embedding_backward(c: LayerContext) -> list[Step]:
    T, h = c.tokens, c.model.hidden
    steps: list[Step] = []
    if _sp(c):
        steps.append(Comm("emb.ag_grad", "all_gather", c.act_bytes, "tp"))
    steps.append(Compute("emb.bwd", (mem("emb.grad", 3.0 * ACT_BYTES * T * h),)))
    return steps


def head_forward(c: LayerContext) -> list[Step]:
    """Final norm, vocab-parallel logits and cross-entropy (3 scalar all-reduces per token when tp > 1)."""
    T, h = c.tokens, c.model.hidden
    v = c.model.padded_vocab(c.tp) // c.tp
    logits = 4.0 * T * v  # fp32 logits
    steps: list[Step] = [Compute("head.ln", (mem("ln_f", _norm_bytes(c)),)), *_tp_enter(c, "head")]
    steps.append(Compute("head.logits", (gemm("logits", T, v, h), mem("ce.max", logits))))
    if c.tp > 1:
        steps += [
            Comm("ce.ar_max", "all_reduce", 4.0 * T, "tp"),
            Compute("ce.pred", (mem("ce.pred", 4.0 * T),)),
            Comm("ce.ar_pred", "all_reduce", 4.0 * T, "tp"),
            Compute("ce.exp", (mem("ce.exp", 2 * logits),)),
            Comm("ce.ar_sum", "all_reduce", 4.0 * T, "tp"),
        ]
    steps.append(Compute("ce.loss", (mem("ce.loss", 3 * 4.0 * T),)))
    return steps


def head_backward(c: LayerContext) -> list[Step]:
    T, h = c.tokens, c.model.hidden
    v = c.model.padded_vocab(c.tp) // c.tp
    steps: list[Step] = [Compute("ce.bwd", (mem("ce.grad", 2 * 4.0 * T * v),))]
    steps += _col_parallel_bwd(c, "logits", *gemm_bwd("logits", T, v, h))
    steps.append(Compute("head.ln.bwd", (mem("ln_f.bwd", 1.5 * _norm_bytes(c)),)))
    return steps
