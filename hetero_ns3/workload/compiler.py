"""Workload compiler: model + parallel plan + schedule + placement -> per-rank ops (a :class:`Workload`).

Every rank of a TP group runs the same program, so programs are generated once per (stage, replica)
worker and emitted for its ``tp`` ranks in lockstep; TP collectives become one instance per step.
Pipeline traffic is explicit send/recv pairs per microbatch and chunk; data-parallel traffic is one
collective per gradient bucket, issued during the last microbatch's backward as the bucket's
gradients become final (Megatron's overlapped DDP), then the optimizer step and, under the
distributed optimizer, the parameter all-gathers.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from hetero_ns3.compute.gpus import GpuSpec
from hetero_ns3.compute.roofline import Kernel, Roofline
from hetero_ns3.workload import layers as L
from hetero_ns3.workload.artefact import Op, Workload
from hetero_ns3.workload.memory import embedding_params_per_rank, head_params_per_rank, layer_params_per_rank
from hetero_ns3.workload.models import ModelSpec
from hetero_ns3.workload.parallel import ParallelPlan
from hetero_ns3.workload.placement import Placement, RankSlot
from hetero_ns3.workload.schedule import pipeline_schedule

GRAD_BYTES = {"fp32": 4, "bf16": 2}
OPTIMIZER_BYTES_PER_PARAM = 30.0  # Adam step: read grad 4, r/w master 8, r/w m 8, r/w v 8, write bf16 weight 2


class _Ids:
    """Deterministic id source (passed explicitly, no global counter)."""

    def __init__(self) -> None:
        self.next_op = 0
        self.next_inst = 0
        self.inst_keys: dict[tuple, int] = {}

    def op(self) -> int:
        self.next_op += 1
        return self.next_op - 1

    def instance(self, key: tuple | None = None) -> int:
        if key is not None and key in self.inst_keys:
            return self.inst_keys[key]
        i = self.next_inst
        self.next_inst += 1
        if key is not None:
            self.inst_keys[key] = i
        return i


@dataclass
class _Acc:
    name: str
    last: str
    phase: str
    mb: int
    chunk: int
    flops: float = 0.0
    bytes: float = 0.0
    duration: float = 0.0


@dataclass
class _RankBuilder:
    """Op list of one rank with its compute chain and outstanding async collectives."""

    slot: RankSlot
    ids: _Ids
    ops: list[Op] = field(default_factory=list)
    chain: int | None = None
    outstanding: list[int] = field(default_factory=list)
    pending_join: list[int] = field(default_factory=list)
    sync_ops: list[int] = field(default_factory=list)
    acc: _Acc | None = None

    def _chain_deps(self) -> tuple[int, ...]:
        deps = ([self.chain] if self.chain is not None else []) + self.pending_join
        self.pending_join = []
        return tuple(dict.fromkeys(deps))

    def compute(self, name: str, flops: float, nbytes: float, dur: float, phase: str, mb: int, chunk: int) -> None:
        a = self.acc
        if a is not None and (a.phase, a.mb, a.chunk) == (phase, mb, chunk):
            a.flops += flops
            a.bytes += nbytes
            a.duration += dur
            a.last = name
            return
        self.flush()
        self.acc = _Acc(name, name, phase, mb, chunk, flops, nbytes, dur)

    def flush(self) -> int | None:
        a = self.acc
        if a is None:
            return self.chain
        self.acc = None
        name = a.name if a.last == a.name else f"{a.name}..{a.last}"
        oid = self.ids.op()
        self.ops.append(
            Op(
                oid,
                self.slot.rank,
                "compute",
                name,
                "compute",
                self._chain_deps(),
                a.phase,
                a.mb,
                a.chunk,
                a.flops,
                a.bytes,
                a.duration,
            )
        )
        self.chain = oid
        return oid

    def comm(
        self,
        name: str,
        collective: str,
        nbytes: float,
        group: tuple[str, ...],
        dim: str,
        inst: int,
        mode: str,
        phase: str,
        mb: int = -1,
        chunk: int = -1,
        join: bool = True,
        extra_deps: Sequence[int] = (),
    ) -> int:
        """Emit a comm op; ``blocking`` joins the compute chain, ``async`` runs on the comm stream."""
        self.flush()
        oid = self.ids.op()
        if mode == "blocking":
            deps = self._chain_deps() + tuple(extra_deps)
            stream = "compute"
            self.chain = oid
        else:
            deps = tuple(dict.fromkeys(([self.chain] if self.chain is not None else []) + list(extra_deps)))
            stream = "comm"
            if join:
                self.outstanding.append(oid)
        self.ops.append(
            Op(
                oid,
                self.slot.rank,
                "comm",
                name,
                stream,
                deps,
                phase,
                mb,
                chunk,
                0.0,
                float(nbytes),
                0.0,
                collective,
                group,
                dim,
                inst,
            )
        )
        return oid

    def join(self) -> None:
        self.flush()
        self.pending_join += self.outstanding
        self.outstanding = []


@dataclass(frozen=True)
class CompileSpec:
    """Everything the compiler needs besides the placement.

    Attributes:
        model, plan: what to train and how.
        stage_layers: layers per virtual stage (index v = chunk x pp + stage).
        replica_microbatches: microbatches of each data-parallel replica.
        roofline: kernel timing model.
        gpu_of: catalog lookup of a GPU type name.
    """

    model: ModelSpec
    plan: ParallelPlan
    stage_layers: tuple[int, ...]
    replica_microbatches: tuple[int, ...]
    roofline: Roofline
    gpu_of: Callable[[str], GpuSpec]


class StepPrograms:
    """Cached step programs and their per-GPU-type (flops, bytes, seconds) costs."""

    def __init__(self, spec: CompileSpec) -> None:
        p = spec.plan
        self.spec = spec
        self.ctx = L.LayerContext(spec.model, p.micro_batch, p.tp, p.sequence_parallel, p.ep, p.recompute)
        self._prog: dict[tuple[str, int], list[L.Step]] = {}
        self._cost: dict[tuple[str, tuple[Kernel, ...]], tuple[float, float, float]] = {}

    def program(self, what: str, layer: int = 0) -> list[L.Step]:
        model = self.spec.model
        key = (what, int(model.is_moe_layer(layer)) if what.startswith("layer") else 0)
        if key not in self._prog:
            fn = {
                "layer_f": lambda: L.layer_forward(self.ctx, layer),
                "layer_b": lambda: L.layer_backward(self.ctx, layer),
                "emb_f": lambda: L.embedding_forward(self.ctx),
                "emb_b": lambda: L.embedding_backward(self.ctx),
                "head_f": lambda: L.head_forward(self.ctx),
                "head_b": lambda: L.head_backward(self.ctx),
            }[what]
            self._prog[key] = fn()
        return self._prog[key]

    def cost(self, gpu_type: str, kernels: tuple[Kernel, ...]) -> tuple[float, float, float]:
        key = (gpu_type, kernels)
        if key not in self._cost:
            self._cost[key] = self.spec.roofline.time(kernels, self.spec.gpu_of(gpu_type))
        return self._cost[key]


def params_in_grad_order(spec: CompileSpec, v: int, tp: int, pp: int) -> list[tuple[str, float, float]]:
    """(unit, dense params, expert params) on virtual stage ``v`` in the order backward finalizes them."""
    model, ep = spec.model, spec.plan.ep
    first, n_layers = sum(spec.stage_layers[:v]), spec.stage_layers[v]
    out: list[tuple[str, float, float]] = []
    if v == len(spec.stage_layers) - 1:
        out.append(("head", head_params_per_rank(model, tp, pp), 0.0))
    for layer in reversed(range(first, first + n_layers)):
        rp = layer_params_per_rank(model, layer, tp, ep)
        out.append((f"L{layer}", rp.dense, rp.expert))
    if v == 0:
        out.append(("emb", embedding_params_per_rank(model, tp), 0.0))
    return out


@dataclass(frozen=True)
class Bucket:
    """A gradient bucket: the unit after whose backward it is complete, and its parameter counts."""

    index: int
    last_unit: str
    dense: float
    expert: float


def bucketize(order: Sequence[tuple[str, float, float]], bucket_params: int) -> list[Bucket]:
    """Group units (in gradient-ready order) into buckets of at least ``bucket_params`` parameters."""
    out: list[Bucket] = []
    dense = expert = 0.0
    for unit, d, e in order:
        dense += d
        expert += e
        if dense + expert >= bucket_params:
            out.append(Bucket(len(out), unit, dense, expert))
            dense = expert = 0.0
    if dense + expert > 0:
        out.append(Bucket(len(out), order[-1][0], dense, expert))
    return out


def compile_workload(spec: CompileSpec, placement: Placement) -> Workload:
    """Compile one iteration into per-rank ops (see module docstring and docs/workload.md)."""
    plan, model = spec.plan, spec.model
    tp, pp, dp = plan.tp, plan.pp, placement.dp
    chunks = plan.chunks
    n_v = pp * chunks
    firsts = [sum(spec.stage_layers[:v]) for v in range(n_v)]
    ids = _Ids()
    progs = StepPrograms(spec)
    builders = [_RankBuilder(s, ids) for s in placement.slots]
    gbytes = GRAD_BYTES[plan.grad_reduce_dtype]
    zero = plan.zero_stage
    sp_div = tp if plan.sequence_parallel and tp > 1 else 1
    act_p2p = L.ACT_BYTES * plan.micro_batch * model.seq_len * model.hidden / sp_div
    dp_kind = "reduce_scatter" if zero >= 1 else "all_reduce"
    tied_sync = model.tie_embeddings and pp > 1
    emb_grad_bytes = 4.0 * model.padded_vocab(tp) * model.hidden / tp
    orders = {v: params_in_grad_order(spec, v, tp, pp) for v in range(n_v)}
    buckets = {v: bucketize(orders[v], plan.bucket_params) for v in range(n_v)}

    def worker(stage: int, rep: int) -> list[_RankBuilder]:
        return [builders[placement.rank(t, stage, rep)] for t in range(tp)]

    def run(
        ws: list[_RankBuilder], steps: list[L.Step], tag: str, phase: str, mb: int, chunk: int, stage: int, rep: int
    ) -> None:
        gtype = ws[0].slot.gpu_type
        for st in steps:
            if isinstance(st, L.Compute):
                f, b, t = progs.cost(gtype, st.kernels)
                for w in ws:
                    w.compute(f"{tag}.{st.name}", f, b, t, phase, mb, chunk)
            elif isinstance(st, L.Join):
                for w in ws:
                    w.join()
            elif st.dim == "tp":
                inst = ids.instance()
                grp = tuple(w.slot.gpu for w in ws)
                for w in ws:
                    w.comm(f"{tag}.{st.name}", st.collective, st.bytes, grp, "tp", inst, st.mode, phase, mb, chunk)
            else:  # ep: the same tp index in the replicas of this EP block
                for t, w in enumerate(ws):
                    grp = tuple(s.gpu for s in placement.ep_group(t, stage, rep))
                    inst = ids.instance(("ep", grp, phase, mb, chunk, tag, st.name))
                    w.comm(f"{tag}.{st.name}", st.collective, st.bytes, grp, "ep", inst, st.mode, phase, mb, chunk)

    def p2p(
        ws: list[_RankBuilder], peer_stage: int, rep: int, send: bool, phase: str, mb: int, chunk: int, v_from: int
    ) -> None:
        coll = "send" if send else "recv"
        for t, w in enumerate(ws):
            peer = placement.slot(t, peer_stage, rep).gpu
            src, dst = (w.slot.gpu, peer) if send else (peer, w.slot.gpu)
            inst = ids.instance(("pp", phase, src, dst, mb, v_from))
            w.comm(
                f"{phase}{mb}.c{chunk}.pp.{coll}",
                coll,
                act_p2p,
                (src, dst),
                "pp",
                inst,
                "async",
                phase,
                mb,
                chunk,
                join=not send,
            )
        if not send:
            for w in ws:
                w.join()

    def grad_sync(
        ws: list[_RankBuilder],
        stage: int,
        rep: int,
        chunk: int,
        bk: Bucket,
        kind: str,
        nbytes: float,
        collective: str,
        deps: dict[int, int] | None = None,
    ) -> None:
        for t, w in enumerate(ws):
            for part, n, slots in (
                ("dense", bk.dense, placement.dp_group(t, stage)),
                ("expert", bk.expert, placement.edp_group(t, stage, rep)),
            ):
                if n <= 0 or len(slots) < 2:
                    continue
                grp = tuple(s.gpu for s in slots)
                inst = ids.instance(("dp", kind, part, grp, chunk, bk.index))
                extra = (deps[t],) if deps else ()
                oid = w.comm(
                    f"dp.{kind}.{part}.c{chunk}.b{bk.index}",
                    collective,
                    n * nbytes,
                    grp,
                    "dp",
                    inst,
                    "async",
                    "opt",
                    join=False,
                    extra_deps=extra,
                )
                w.sync_ops.append(oid)

    def tied(ws: list[_RankBuilder], rep: int) -> None:
        for t, w in enumerate(ws):
            grp = (placement.slot(t, 0, rep).gpu, placement.slot(t, pp - 1, rep).gpu)
            inst = ids.instance(("emb", grp))
            w.sync_ops.append(
                w.comm("emb.grad_sync", "all_reduce", emb_grad_bytes, grp, "pp", inst, "async", "opt", join=False)
            )

    def optimizer(ws: list[_RankBuilder], stage: int, rep: int) -> None:
        dense = sum(d for c in range(chunks) for _u, d, _e in orders[c * pp + stage])
        expert = sum(e for c in range(chunks) for _u, _d, e in orders[c * pp + stage])
        local = dense / dp + expert / max(1, dp // plan.ep) if zero >= 1 else dense + expert
        f, b, t = progs.cost(ws[0].slot.gpu_type, (Kernel("adam", "memory", 0.0, OPTIMIZER_BYTES_PER_PARAM * local),))
        opt_ids = {}
        for i, w in enumerate(ws):
            w.flush()
            w.pending_join += w.sync_ops
            w.compute("optimizer", f, b, t, "opt", -1, -1)
            opt_ids[i] = w.flush()
        if zero >= 1:
            for c in range(chunks):
                for bk in buckets[c * pp + stage]:
                    grad_sync(ws, stage, rep, c, bk, "param_ag", L.ACT_BYTES, "all_gather", opt_ids)

    for rep in range(dp):
        m_rep = spec.replica_microbatches[rep]
        for stage in range(pp):
            ws = worker(stage, rep)
            steps = pipeline_schedule(plan.schedule, pp, stage, m_rep, chunks)
            last_b = {s.chunk: i for i, s in enumerate(steps) if s.phase == "B"}
            for i, s in enumerate(steps):
                v = s.chunk * pp + stage
                first, n_layers = firsts[v], spec.stage_layers[v]
                tag = f"{s.phase}{s.microbatch}.c{s.chunk}"
                mb, ch = s.microbatch, s.chunk
                if s.phase == "F":
                    if v > 0:
                        p2p(ws, (v - 1) % pp, rep, False, "F", mb, ch, v - 1)
                    if v == 0:
                        run(ws, progs.program("emb_f"), f"{tag}.emb", "F", mb, ch, stage, rep)
                    for layer in range(first, first + n_layers):
                        run(ws, progs.program("layer_f", layer), f"{tag}.L{layer}", "F", mb, ch, stage, rep)
                    if v == n_v - 1:
                        run(ws, progs.program("head_f"), f"{tag}.head", "F", mb, ch, stage, rep)
                    else:
                        p2p(ws, (v + 1) % pp, rep, True, "F", mb, ch, v)
                    continue
                final = i == last_b[ch]
                ready = {bk.last_unit: bk for bk in buckets[v]} if final and plan.overlap_grad_reduce else {}

                def unit_done(
                    unit: str,
                    ws: list[_RankBuilder] = ws,
                    stage: int = stage,
                    rep: int = rep,
                    ch: int = ch,
                    ready: dict = ready,
                ) -> None:
                    if unit in ready:
                        grad_sync(ws, stage, rep, ch, ready[unit], "grad", gbytes, dp_kind)

                if v < n_v - 1:
                    p2p(ws, (v + 1) % pp, rep, False, "B", mb, ch, v + 1)
                else:
                    run(ws, progs.program("head_b"), f"{tag}.head", "B", mb, ch, stage, rep)
                    unit_done("head")
                    if final and tied_sync:
                        tied(ws, rep)
                for layer in reversed(range(first, first + n_layers)):
                    run(ws, progs.program("layer_b", layer), f"{tag}.L{layer}", "B", mb, ch, stage, rep)
                    unit_done(f"L{layer}")
                if v == 0:
                    run(ws, progs.program("emb_b"), f"{tag}.emb", "B", mb, ch, stage, rep)
                    unit_done("emb")
                    if final and tied_sync:
                        tied(ws, rep)
                else:
                    p2p(ws, (v - 1) % pp, rep, True, "B", mb, ch, v)
            if not plan.overlap_grad_reduce:
                for c in range(chunks):
                    for bk in buckets[c * pp + stage]:
                        grad_sync(ws, stage, rep, c, bk, "grad", gbytes, dp_kind)
            optimizer(ws, stage, rep)

    for b in builders:
        b.flush()
    meta = {
        "model": model.name,
        "tp": tp,
        "pp": pp,
        "dp": dp,
        "ep": plan.ep,
        "vpp": chunks,
        "schedule": plan.schedule,
        "recompute": plan.recompute,
        "sequence_parallel": plan.sequence_parallel,
        "zero_stage": zero,
        "micro_batch": plan.micro_batch,
        "global_batch": plan.global_batch,
        "stage_layers": list(spec.stage_layers),
        "replica_microbatches": list(spec.replica_microbatches),
        "buckets_per_virtual_stage": {str(v): len(buckets[v]) for v in range(n_v)},
    }
    return Workload(placement.slots, tuple(tuple(b.ops) for b in builders), meta)
