"""Per-rank step programs of a Mamba-2 layer (hybrid models: Nemotron-H, Nemotron 3; ``ModelSpec.hybrid_pattern``).

What Megatron-Core runs for an ``M`` layer in training (``megatron/core/ssm/mamba_mixer.py``, ``MambaMixer`` with the
memory-efficient path, the default; Megatron-LM 2a75ac12) and mamba_ssm's kernels it calls
(``mamba_ssm/ops/triton/ssd_combined.py``, ``MambaSplitConv1dScanCombinedFn``; state-spaces/mamba e9594ce):

1. the pre-norm fused into the input projection (Transformer Engine's ``LayerNormColumnParallelLinear``), h ->
   ``2 d_inner + 2 G N + H`` (z, x, B, C, dt), a linear GEMM (FP8 / FP4 under Transformer Engine's recipes);
2. a transposed copy of that output from Megatron's ``[s, b, d]`` to ``[b, s, d]`` (``.contiguous()``: a copy when
   the micro-batch holds more than one sequence);
3. one autograd function: the causal depthwise convolution of x, B and C with its SiLU (the causal-conv1d CUDA kernel),
   then the SSD scan as five Triton kernels (:data:`SSD_FORWARD`), the ``D`` skip and the ``y silu(z)`` gate inside the
   last; the backward recomputes the convolution and the scan's states and runs the kernels of :data:`SSD_BACKWARD`;
4. the output transposed back (a copy, as 2.), the grouped RMS norm (a Triton kernel; ``RMSNormGated`` without z),
   and the output projection d_inner -> h (``RowParallelLinear``), then the residual add.

Tensor parallelism splits the heads, the groups and both projections (column- and row-parallel, with the sequence-
parallel gather / scatter around them as for attention). Shapes per rank and per token below: ``Di`` = d_inner / tp,
``G`` groups / tp, ``H`` heads / tp, ``N`` the state size, ``Q`` the chunk length, ``S = Di N / Q`` the chunk states
per token. The SSD kernels' bytes count each tensor a kernel reads or writes once (BF16 activations, FP32 where the
source allocates FP32: the chunk states before the passing, C B^T, dt and its cumulative sum); the states are BF16
after the passing (Megatron passes ``state_dtype`` = the parameters' dtype). Their FLOPs are the products they
execute (the intra-chunk product over its causal half, :data:`SSD_CAUSAL_HALF`), at the roofline's ``ssd`` rate: a
fraction of the BF16 tensor peak fitted to a published SSD kernel benchmark (:mod:`hetero_ns3.compute.ssd_fit`).
Each kernel takes the longer of its FLOPs at that rate and its bytes at the memory rate (docs/workload.md "Hybrid
models").
"""

from __future__ import annotations

from collections.abc import Callable
from typing import NamedTuple

from hetero_ns3.compute.roofline import Kernel
from hetero_ns3.workload.models import ModelSpec
from hetero_ns3.workload.steps import (
    ACT_BYTES,
    Comm,
    Compute,
    LayerContext,
    Step,
    bda_bytes,
    col_parallel_bwd,
    gemm,
    gemm_bwd,
    mem,
    norm_bytes,
    sp_on,
    tp_enter,
    tp_exit,
)

SSD_CAUSAL_HALF = 0.5
"""The intra-chunk product's FLOPs are counted over the causal half of the chunk's Q x Q square (as TileLang's SSD
benchmark counts them, the data the ``ssd`` efficiency is fitted on: :mod:`hetero_ns3.compute.ssd_fit`); the
diagonal blocks the kernels run whole are in the fitted rate."""


class MambaShapes(NamedTuple):
    """Per-rank, per-token sizes of one Mamba-2 mixer (elements)."""

    di: int
    """d_inner / tp: x, z and the output."""
    gn: int
    """groups x state / tp: B (and C)."""
    heads: int
    """Heads on this rank (dt, A, D)."""
    state: int
    """State size N."""
    chunk: int
    """Chunk length Q."""
    conv: int
    """Convolution channels (x, B, C) / tp."""
    proj: int
    """Input projection width (z, x, B, C, dt) / tp."""

    @property
    def groups(self) -> int:
        return self.gn // self.state

    @property
    def states(self) -> float:
        """Chunk-state elements per token, Di N / Q."""
        return self.di * self.state / self.chunk


def mamba_shapes(c: LayerContext) -> MambaShapes:
    md, tp = c.model, c.tp
    gn = md.mamba_groups * md.mamba_state // tp
    return MambaShapes(
        md.mamba_inner // tp,
        gn,
        md.mamba_heads // tp,
        md.mamba_state,
        md.mamba_chunk,
        md.mamba_conv_dim // tp,
        md.mamba_in_dim // tp,
    )


