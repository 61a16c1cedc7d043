"""Per-rank step programs of an MoE layer: router, token dispatch and combine (expert-parallel all-to-alls, the
tensor-parallel gather / scatter around them), the routed experts' grouped GEMMs and the shared expert.

Used by :mod:`hetero_ns3.workload.layers` for the layers ``ModelSpec.is_moe_layer`` marks; the shapes and
building blocks are those of :mod:`hetero_ns3.workload.steps`.
"""

from __future__ import annotations

from typing import NamedTuple

from hetero_ns3.compute.roofline import Kernel
from hetero_ns3.workload.steps import (
    ACT_BYTES,
    Comm,
    Compute,
    LayerContext,
    Step,
    act_bytes,
    bda_bytes,
    col_parallel_bwd,
    expert_bias_bytes,
    gemm,
    gemm_bwd,
    glu_clamp_bytes,
    mem,
    norm_bytes,
    recomputed,
    sort_by_expert_bytes,
    sp_on,
    tp_enter,
    tp_exit,
)


def moe_dispatch_bytes(c: LayerContext) -> float:
    """All-to-all send bytes of one rank: its (sequence-sharded) tokens, top_k copies, 2 bytes each."""
    return float(ACT_BYTES * c.tokens_elementwise * c.model.top_k * c.model.hidden)


def _routing_gather(c: LayerContext) -> list[Step]:
    """HybridEP's metadata preprocessing before a forward dispatch (``LayerContext.ep_routing_gather``).

    Each rank's routing map (a boolean per token and expert, ``tokens_elementwise x experts`` bytes) is gathered
    from the whole expert-parallel group (an NCCL all-gather once the group spans nodes; its size, as NCCL counts
    it, is the gathered map), then one kernel reads the gathered map and writes the exchange's layout: the
    token-to-slot map (4 bytes per token of the group), the per-node flags and the local experts' routing map
    (DeepEP's hybrid-ep ``Executor::allgather_routing_map`` / ``metadata_preprocess_core``). The combine and the
    backward reuse the layout (the dispatcher's handle), so only forward dispatches, and their recomputation,
    pay it."""
    if not c.ep_routing_gather:
        return []
    Te, experts = c.tokens_elementwise, c.model.experts
    gathered = float(c.ep * Te * experts)
    layout = 4.0 * c.ep * Te + Te * experts
    return [
        Comm("moe.dispatch.map", "all_gather", gathered, "ep"),
        Compute("moe.dispatch.prep", (mem("route_map", gathered + layout),)),
    ]


def _moe_exchange(c: LayerContext, name: str, forward_in: bool) -> list[Step]:
    """The expert-parallel all-to-all and, with expert tensor parallelism (``etp = tp > 1``), the TP gather of the
    received tokens before the experts (reduce-scatter after); under parallel folding (``etp = 1``) each rank's
    own tokens go to the experts whole, with no TP collective."""
    a2a: list[Step] = [Comm(f"{name}.a2a", "all_to_all", moe_dispatch_bytes(c), "ep")] if c.ep > 1 else []
    if c.expert_tp == 1:
        return a2a
    gathered = moe_dispatch_bytes(c) * c.tp
    tp: list[Step] = [
        Comm(f"{name}.{'ag' if forward_in else 'rs'}", "all_gather" if forward_in else "reduce_scatter", gathered, "tp")
    ]
    return a2a + tp if forward_in else tp + a2a


class _Shapes(NamedTuple):
    """Per-rank shapes of the routed experts of one MoE layer and micro-batch."""

    local: int
    """Experts on this rank (``experts / ep``)."""
    m_e: int
    """Tokens per local expert (after dispatch and the expert-TP gather)."""
    h: int
    f: int
    """FFN width per expert-TP rank (``ModelSpec.expert_ffn / etp``)."""
    up: int
    """fc1's output width (``2 f`` with a gated MLP)."""
    tokens: int
    """Tokens of the element-wise kernels (``LayerContext.tokens_elementwise``)."""
    perm: float
    """Bytes a (un)permutation of the routed token copies moves: read and write, ``top_k`` copies of each token."""


