"""Expert-parallel overlap (Megatron-Core ``overlap_moe_expert_parallel_comm``): the forward of one micro-batch and
the backward of another run layer by layer together, each one's token exchange hidden behind the other's compute.

Megatron-Core (``combined_1f1b.py``, ``TransformerLayerSchedulePlan.run`` in ``model_chunk_schedule_plan.py``,
``fine_grained_callables.py``) cuts an MoE layer into four nodes: the attention and router (*pre-dispatch*, compute
stream), the token *dispatch* and the *combine* (communication stream, with the small kernels around the exchange:
HybridEP's preprocessing, the unpermutation and residual add) and the experts (*mlp*, compute stream). A forward
layer ``f`` and a backward layer ``b`` are issued as

    comm stream:    combine(b)       | dispatch(f) -> dispatch(b)   | combine(f)
    compute stream: pre-dispatch(f)  | mlp(b)                       | mlp(f) -> pre-dispatch(b)

each node waiting for its own input only, so a layer pair costs about the sum over the four columns of the larger
of the two streams instead of the sum of all eight. The dispatcher's host synchronisation (the dropless routing
step) happens inside ``dispatch(f)``, after the host has issued ``mlp(b)``: the host waits while the GPU runs the
other micro-batch's experts. The shared expert runs in the pre-dispatch node (forward) and so in its backward.

This module splits a layer's step program (:mod:`hetero_ns3.workload.moe`) into those nodes; the compiler
(:meth:`hetero_ns3.workload.iteration.IterationCompiler.combined_step`) emits them. Dense layers have no exchange
and run whole (:func:`split_forward` returns ``None``).
"""

from __future__ import annotations

from typing import NamedTuple

from hetero_ns3.compute.roofline import Kernel
from hetero_ns3.workload.steps import Compute, Step


class ForwardNodes(NamedTuple):
    """An MoE layer's forward as overlap runs it."""

    pre: list[Step]
    """Attention, norm, router, permutation and the shared expert (compute stream)."""
    dispatch: list[Step]
    """HybridEP's routing-map gather and layout kernel, the all-to-all, the TP all-gather (comm stream)."""
    mlp: list[Step]
    """The routed experts (compute stream)."""
    combine: list[Step]
    """TP reduce-scatter, all-to-all, unpermutation and residual add (comm stream)."""


class BackwardNodes(NamedTuple):
    """An MoE layer's backward as overlap runs it (the forward's nodes in reverse)."""

    combine: list[Step]
    """The residual add's and unpermutation's backward, the combine's all-to-all backward (comm stream)."""
    mlp: list[Step]
    """The routed experts' backward (compute stream)."""
    dispatch: list[Step]
    """The dispatch's backward exchange (comm stream)."""
    pre: list[Step]
    """The shared expert's, router's and attention's backward (compute stream)."""


def _name(st: Step) -> str:
    return getattr(st, "name", "")


def _shared_flags(steps: list[Step]) -> list[bool]:
    """Per step, whether it belongs to the shared expert (a join goes with the step before it)."""
    out: list[bool] = []
    for st in steps:
        name = _name(st)
        out.append(name.startswith("moe.shared") if name else bool(out and out[-1]))
    return out


def _split_shared(steps: list[Step]) -> tuple[list[Step], list[Step]]:
    """(the shared expert's steps, the others), each in program order."""
    flags = _shared_flags(steps)
    return [st for st, f in zip(steps, flags, strict=True) if f], [
        st for st, f in zip(steps, flags, strict=True) if not f
    ]


def split_forward(steps: list[Step]) -> ForwardNodes | None:
    """The nodes of a forward layer program; ``None`` for a dense layer (no routed experts)."""
    names = [_name(st) for st in steps]
    if "moe.experts" not in names:
        return None
    e = names.index("moe.experts")
    d = next(i for i, n in enumerate(names) if n.startswith("moe.dispatch"))
    c = next(i for i in range(e + 1, len(steps)) if names[i].startswith("moe.combine"))
    shared, rest = _split_shared(steps[c:])
    return ForwardNodes(steps[:d] + shared, steps[d:e], [steps[e]], rest)


def split_backward(steps: list[Step]) -> BackwardNodes | None:
    """The nodes of a backward layer program; ``None`` for a dense layer."""
    names = [_name(st) for st in steps]
    if "moe.experts.bwd" not in names:
        return None
    e = names.index("moe.experts.bwd")
    c = next(i for i, n in enumerate(names) if n.startswith("moe.combine.bwd"))
    r = next((i for i in range(e + 1, len(steps)) if not names[i].startswith("moe.dispatch.bwd")), len(steps))
    shared, rest = _split_shared(steps[:c])
    return BackwardNodes(rest + steps[c:e], [steps[e]], steps[e + 1 : r], shared + steps[r:])


def split_wgrad(steps: list[Step]) -> tuple[list[Step], list[Step]]:
    """``steps`` without their weight-gradient GEMMs, and those GEMMs as one step after them (Megatron-Core's
    ``delay_wgrad_compute``: the experts' ``backward_dw`` issued after the forward's dispatch)."""
    rest: list[Step] = []
    wgrad: list[Kernel] = []
    for st in steps:
        if isinstance(st, Compute):
            late = [k.op == "gemm" and k.name.endswith(".wgrad") for k in st.kernels]
            early = tuple(k for k, w in zip(st.kernels, late, strict=True) if not w)
            wgrad += [k for k, w in zip(st.kernels, late, strict=True) if w]
            if early:
                rest.append(Compute(st.name, early))
            continue
        rest.append(st)
    return rest, ([Compute(f"{_name(steps[0])}.dw", tuple(wgrad))] if wgrad else [])