class SsdKernel(NamedTuple):
    """One SSD kernel per token on one rank: its name, FLOPs and bytes."""

    name: str
    flops: Callable[[MambaShapes], float]
    bytes: Callable[[MambaShapes], float]


def _intra(s: MambaShapes) -> float:
    """FLOPs per token of an intra-chunk product over the heads (its causal half, :data:`SSD_CAUSAL_HALF`)."""
    return SSD_CAUSAL_HALF * 2.0 * s.chunk * s.di


def _state(s: MambaShapes) -> float:
    """FLOPs per token of a state product over the heads (B^T x, C h and their gradients): 2 Di N."""
    return 2.0 * s.di * s.state


def _none(s: MambaShapes) -> float:
    return 0.0


SSD_FORWARD: tuple[SsdKernel, ...] = (
    # dt: read BF16, write softplus(dt + bias) and its cumulative dA per chunk, FP32
    SsdKernel("ssd.cumsum", _none, lambda s: 10.0 * s.heads),
    # chunk states B^T x: read B, x, dt, dA; write the states FP32
    SsdKernel("ssd.chunk_state", _state, lambda s: 2.0 * s.gn + 2.0 * s.di + 8.0 * s.heads + 4.0 * s.states),
    # states passed across chunks: read FP32, write BF16
    SsdKernel("ssd.state_passing", _none, lambda s: 6.0 * s.states),
    # C B^T per chunk and group: read C, B; write FP32
    SsdKernel("ssd.bmm", lambda s: 2.0 * s.chunk * s.gn, lambda s: 4.0 * s.gn + 4.0 * s.groups * s.chunk),
    # y = (C B^T o decay) x + C h + D x, gated by silu(z): read C B^T, x, z, C, dt, dA, states; write y and y before
    # the gate
    SsdKernel(
        "ssd.chunk_scan",
        lambda s: _intra(s) + _state(s),
        lambda s: 4.0 * s.groups * s.chunk + 4.0 * s.di + 2.0 * s.gn + 8.0 * s.heads + 2.0 * s.states + 4.0 * s.di,
    ),
)
"""The forward SSD kernels of ``_mamba_chunk_scan_combined_fwd``, per token on one rank."""

SSD_BACKWARD: tuple[SsdKernel, ...] = (
    # recomputed: dt's sums, C B^T, the chunk states and their passing (FP32 out: no state dtype given there)
    SSD_FORWARD[0],
    SSD_FORWARD[3],
    SSD_FORWARD[1],
    SsdKernel("ssd.state_passing", _none, lambda s: 8.0 * s.states),
    # the gate's gradient: read x, z, y, dy; write dz and the gradient of y before the gate
    SsdKernel("ssd.bwd_dz", _none, lambda s: 12.0 * s.di),
    # the states' gradient C^T dy: read C, dA, dy; write FP32
    SsdKernel("ssd.bwd_dstates", _state, lambda s: 2.0 * s.gn + 4.0 * s.heads + 2.0 * s.di + 4.0 * s.states),
    # passed back across chunks: read the states and their gradients (FP32), write both BF16
    SsdKernel("ssd.state_passing_bwd", _none, lambda s: 12.0 * s.states),
    # dx from the intra-chunk product and the states: read x, dt, dA, B, C B^T, dy, dstates; write dx, ddt
    SsdKernel(
        "ssd.bwd_dx",
        lambda s: _intra(s) + _state(s),
        lambda s: 6.0 * s.di + 12.0 * s.heads + 2.0 * s.gn + 4.0 * s.groups * s.chunk + 2.0 * s.states,
    ),
    # dB from x and dstates: read x, dt, dA, dstates, B; write dB
    SsdKernel("ssd.bwd_db", _state, lambda s: 2.0 * s.di + 8.0 * s.heads + 2.0 * s.states + 4.0 * s.gn),
    # dC from dy and the states: read the states, dA, dy, C; write dC
    SsdKernel("ssd.bwd_dc", _state, lambda s: 2.0 * s.states + 4.0 * s.heads + 2.0 * s.di + 4.0 * s.gn),
    # d(C B^T) from dy and x: read x, dt, dA, dy; write FP32
    SsdKernel("ssd.bwd_dcb", _intra, lambda s: 4.0 * s.di + 8.0 * s.heads + 4.0 * s.groups * s.chunk),
    # d(C B^T) into dB and dC: two products, each reading B or C, the gradient and the partial dB / dC, writing it
    SsdKernel(
        "ssd.bmm_bwd",
        lambda s: 4.0 * s.chunk * s.gn,
        lambda s: 2.0 * (6.0 * s.gn + 4.0 * s.groups * s.chunk),
    ),
    # dA's cumulative sum: read x, dy, C B^T, dt, dA; write FP32
    SsdKernel("ssd.bwd_ddacs", _intra, lambda s: 4.0 * s.di + 4.0 * s.groups * s.chunk + 12.0 * s.heads),
    # dt, dt's bias and A from dA (and PyTorch's reversed cumulative sum of the chunk ends)
    SsdKernel("ssd.cumsum_bwd", _none, lambda s: 20.0 * s.heads),
)
"""The backward SSD kernels of ``_mamba_chunk_scan_combined_bwd`` (with z), per token on one rank."""