def _shapes(c: LayerContext) -> _Shapes:
    md = c.model
    local = md.experts // c.ep
    tokens_local = c.tokens_elementwise * md.top_k * c.expert_tp  # after dispatch and the expert-TP gather
    f = md.expert_ffn // c.expert_tp
    Te = c.tokens_elementwise
    return _Shapes(
        local,
        max(1, tokens_local // local),
        md.hidden,
        f,
        f * (2 if md.gated_mlp else 1),
        Te,
        ACT_BYTES * 2.0 * Te * md.top_k * md.hidden,
    )


class _Epilogue(NamedTuple):
    """The routed experts' element-wise kernels around their grouped GEMMs that Megatron-Core runs unfused: the
    all-to-all dispatcher's sort by local expert, the clamped activation's clamps, the FC2 bias (each () where
    the model or dispatcher has none). Forward and backward kernels."""

    sort: tuple[Kernel, ...]
    unsort: tuple[Kernel, ...]
    clamp: tuple[Kernel, ...]
    bias: tuple[Kernel, ...]
    sort_bwd: tuple[Kernel, ...]
    unsort_bwd: tuple[Kernel, ...]
    clamp_bwd: tuple[Kernel, ...]
    bias_bwd: tuple[Kernel, ...]


def _epilogue(c: LayerContext, copies: int, f: int) -> _Epilogue:
    """:class:`_Epilogue` of one micro-batch over ``copies`` routed token copies on this rank, inner size ``f``."""
    sort = sort_by_expert_bytes(c, copies)
    clamp = glu_clamp_bytes(copies, f) if c.model.glu_clamp else (0.0, 0.0)
    bias = expert_bias_bytes(c, copies) if c.model.bias else (0.0, 0.0)

    def k(name: str, nbytes: float) -> tuple[Kernel, ...]:
        return (mem(name, nbytes),) if nbytes else ()

    return _Epilogue(
        k("sort", sort),
        k("unsort", sort),
        k("act.clamp", clamp[0]),
        k("fc2.bias", bias[0]),
        k("sort.bwd", sort),
        k("unsort.bwd", sort),
        k("act.clamp.bwd", clamp[1]),
        k("fc2.bias.bwd", bias[1]),
    )


def moe_forward(c: LayerContext) -> list[Step]:
    md = c.model
    local, m_e, h, f, up, Te, perm = _shapes(c)
    shared, bda = _shared_expert(c, False), bda_bytes(c)
    ep = _epilogue(c, m_e * local, f)
    return [
        Compute("moe.route", (mem("ln2", norm_bytes(c)), gemm("router", Te, md.experts, h), mem("permute", perm))),
        *_routing_gather(c),
        *_moe_exchange(c, "moe.dispatch", True),
        Compute(
            "moe.experts",
            (
                *ep.sort,
                gemm("fc1", m_e, up, h, local),
                *ep.clamp,
                mem("act", act_bytes(c, f, m_e * local)),
                gemm("fc2", m_e, h, f, local),
                *ep.bias,
                *ep.unsort,
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
        kernels = (gemm("fc1", T, up, h), mem("act", act_bytes(c, sf, T)), gemm("fc2", T, h, sf))
        return [*tp_enter(c, "moe.shared"), Compute("moe.shared", kernels), *tp_exit(c, "moe.shared")]
    steps: list[Step] = [Comm("moe.shared.ag_grad", "all_gather", c.act_bytes, "tp")] if sp_on(c) else []
    steps.append(Compute("moe.shared.bwd", (*gemm_bwd("fc2", T, h, sf), mem("act.bwd", 1.5 * act_bytes(c, sf, T)))))
    return steps + col_parallel_bwd(c, "moe.shared.fc1", *gemm_bwd("fc1", T, up, h))


def moe_backward(c: LayerContext) -> list[Step]:
    md = c.model
    local, m_e, h, f, up, Te, perm = _shapes(c)
    whole = c.recomputes("moe")
    ep = _epilogue(c, m_e * local, f)
    act = (*ep.clamp, mem("act", act_bytes(c, f, m_e * local))) if c.recomputes("moe_act") and not whole else ()
    norm = (mem("ln2", norm_bytes(c)),) if c.recomputes("layernorm") and not whole else ()
    # the recomputed norm output is first needed by the shared expert's weight gradient where there is one
    shared_norm, route_norm = (norm, ()) if md.shared_ffn else ((), norm)
    head: list[Step] = [Compute("moe.unpermute.bwd", (mem("bda2.bwd", bda_bytes(c)), mem("unpermute.bwd", perm)))]
    if whole or md.shared_ffn:
        # the residual add's backward, then the checkpointed MoE layer's forward again (``moe``), the shared
        # expert's backward, and the routed path's
        head = [
            Compute("moe.bda.bwd", (mem("bda2.bwd", bda_bytes(c)), *shared_norm)),
            *(recomputed(moe_forward(c), ("ln2", "bda2")) if whole else []),
            *_shared_expert(c, True),
            Compute("moe.unpermute.bwd", (mem("unpermute.bwd", perm),)),
        ]
    return [
        *head,
        *_moe_exchange(c, "moe.combine.bwd", True),
        Compute(
            "moe.experts.bwd",
            (
                *ep.unsort_bwd,
                *ep.bias_bwd,
                *act,
                *gemm_bwd("fc2", m_e, h, f, local),
                mem("act.bwd", 1.5 * act_bytes(c, f, m_e * local)),
                *ep.clamp_bwd,
                *gemm_bwd("fc1", m_e, up, h, local),
                *ep.sort_bwd,
            ),
        ),
        *_moe_exchange(c, "moe.dispatch.bwd", False),
        Compute(
            "moe.route.bwd",
            (
                *route_norm,
                mem("permute.bwd", perm),
                *gemm_bwd("router", Te, md.experts, h),
                mem("ln2.bwd", 1.5 * norm_bytes(c)),
            ),
        ),
    ]
