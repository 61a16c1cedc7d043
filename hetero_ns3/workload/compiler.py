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
from dataclasses import dataclass, field, replace
from typing import Any, Literal, TypeVar, cast

from hetero_ns3.compute.gpus import GpuSpec
from hetero_ns3.compute.roofline import Kernel, Roofline
from hetero_ns3.workload import layers as L
from hetero_ns3.workload.artefact import Program, ProgramOp, Workload
from hetero_ns3.workload.host import HostModel
from hetero_ns3.workload.memory import (
    embedding_params_per_rank,
    head_params_per_rank,
    layer_params_per_rank,
    linear_weights_per_rank,
    mtp_params_per_rank,
)
from hetero_ns3.workload.models import ModelSpec
from hetero_ns3.workload.offload import OffloadSpec
from hetero_ns3.workload.parallel import ParallelismSpec
from hetero_ns3.workload.peft import adapter_params
from hetero_ns3.workload.placement import Placement
from hetero_ns3.workload.steps import CrossEntropyImpl

_T = TypeVar("_T")

GRAD_BYTES = {"fp32": 4, "bf16": 2, "fp16": 2}
OPTIMIZER_BYTES_PER_PARAM = 30.0  # Adam step: read grad 4, r/w master 8, r/w m 8, r/w v 8, write bf16 weight 2


class _Ids:
    """Deterministic id source (passed explicitly, no global counter)."""

    def __init__(self) -> None:
        self.next_op = 0
        self.next_inst = 0
        self.inst_keys: dict[tuple, int] = {}
        self.shared: dict[object, object] = {}
        """Equal op names and group tuples as one object: DP replicas and microbatches repeat them, and at
        10^7 program ops a string or tuple per op was ~130 of the ~425 bytes an op held (docs/workload.md)."""

    def share(self, value: _T) -> _T:
        """``value``, or the equal object handed out before (names, groups: immutable, so sharing is exact)."""
        return cast(_T, self.shared.setdefault(value, value))

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
    host: float = 0.0