def _ssd_kernels(c: LayerContext, table: tuple[SsdKernel, ...]) -> tuple[Kernel, ...]:
    """The kernels of ``table`` over this rank's micro-batch: those with products as ``ssd`` kernels (BF16, the
    roofline's ``ssd`` rate against their bytes), the others as memory-bound ones."""
    s, t = mamba_shapes(c), c.tokens
    return tuple(Kernel(k.name, "ssd" if k.flops(s) else "memory", t * k.flops(s), t * k.bytes(s)) for k in table)


def _transpose(c: LayerContext, name: str, width: int) -> tuple[Kernel, ...]:
    """A ``[s, b, d] <-> [b, s, d]`` contiguous copy of ``width`` elements per token (none when b = 1: the layouts
    coincide)."""
    return (mem(name, 2.0 * ACT_BYTES * c.tokens * width),) if c.micro_batch > 1 else ()


def conv_bytes(c: LayerContext, backward: bool = False) -> float:
    """The causal convolution with SiLU over x, B and C: forward read and write each channel once; the backward
    recomputes the forward and reads its input and the gradient, writing the input's gradient (the weights' gradient
    a reduction beside it)."""
    per = 2.0 if not backward else 2.0 + 3.0
    return per * ACT_BYTES * c.tokens * mamba_shapes(c).conv


def mamba_forward(c: LayerContext) -> list[Step]:
    """Forward program of a Mamba-2 layer (the module docstring's steps)."""
    T, h = c.tokens, c.model.hidden
    s = mamba_shapes(c)
    mixer = (
        *_transpose(c, "mamba.transpose_in", s.proj),
        mem("conv1d", conv_bytes(c)),
        *_ssd_kernels(c, SSD_FORWARD),
        *_transpose(c, "mamba.transpose_out", s.di),
        mem("mamba.norm", 2.0 * ACT_BYTES * T * s.di),
    )
    return [
        Compute("mamba.ln", (mem("ln1", norm_bytes(c)),)),
        *tp_enter(c, "mamba"),
        Compute("mamba", (gemm("in_proj", T, s.proj, h), *mixer, gemm("out_proj", T, h, s.di))),
        *tp_exit(c, "mamba"),
        Compute("mamba.bda", (mem("bda1", bda_bytes(c)),)),
    ]


def mamba_backward(c: LayerContext) -> list[Step]:
    """Backward program of a Mamba-2 layer: the output projection, the norm, the scan and the convolution (each
    recomputing what the memory-efficient path did not keep), then the input projection and the pre-norm."""
    T, h = c.tokens, c.model.hidden
    s = mamba_shapes(c)
    steps: list[Step] = [Compute("mamba.bda.bwd", (mem("bda1.bwd", bda_bytes(c)),))]
    if sp_on(c):
        steps.append(Comm("mamba.ag_grad", "all_gather", c.act_bytes, "tp"))
    kernels = (
        *gemm_bwd("out_proj", T, h, s.di),
        mem("mamba.norm.bwd", 3.0 * ACT_BYTES * T * s.di),
        *_transpose(c, "mamba.transpose_out.bwd", s.di),
        *_ssd_kernels(c, SSD_BACKWARD),
        mem("conv1d.bwd", conv_bytes(c, True)),
        *_transpose(c, "mamba.transpose_in.bwd", s.proj),
    )
    steps.append(Compute("mamba.bwd", kernels))
    if c.recomputes("layernorm"):
        steps.append(Compute("recompute.mamba.ln", (mem("ln1", norm_bytes(c)),)))
    steps += col_parallel_bwd(c, "in_proj", *gemm_bwd("in_proj", T, s.proj, h))
    steps.append(Compute("mamba.ln.bwd", (mem("ln1.bwd", 1.5 * norm_bytes(c)),)))
    return steps


def mamba_saved_bytes(md: ModelSpec, lin_bytes: float) -> tuple[float, float]:
    """Bytes per token a Mamba-2 layer keeps for its backward: (over the sequence-parallel tokens) the layer's input
    for the fused norm and the norm's output the input projection saves (``lin_bytes``: its quantized copy under FP8);
    (over this rank's heads, before dividing by tp) the projection's output the scan saves (z, x, B, C, dt), the
    scan's output before the gate, the norm's input, and the output projection's input at ``lin_bytes``."""
    non_par = (2.0 + lin_bytes) * md.hidden
    per_tp = 2.0 * md.mamba_in_dim + (2.0 + 2.0 + lin_bytes) * md.mamba_inner
    return non_par, per_tp
