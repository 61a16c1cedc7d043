"""Expert-parallel overlap (Megatron-Core ``overlap_moe_expert_parallel_comm``): the forward of one micro-batch and
the backward of another run layer by layer together, each one's token exchange hidden behind the other's compute.

Megatron-Core (``combined_1f1b.py``, ``TransformerLayerSchedulePlan.run`` in ``model_chunk_schedule_plan.py``,
``fine_grained_callables.py``) cuts an MoE layer into four nodes: the attention and router (*pre-dispatch*, compute
stream), the token *dispatch* and the *combine* (communication stream, with the small kernels around the exchange:
HybridEP's preprocessing, the unpermutation and residual add) and the experts (*mlp*, compute stream). A forward
layer ``f`` and a backward layer ``b`` are issued as

    comm stream:    combine(b)       | dispatch(f) -> dispatch(b)   | combine(f)
    compute stream: pre-dispatch(f)  | mlp(b)                       | mlp(f) -> pre-dispatch(b)

each node waiting for its own input and for the node before it on its stream, so a layer pair costs about the sum
over the four columns of the larger of the two streams instead of the sum of all eight. One rule narrows that: with
``parallelism.ep_overlap_dispatch = "after_experts"`` (the default) the forward's dispatch, and the host's
synchronisation inside it, also wait for ``mlp(b)``, the expert backward issued just before it (the other exchanges
already wait for the compute node issued before them, the backward's dispatch after delayed weight gradients
aside). It is empirical: stated from two published A/Bs of the overlap (Qwen3-30B-A3B on 16 H100) and then checked
on a third (GPT-OSS 120B on 64 GB200); the mechanism is not settled (docs/workload.md "Expert-parallel overlap").
``"eager"`` drops it: the ideal overlap of the issue order. The dispatcher's host synchronisation (the dropless
routing step) happens inside ``dispatch(f)``, after the host has issued ``mlp(b)``: under ``eager`` the host waits
while the GPU runs the other micro-batch's experts. The shared expert runs in the pre-dispatch node (forward) and so
in its backward.

This module splits a layer's step program (:mod:`hetero_ns3.workload.moe`) into those nodes and emits a combined
step (:func:`combined_step`, called by :class:`hetero_ns3.workload.iteration.IterationCompiler` for the pairs of
:func:`~hetero_ns3.workload.schedule.combined_schedule`). Dense layers have no exchange and run whole
(:func:`split_forward` returns ``None``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, NamedTuple

from hetero_ns3.compute.roofline import Kernel
from hetero_ns3.workload.steps import Compute, Step

if TYPE_CHECKING:
    from hetero_ns3.workload.compiler import _ProgramBuilder
    from hetero_ns3.workload.iteration import IterationCompiler
    from hetero_ns3.workload.schedule import Step as PipelineStep


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


def _op(oid: int | None) -> list[int]:
    """``[oid]``, or nothing before a program's first op."""
    return [] if oid is None else [oid]