@dataclass
class _ProgramBuilder:
    """Op list of one worker (the tp ranks of one stage of one replica, in lockstep)."""

    stage: int
    replica: int
    ranks: tuple[int, ...]
    gpus: tuple[str, ...]
    gpu_type: str
    ids: _Ids
    ops: list[ProgramOp] = field(default_factory=list)
    chain: int | None = None
    outstanding: list[int] = field(default_factory=list)
    pending_join: list[int] = field(default_factory=list)
    sync_ops: list[int] = field(default_factory=list)
    acc: _Acc | None = None

    def _chain_deps(self) -> tuple[int, ...]:
        deps = ([self.chain] if self.chain is not None else []) + self.pending_join
        self.pending_join = []
        return tuple(dict.fromkeys(deps))

    def compute(
        self, name: str, flops: float, nbytes: float, dur: float, phase: str, mb: int, chunk: int, host: float = 0.0
    ) -> None:
        """Add a compute step (``host``: seconds the host takes to issue it); consecutive steps of one phase,
        micro-batch and chunk merge into one op."""
        a = self.acc
        if a is not None and (a.phase, a.mb, a.chunk) == (phase, mb, chunk):
            a.flops += flops
            a.bytes += nbytes
            a.duration += dur
            a.host += host
            a.last = name
            return
        self.flush()
        self.acc = _Acc(name, name, phase, mb, chunk, flops, nbytes, dur, host)

    def host_sync(self) -> None:
        """End the current op and mark it: the host waits for it on the GPU before issuing more."""
        oid = self.flush()
        if oid is not None and self.ops and self.ops[-1].id == oid:
            self.ops[-1] = replace(self.ops[-1], host_sync=True)

    def flush(self) -> int | None:
        a = self.acc
        if a is None:
            return self.chain
        self.acc = None
        name = a.name if a.last == a.name else f"{a.name}..{a.last}"
        oid = self.ids.op()
        deps = self._chain_deps()
        self.ops.append(
            ProgramOp(
                oid, "compute", self.ids.share(name), "compute", deps, a.phase, a.mb, a.chunk, a.flops, a.bytes,
                a.duration, host=a.host,
            )
        )  # fmt: skip
        self.chain = oid
        return oid

    def comm(
        self,
        name: str,
        collective: str,
        nbytes: float,
        groups: tuple[tuple[str, ...], ...],
        dim: str,
        inst: int,
        mode: str,
        phase: str,
        mb: int = -1,
        chunk: int = -1,
        join: bool = True,
        extra_deps: Sequence[int] = (),
        host: float = 0.0,
    ) -> int:
        """Emit a comm op; ``blocking`` joins the compute chain, ``async`` runs on the comm stream. ``host``:
        seconds the host takes to issue the call.

        ``groups`` holds one group per tp index (per-member instances) or a single group shared by
        the worker's ranks (a TP collective: one instance).
        """
        self.flush()
        oid = self.ids.op()
        stream: Literal["compute", "comm"]
        if mode == "blocking":
            deps = self._chain_deps() + tuple(extra_deps)
            stream = "compute"
            self.chain = oid
        else:
            # An async call issued after a join also follows the collectives joined there: the host waited
            # for them first (Megatron's ``handle.wait()`` before issuing the next call), and calls of one
            # communicator run in issue order on its NCCL stream.
            prior = ([self.chain] if self.chain is not None else []) + self.pending_join
            deps = tuple(dict.fromkeys(prior + list(extra_deps)))
            stream = "comm"
            if join:
                self.outstanding.append(oid)
        self.ops.append(
            ProgramOp(
                oid,
                "comm",
                self.ids.share(name),
                stream,
                deps,
                phase,
                mb,
                chunk,
                0.0,
                float(nbytes),
                0.0,
                collective,
                dim,
                inst,
                self.ids.share(groups),
                host,
            )
        )
        return oid

    def side(
        self,
        kind: Literal["compute", "comm"],
        name: str,
        deps: Sequence[int],
        phase: str,
        mb: int,
        chunk: int,
        **op: Any,
    ) -> int:
        """An op on a communication stream after exactly ``deps``, neither on the compute chain nor joined: the nodes
        of an expert-parallel exchange under overlap (its kernels on the stream of ``op["dim"]``, its collectives
        asynchronous). ``op``: the other :class:`ProgramOp` fields."""
        self.flush()
        oid = self.ids.op()
        self.ops.append(
            ProgramOp(oid, kind, self.ids.share(name), "comm", tuple(dict.fromkeys(deps)), phase, mb, chunk, **op)
        )
        return oid

    def join(self) -> None:
        self.flush()
        self.pending_join += self.outstanding
        self.outstanding = []

    def program(self) -> Program:
        return Program(self.stage, self.replica, self.ranks, self.gpu_type, tuple(self.ops))


@dataclass(frozen=True)
class CompileSpec:
    """Everything the compiler needs besides the placement.

    Attributes:
        model, plan: what to train and how.
        stage_layers: layers per virtual stage (index v = chunk x pp + stage).
        replica_microbatches: microbatches of each data-parallel replica.
        roofline: kernel timing model.
        gpu_of: catalog lookup of a GPU type name.
        flash_attention: fused attention kernels (``[compute] flash_attention``); False = Megatron's
            unfused path (s x s scores in HBM).
        host_overhead_s: per-iteration host time after the optimizer (``[compute] host_overhead``).
        cross_entropy: the loss kernels (``[compute] cross_entropy``; :func:`hetero_ns3.workload.layers.head_forward`).
        host: the host issue model (``[compute] host_op`` ...; :mod:`hetero_ns3.workload.host`), off by default.
        offload: CPU activation offloading (``[parallelism] cpu_offload_layers``; :mod:`hetero_ns3.workload.offload`);
            None = off.
        param_gather_bytes: bytes per element of a linear layer's weight in the parameter all-gathers (2 = BF16; 1
            under ``[compute] fp8_param_gather`` with per-tensor FP8: ``ComputeConfig.param_gather_bytes``).
    """

    model: ModelSpec
    plan: ParallelismSpec
    stage_layers: tuple[int, ...]
    replica_microbatches: tuple[int, ...]
    roofline: Roofline
    gpu_of: Callable[[str], GpuSpec]
    flash_attention: bool = True
    host_overhead_s: float = 0.0
    cross_entropy: CrossEntropyImpl = "unfused"
    host: HostModel = HostModel()
    offload: OffloadSpec | None = None
    param_gather_bytes: float = 2.0


