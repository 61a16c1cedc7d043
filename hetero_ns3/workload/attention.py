"""Attention cores of one rank: fused (flash) kernels, Megatron's unfused path and the context-parallel schemes.

Used by :mod:`hetero_ns3.workload.layers`, which places the core between the QKV and projection GEMMs.
"""

from __future__ import annotations

from dataclasses import replace

from hetero_ns3.compute.attention_grid import window_fraction
from hetero_ns3.compute.roofline import Kernel, OpClass
from hetero_ns3.workload.steps import ACT_BYTES, Comm, Compute, Join, LayerContext, Step, gemm, mem

FLASH_BWD_PRE_BYTES = 2 * ACT_BYTES
"""Per element of O: the backward pre-pass reads O and dO (then writes one FP32 row sum per query row)."""
FLASH_BWD_DQ_BYTES = 4 + 4 + 2
"""Per element of dQ: the FP32 accumulator cleared (4 B), read back (4 B) and written as BF16 (2 B)."""


def flash_attention_kernels(
    b: int,
    s: int,
    hl: int,
    kl: int,
    hd: int,
    causal: bool,
    backward: bool,
    kv: int = 0,
    window: int = 0,
    hd_v: int = 0,
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

    ``window`` > 0 (causal self-attention only, ``window < s``): a sliding window of that many keys per query
    (FlashAttention's ``window_size``, cuDNN's sliding-window mask): the FLOPs count the ``s x window`` band
    (``4 b s window hl hd``) and ``work`` is the part of it inside the mask (:func:`window_fraction`); traffic
    is unchanged (Q, K, V and O are still read or written once).

    ``hd_v`` > 0: value and output heads of that size, query and key heads of ``hd`` (multi-latent attention:
    192 and 128); FLOPs ``2 b s kv hl (hd + hd_v)``, traffic Q, K of ``hd`` and V, O of ``hd_v``.
    """
    kv = kv or s
    if window >= kv or not causal or kv != s:
        window = 0
    hv = hd_v or hd
    flops = 2.0 * b * s * (window or kv) * hl * (hd + hv)
    qo = float(b * s * hl * (hd + hv))  # elements of Q and O
    kvb = float(b * kv * kl * (hd + hv))  # of K and V

    def core(name: str, op: OpClass, f: float, nbytes: float) -> Kernel:
        """The main kernel, with the grid the roofline's sequence, head-dimension and occupancy laws read."""
        if window:
            work = window_fraction(s, window)
            return Kernel(name, op, f, nbytes, m=s, k=hd, batch=b * hl, work=work, causal=True, window=window)
        return Kernel(name, op, f, nbytes, m=s, k=hd, batch=b * hl, work=0.5 if causal else 1.0, causal=causal)

    if not backward:
        return (core("attn.core", "attention_fwd", flops, ACT_BYTES * (qo + kvb)),)
    return (
        mem("attn.core.bwd.pre", FLASH_BWD_PRE_BYTES * float(b * s * hl * hv) + 4.0 * b * hl * s),
        core("attn.core.bwd", "attention_bwd", 2 * flops, ACT_BYTES * (2 * qo + 2 * kvb)),
        mem("attn.core.bwd.dq", FLASH_BWD_DQ_BYTES * float(b * s * hl * hd)),
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


def attention_core(c: LayerContext, backward: bool) -> tuple[Kernel, ...]:
    """Attention core (scores, softmax, weighted sum) of one rank: fused flash kernels or Megatron's unfused path.
    Packed documents (``model.document_len``) run as ``b x s / document_len`` sequences of ``document_len`` tokens:
    Transformer Engine's THD kernels launch one grid over all of them, and the roofline's sequence-length law then
    prices the short rows (docs/workload.md "Packed sequences")."""
    if not c.flash_attention:
        return unfused_attention(c, backward)
    md, t = c.model, c.tp
    b, s = c.micro_batch, c.seq_local
    if md.document_len:  # packed documents (THD): each attends within itself, as that many sequences of its length
        b, s = b * (s // md.document_len), md.document_len
    if md.mla:  # multi-latent attention: query / key heads of qk_head_dim, value heads of v_dim
        hl = md.heads // t
        return flash_attention_kernels(
            b, s, hl, hl, md.qk_head_dim, md.causal, backward, window=c.window, hd_v=md.v_dim
        )
    return flash_attention_kernels(
        b, s, md.heads // t, md.n_kv_heads // t, md.head_dim, md.causal, backward, window=c.window
    )


def unfused_attention(c: LayerContext, backward: bool) -> tuple[Kernel, ...]:
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