def combined_step(ic: IterationCompiler, w: _ProgramBuilder, f: PipelineStep, b: PipelineStep, final: bool) -> None:
    """Forward ``f`` and backward ``b`` (of another micro-batch) together under expert-parallel overlap
    (``parallelism.overlap_moe_expert_parallel_comm``) on worker ``w`` of compiler ``ic``, in Megatron-Core's
    order (``TransformerModelChunkSchedulePlan.run``): receives, ``f``'s embedding, ``b``'s head, then forward
    layer i with backward layer n - 1 - i (MoE pairs split into nodes on two streams, dense pairs one after the
    other), the unpaired backward then forward layers, the sends, ``f``'s head and ``b``'s embedding. On ``b``'s
    last backward of its chunk (``final``) each bucket's reduction follows its last layer, as in
    :meth:`~hetero_ns3.workload.iteration.IterationCompiler.backward_step`."""
    pp, n_v, progs, plan, host = ic.pp, ic.n_v, ic.progs, ic.plan, ic.spec.host
    vf, vb = f.chunk * pp + w.stage, b.chunk * pp + w.stage
    fmb, fch, bmb, bch = f.microbatch, f.chunk, b.microbatch, b.chunk
    ftag, btag = f"F{fmb}.c{fch}", f"B{bmb}.c{bch}"
    f_layers = list(range(ic.firsts[vf], ic.firsts[vf] + ic.spec.stage_layers[vf]))
    b_layers = list(reversed(range(ic.firsts[vb], ic.firsts[vb] + ic.spec.stage_layers[vb])))
    ready = {bk.last_unit: bk for bk in ic.buckets[vb]} if final and plan.overlap_grad_reduce else {}

    def f_unit(unit: str) -> None:
        ic.param_gate(w, fch, unit)
        ic.run_unit(w, unit, ftag, "F", fmb, fch)

    def b_unit(unit: str) -> None:
        ic.run_unit(w, unit, btag, "B", bmb, bch)
        ic.backward_unit_done(w, unit, bch, ready, final)

    if vf > 0:
        ic.pipeline_p2p(w, (vf - 1) % pp, False, "F", fmb, fch, vf - 1)
    if vf == 0:
        f_unit("emb")
    b_in: list[int] = []  # what the backward's next exchange waits for besides the compute chain
    if vb < n_v - 1:
        b_in.append(ic.pipeline_p2p(w, (vb + 1) % pp, False, "B", bmb, bch, vb + 1))
    if vb == n_v - 1:
        b_unit("head")
    lane: list[int] = []  # the last op on the expert-parallel communication stream
    f_in: list[int] = []  # what the forward's next layer waits for besides the compute chain
    for i in range(min(len(f_layers), len(b_layers))):
        lf, lb = f_layers[i], b_layers[i]
        fn = split_forward(progs.program("layer_f", lf))
        bn = split_backward(progs.program("layer_b", lb))
        if fn is None or bn is None:  # a dense layer: the two run one after the other
            w.flush()
            w.pending_join += f_in
            f_unit(f"L{lf}")
            w.flush()
            w.pending_join += b_in
            b_unit(f"L{lb}")
            f_in, b_in = [], []
            continue
        ft, bt = f"{ftag}.L{lf}", f"{btag}.L{lb}"
        cb = ic.run_side(w, bn.combine, bt, "B", bmb, bch, lane + b_in + _op(w.flush()))
        ic.param_gate(w, fch, f"L{lf}")
        w.pending_join += f_in
        ic.run_steps(w, fn.pre, ft, "F", fmb, fch, sync=False)
        pre_f = _op(w.flush())
        w.pending_join += cb
        mlp_steps, dw_steps = split_wgrad(bn.mlp) if plan.delay_wgrad_compute else (bn.mlp, [])
        ic.run_steps(w, mlp_steps, bt, "B", bmb, bch)
        mlp_b = _op(w.flush())
        sync = any(isinstance(st, Compute) and host.is_sync_step(st.name) for st in fn.pre)
        # the forward's dispatch (and the host's synchronisation in it) waits for the expert backward issued before
        # it under ``after_experts``; ``eager`` lets it start as soon as its inputs are ready
        df_in = cb + pre_f + (mlp_b if plan.ep_overlap_dispatch == "after_experts" else [])
        df = ic.run_side(w, fn.dispatch, ft, "F", fmb, fch, df_in, sync)
        ic.run_steps(w, dw_steps, bt, "B", bmb, bch)  # delayed expert weight gradients, after the dispatch
        db = ic.run_side(w, bn.dispatch, bt, "B", bmb, bch, df + mlp_b)
        w.pending_join += df
        ic.run_steps(w, fn.mlp, ft, "F", fmb, fch)
        mlp_f = _op(w.flush())
        lane = f_in = ic.run_side(w, fn.combine, ft, "F", fmb, fch, db + mlp_f)
        w.pending_join += db
        ic.run_steps(w, bn.pre, bt, "B", bmb, bch)
        b_in = []
        ic.backward_unit_done(w, f"L{lb}", bch, ready, final)
    for lb in b_layers[len(f_layers) :]:
        w.flush()
        w.pending_join += b_in
        b_unit(f"L{lb}")
        b_in = []
    for lf in f_layers[len(b_layers) :]:
        w.flush()
        w.pending_join += f_in
        f_unit(f"L{lf}")
        f_in = []
    w.flush()
    w.pending_join += f_in + b_in
    if vf < n_v - 1:
        ic.pipeline_p2p(w, (vf + 1) % pp, True, "F", fmb, fch, vf)
    if vb > 0:
        ic.pipeline_p2p(w, (vb - 1) % pp, True, "B", bmb, bch, vb)
    if vf == n_v - 1:
        f_unit("head")
    if vb == 0:
        b_unit("emb")