def layer_context(
    model: ModelSpec, p: ParallelismSpec, flash: bool, cross_entropy: CrossEntropyImpl, quantized_linears: bool = False
) -> L.LayerContext:
    """The shapes and software choices one rank's layer programs are built from (``quantized_linears``: the linear
    GEMMs run under an FP8 / FP4 recipe)."""
    return L.LayerContext(
        model,
        p.micro_batch,
        p.tp,
        p.sequence_parallel,
        p.ep,
        p.recompute,
        flash,
        p.tp_comm_overlap,
        p.cp,
        p.cp_comm_type,
        cross_entropy,
        GRAD_BYTES[p.grad_reduce_dtype],
        recomputed=p.recomputed,
        ep_routing_gather=p.ep > 1 and p.moe_dispatcher == "flex" and p.moe_flex_backend == "hybridep",
        lora_rank=p.lora_rank if p.peft == "lora" else 0,
        lora_modules=p.lora,
        quantized_linears=quantized_linears,
        moe_dispatcher=p.moe_dispatcher,
        etp=p.etp,
    )


def program_ops(steps: Sequence[L.Step]) -> int:
    """Program ops a step list becomes on its own: one per collective, one per run of consecutive compute steps (the
    compiler merges them; a join ends a run)."""
    n, in_run = 0, False
    for st in steps:
        is_compute = isinstance(st, L.Compute)
        n += isinstance(st, L.Comm) or (is_compute and not in_run)
        in_run = is_compute
    return n


def layer_pass_ops(model: ModelSpec, p: ParallelismSpec, flash: bool, cross_entropy: CrossEntropyImpl) -> int:
    """Program ops of one micro-batch's forward and backward through every layer, the embedding and the head, as one
    rank of each stage emits them (pipeline, data-parallel and optimizer ops not counted): what the workload size
    scales with (:func:`hetero_ns3.limits.shape_ops`)."""
    ctx = layer_context(model, p, flash, cross_entropy)
    n = sum(program_ops(f(ctx)) for f in (L.embedding_forward, L.embedding_backward, L.head_forward, L.head_backward))
    for first, count in model.layer_kinds().values():
        n += count * (program_ops(L.layer_forward(ctx, first)) + program_ops(L.layer_backward(ctx, first)))
    return n


class StepPrograms:
    """Cached step programs and their per-GPU-type (flops, bytes, seconds) costs."""

    def __init__(self, spec: CompileSpec) -> None:
        self.spec = spec
        quantized = spec.roofline.recipe is not None
        self.ctx = layer_context(spec.model, spec.plan, spec.flash_attention, spec.cross_entropy, quantized)
        self._prog: dict[tuple[str, tuple[str, int]], list[L.Step]] = {}
        self._cost: dict[tuple[str, tuple[Kernel, ...]], tuple[float, float, float]] = {}
        self._cost_by_id: dict[tuple[str, int], tuple[tuple[Kernel, ...], tuple[float, float, float]]] = {}

    def program(self, what: str, layer: int = 0) -> list[L.Step]:
        model = self.spec.model
        key = (what, model.layer_kind(layer) if what.startswith("layer") else ("", 0))
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
        """(FLOPs, bytes, seconds) of ``kernels`` back to back on ``gpu_type``. Looked up first by the tuple's
        identity (a cached program's steps are the same objects every micro-batch, and hashing their kernels'
        fields was a third of the compile time), then by value; the identity table holds the tuple, so its id
        stays its own."""
        hit = self._cost_by_id.get((gpu_type, id(kernels)))
        if hit is not None and hit[0] is kernels:
            return hit[1]
        key = (gpu_type, kernels)
        if key not in self._cost:
            self._cost[key] = self.spec.roofline.time(kernels, self.spec.gpu_of(gpu_type))
        self._cost_by_id[(gpu_type, id(kernels))] = (kernels, self._cost[key])
        return self._cost[key]


def params_in_grad_order(
    spec: CompileSpec, v: int, tp: int, pp: int, trainable: bool = True
) -> list[tuple[str, float, float]]:
    """(unit, dense params, expert params) on virtual stage ``v`` in the order backward finalizes them: the trained
    ones (under LoRA the adapters alone, :func:`hetero_ns3.workload.peft.adapter_params`), or with ``trainable =
    False`` all the rank holds."""
    model, plan = spec.model, spec.plan
    first, n_layers = sum(spec.stage_layers[:v]), spec.stage_layers[v]
    lora = trainable and plan.peft == "lora"
    out: list[tuple[str, float, float]] = []
    if v == len(spec.stage_layers) - 1:  # the head with the multi-token prediction modules it runs
        mtp = mtp_params_per_rank(model, tp, pp, plan.ep, plan.expert_tp)
        dense = head_params_per_rank(model, tp, pp) + mtp.dense
        out.append(("head", 0.0 if lora else dense, 0.0 if lora else mtp.expert))
    for layer in reversed(range(first, first + n_layers)):
        if lora:
            out.append((f"L{layer}", adapter_params(model, layer, tp, plan.lora_rank, plan.lora), 0.0))
            continue
        rp = layer_params_per_rank(model, layer, tp, plan.ep, plan.expert_tp)
        out.append((f"L{layer}", rp.dense, rp.expert))
    if v == 0:
        out.append(("emb", 0.0 if lora else embedding_params_per_rank(model, tp), 0.0))
    return out


def gather_bytes_in_grad_order(spec: CompileSpec, v: int, tp: int, pp: int) -> list[tuple[str, float, float]]:
    """(unit, dense bytes, expert bytes) of the parameter all-gathers of virtual stage ``v``, in the order of
    :func:`params_in_grad_order`: 2 bytes per parameter (BF16), the layers' linear weights at
    ``spec.param_gather_bytes`` (FP8 parameter gather)."""
    b = spec.param_gather_bytes
    out = []
    for unit, dense, expert in params_in_grad_order(spec, v, tp, pp):
        if b != 2.0 and unit.startswith("L") and spec.plan.peft == "none":
            lin = linear_weights_per_rank(spec.model, int(unit[1:]), tp, spec.plan.ep, spec.plan.expert_tp)
            dense, expert = dense - lin.dense * (1 - b / 2), expert - lin.expert * (1 - b / 2)
        out.append((unit, 2.0 * dense, 2.0 * expert))
    return out


@dataclass(frozen=True)
class Bucket:
    """A gradient bucket: the unit after whose backward it is complete, its parameter counts, and the bytes of its
    parameter all-gather (:func:`gather_bytes_in_grad_order`; 2 per parameter unless given)."""

    index: int
    last_unit: str
    dense: float
    expert: float
    gather_dense: float = 0.0
    gather_expert: float = 0.0


def bucketize(
    order: Sequence[tuple[str, float, float]],
    bucket_params: int,
    gather: Sequence[tuple[str, float, float]] | None = None,
) -> list[Bucket]:
    """Group units (in gradient-ready order) into buckets of at least ``bucket_params`` parameters; ``gather``: the
    units' parameter all-gather bytes in the same order (default 2 per parameter)."""
    out: list[Bucket] = []
    gathered = gather if gather is not None else [(u, 2.0 * d, 2.0 * e) for u, d, e in order]
    dense = expert = g_dense = g_expert = 0.0
    for (unit, d, e), (_u, gd, ge) in zip(order, gathered, strict=True):
        dense += d
        expert += e
        g_dense += gd
        g_expert += ge
        if dense + expert >= bucket_params:
            out.append(Bucket(len(out), unit, dense, expert, g_dense, g_expert))
            dense = expert = g_dense = g_expert = 0.0
    if dense + expert > 0:
        out.append(Bucket(len(out), order[-1][0], dense, expert, g_dense, g_expert))
    return out


def compile_workload(spec: CompileSpec, placement: Placement) -> Workload:
    """Compile one iteration into worker programs, expandable to per-rank ops (docs/workload.md).

    The steps (forward / backward programs, pipeline p2p, gradient sync, tied embeddings, optimizer)
    are the methods of :class:`hetero_ns3.workload.iteration.IterationCompiler`.
    """
    from hetero_ns3.workload.iteration import IterationCompiler

    return IterationCompiler(spec, placement).compile()
