"""One training iteration compiled step by step: :class:`IterationCompiler` behind ``compile_workload``.

Each worker (the tp ranks of one pipeline stage of one replica) gets one program, built in named
steps that follow Megatron-LM's iteration:

* :meth:`IterationCompiler.forward_step` / :meth:`~IterationCompiler.backward_step`: one schedule step of one
  microbatch and model chunk (embedding, layers, head) with its pipeline p2p;
* :meth:`~IterationCompiler.pipeline_p2p`: the send or receive of activations / gradients between neighbouring stages;
* :meth:`~IterationCompiler.gradient_sync`: one gradient bucket's DP reduction (or, under the distributed
  optimizer, its parameter all-gather), dense and expert parts;
* :meth:`~IterationCompiler.fsdp_units`: under zero_stage 3 (FSDP) the units of one step, each after its
  parameter all-gather (the next one's prefetched) and, in backward, followed by its gradient reduce-scatter, in
  every micro-batch;
* :meth:`~IterationCompiler.tied_embeddings`: the embedding-gradient all-reduce between first and last stage;
* :meth:`~IterationCompiler.optimizer_step`: the Adam step over the local shard, the parameter all-gathers, the host;
* under expert-parallel overlap, :func:`~hetero_ns3.workload.ep_overlap.combined_step`: a forward and a backward
  of two micro-batches together; under CPU activation offloading, :mod:`~hetero_ns3.workload.offload`'s copies.

Ids are handed out in emission order, so the order of these calls fixes the workload (deterministic for a scenario).
docs/workload.md describes what each step contains.
"""

from __future__ import annotations

from collections.abc import Callable

from hetero_ns3.compute.roofline import Kernel
from hetero_ns3.workload import layers as L
from hetero_ns3.workload.artefact import Program, Workload
from hetero_ns3.workload.compiler import (
    GRAD_BYTES,
    OPTIMIZER_BYTES_PER_PARAM,
    Bucket,
    CompileSpec,
    StepPrograms,
    _Ids,
    _ProgramBuilder,
    bucketize,
    gather_bytes_in_grad_order,
    params_in_grad_order,
)
from hetero_ns3.workload.ep_overlap import combined_step
from hetero_ns3.workload.offload import ActivationOffload
from hetero_ns3.workload.placement import Placement
from hetero_ns3.workload.schedule import Step as PipelineStep
from hetero_ns3.workload.schedule import combined_schedule, next_of_phase, pipeline_schedule

Groups = tuple[tuple[str, ...], ...]


class IterationCompiler:
    """Compiles one iteration of ``spec`` on ``placement`` into worker programs (:meth:`compile`)."""

    def __init__(self, spec: CompileSpec, placement: Placement) -> None:
        plan, model = spec.plan, spec.model
        self.spec, self.placement, self.plan, self.model = spec, placement, plan, model
        self.tp, self.pp, self.dp = plan.tp, plan.pp, placement.dp
        self.chunks = plan.chunks
        self.n_v = self.pp * self.chunks
        self.firsts = [sum(spec.stage_layers[:v]) for v in range(self.n_v)]
        self.ids = _Ids()
        self.progs = StepPrograms(spec)
        self.gbytes = GRAD_BYTES[plan.grad_reduce_dtype]
        self.zero = plan.zero_stage
        self.fsdp = self.zero >= 3
        sp_div = self.tp if plan.sequence_parallel and self.tp > 1 else 1
        self.act_p2p = L.ACT_BYTES * plan.micro_batch * (model.seq_len // plan.cp) * model.hidden / sp_div
        self.dp_kind = "reduce_scatter" if self.zero >= 1 else "all_reduce"
        self.tied_sync = model.tie_embeddings and self.pp > 1 and plan.peft != "lora"  # frozen under LoRA
        self.emb_grad_bytes = 4.0 * model.padded_vocab(self.tp) * model.hidden / self.tp
        self.orders = {v: params_in_grad_order(spec, v, self.tp, self.pp) for v in range(self.n_v)}
        gathered = {v: gather_bytes_in_grad_order(spec, v, self.tp, self.pp) for v in range(self.n_v)}
        self.buckets = {v: bucketize(self.orders[v], plan.bucket_params, gathered[v]) for v in range(self.n_v)}
        self.units = {v: {u: (d, e) for u, d, e in self.orders[v]} for v in range(self.n_v)}
        self.gather_units = {v: {u: (d, e) for u, d, e in gathered[v]} for v in range(self.n_v)}
        self._gpu_memo: dict[tuple[int, int, int], str] = {}
        self._group_memo: dict[tuple[str, int, int], Groups] = {}
        self._group_of = {
            "dp": lambda t, s, _r: placement.dp_group(t, s),
            "edp": placement.edp_group,
            "ep": placement.ep_group,
            "cp": placement.cp_group,
        }

    # -- lookups -------------------------------------------------------------------------------

    def gpu(self, t: int, stage: int, rep: int) -> str:
        """GPU name of rank (t, stage, rep) (memoized: the compiler asks for the same ranks many times)."""
        key = (t, stage, rep)
        name = self._gpu_memo.get(key)
        if name is None:
            name = self._gpu_memo[key] = self.placement.slot(t, stage, rep).gpu
        return name

    def member_groups(self, kind: str, stage: int, rep: int) -> Groups:
        """Per tp index, the GPU names of the ``dp``, ``edp``, ``ep`` or ``cp`` group of (stage, replica) (memoized);
        folded EP: the one group that holds the worker's whole TP group (one instance for its members)."""
        key = (kind, stage, rep)
        groups = self._group_memo.get(key)
        if groups is None:
            of, tps = self._group_of[kind], range(1 if kind == "ep" and self.placement.folded else self.tp)
            groups = self._group_memo[key] = tuple(tuple(s.gpu for s in of(t, stage, rep)) for t in tps)
        return groups

    # -- building blocks -----------------------------------------------------------------------

    def run_steps(
        self, w: _ProgramBuilder, steps: list[L.Step], tag: str, phase: str, mb: int, chunk: int, sync: bool = True
    ) -> None:
        """Emit a layer program: compute kernels, TP / EP collectives and joins (``sync``: mark the host
        synchronisations of :class:`~hetero_ns3.workload.host.HostModel` after their steps)."""
        host = self.spec.host
        for st in steps:
            if isinstance(st, L.Compute):
                f, b, t = self.progs.cost(w.gpu_type, st.kernels)
                w.compute(f"{tag}.{st.name}", f, b, t, phase, mb, chunk, host.step_s(st.name, st.kernels))
                if sync and host.is_sync_step(st.name):
                    w.host_sync()
                continue
            if isinstance(st, L.Join):
                w.join()
                continue
            issue = host.comm_s(st.name) if st.mode == "blocking" else 0.0  # async calls: off the host chain
            groups, inst = self.comm_target(w, st, tag, phase, mb, chunk)
            w.comm(f"{tag}.{st.name}", st.collective, st.bytes, groups, st.dim, inst, st.mode, phase, mb, chunk,
                   host=issue)  # fmt: skip

    def comm_target(
        self, w: _ProgramBuilder, st: L.Comm, tag: str, phase: str, mb: int, chunk: int
    ) -> tuple[Groups, int]:
        """Groups and instance of a layer collective: the worker's ranks (TP, one instance), or the EP / CP groups of
        :meth:`member_groups` in the replicas of this EP block / CP group (an instance keyed by the step)."""
        if st.dim == "tp":
            return (w.gpus,), self.ids.instance()
        size = self.placement.ep_replicas if st.dim == "ep" else self.plan.cp
        groups = self.member_groups(st.dim, w.stage, w.replica)
        return groups, self.ids.instance((st.dim, w.stage, w.replica // size, phase, mb, chunk, tag, st.name))

    def run_side(
        self,
        w: _ProgramBuilder,
        steps: list[L.Step],
        tag: str,
        phase: str,
        mb: int,
        chunk: int,
        deps: list[int],
        host_wait: bool = False,
    ) -> list[int]:
        """Emit ``steps`` on the expert-parallel communication stream after ``deps``, each after the one before
        (the dispatch / combine nodes of expert-parallel overlap); ``host_wait`` marks the first op's issue as a
        host synchronisation. Returns ``[last op]`` (``deps`` when there are no steps)."""
        host = self.spec.host
        for st in steps:
            if isinstance(st, L.Join):
                continue
            if isinstance(st, L.Compute):
                f, b, t = self.progs.cost(w.gpu_type, st.kernels)
                oid = w.side("compute", f"{tag}.{st.name}", deps, phase, mb, chunk, flops=f, bytes=b, duration=t,
                             dim="ep", host=host.step_s(st.name, st.kernels), host_wait=host_wait)  # fmt: skip
            else:
                groups, inst = self.comm_target(w, st, tag, phase, mb, chunk)
                oid = w.side("comm", f"{tag}.{st.name}", deps, phase, mb, chunk, bytes=float(st.bytes),
                             collective=st.collective, dim=st.dim, instance=inst, groups=self.ids.share(groups),
                             host_wait=host_wait)  # fmt: skip
            deps, host_wait = [oid], False
        return deps

    def pipeline_p2p(
        self,
        w: _ProgramBuilder,
        peer_stage: int,
        send: bool,
        phase: str,
        mb: int,
        chunk: int,
        v_from: int,
        early: bool = False,
    ) -> int:
        """Send to / receive from ``peer_stage`` the activation (F) or gradient (B) of virtual stage ``v_from``;
        returns the op. A receive is joined (the next compute waits for it) unless posted ``early``, for a later
        step (:meth:`receive`)."""
        coll = "send" if send else "recv"
        rep, tp = w.replica, self.tp
        if send:
            groups = tuple((self.gpu(t, w.stage, rep), self.gpu(t, peer_stage, rep)) for t in range(tp))
        else:
            groups = tuple((self.gpu(t, peer_stage, rep), self.gpu(t, w.stage, rep)) for t in range(tp))
        inst = self.ids.instance(("pp", rep, phase, mb, v_from))
        oid = w.comm(
            f"{phase}{mb}.c{chunk}.pp.{coll}",
            coll,
            self.act_p2p,
            groups,
            "pp",
            inst,
            "async",
            phase,
            mb,
            chunk,
            join=not send and not early,
        )
        if not send and not early:
            w.join()
        return oid

    def _source(self, s: PipelineStep, stage: int) -> tuple[int, int] | None:
        """(peer stage, virtual stage) step ``s`` of ``stage`` receives from; None at the pipeline's ends."""
        v = s.chunk * self.pp + stage
        if s.phase == "F":
            return ((v - 1) % self.pp, v - 1) if v > 0 else None
        return ((v + 1) % self.pp, v + 1) if v < self.n_v - 1 else None

    def receive(self, w: _ProgramBuilder, s: PipelineStep, post_only: bool = False) -> None:
        """The receive step ``s`` starts with, joined; posted now unless posted already. ``post_only``: post it now
        for a later step (``overlap_p2p_comm``: Megatron-Core posts it with the send of the same direction's step
        before), to be joined when ``s`` runs."""
        src, key = self._source(s, w.stage), (s.phase, s.microbatch, s.chunk)
        if src is None:
            return
        oid = self._posted.pop(key, None)
        if oid is None:
            oid = self.pipeline_p2p(w, src[0], False, s.phase, s.microbatch, s.chunk, src[1], early=True)
        if post_only:
            self._posted[key] = oid
            return
        w.flush()
        w.outstanding.append(oid)
        w.join()

    def _dp_parts(
        self,
        w: _ProgramBuilder,
        stem: str,
        suffix: str,
        key: tuple[tuple, tuple],
        dense: float,
        expert: float,
        nbytes: float,
        collective: str,
        phase: str,
        mb: int = -1,
        chunk: int = -1,
        dep: int | None = None,
    ) -> list[int]:
        """One data-parallel collective of ``dense`` parameters over dp and of ``expert`` parameters over edp (each
        skipped when empty or on a group of one), async on the communication stream, named
        ``{stem}.{part}.{suffix}``; ``key`` (head, tail) frames the instance key around the part and the stage
        (and, for the expert part, the expert block). Returns their op ids."""
        head, tail = key
        extra = (dep,) if dep is not None else ()
        out = []
        for part, n in (("dense", dense), ("expert", expert)):
            if part == "dense":
                groups = self.member_groups("dp", w.stage, w.replica)
                k: tuple = (*head, part, w.stage, *tail)
            else:
                groups = self.member_groups("edp", w.stage, w.replica)
                k = (*head, part, w.stage, w.replica % self.placement.ep_replicas, *tail)
            if n <= 0 or len(groups[0]) < 2:
                continue
            inst = self.ids.instance(k)
            name = f"{stem}.{part}.{suffix}"
            out.append(
                w.comm(name, collective, n * nbytes, groups, "dp", inst, "async", phase, mb, chunk, join=False,
                       extra_deps=extra)
            )  # fmt: skip
        return out

    def gradient_sync(
        self, w: _ProgramBuilder, chunk: int, bk: Bucket, kind: str = "grad", dep: int | None = None
    ) -> None:
        """One bucket's DP collective, dense over dp and expert over edp: ``grad`` its gradient reduction (all-reduce,
        or reduce-scatter under the distributed optimizer, in the reduce dtype) or ``param_ag`` its parameter
        all-gather (BF16, the linear weights as FP8 under ``fp8_param_gather``)."""
        if kind == "grad":
            dense, expert, nbytes, collective = bk.dense, bk.expert, float(self.gbytes), self.dp_kind
        else:
            dense, expert, nbytes, collective = bk.gather_dense, bk.gather_expert, 1.0, "all_gather"
        key = (("dp", kind), (chunk, bk.index))
        suffix = f"c{chunk}.b{bk.index}"
        w.sync_ops += self._dp_parts(w, f"dp.{kind}", suffix, key, dense, expert, nbytes, collective, "opt", dep=dep)

    def _fsdp_comm(
        self, w: _ProgramBuilder, chunk: int, v: int, unit: str, kind: str, phase: str, mb: int
    ) -> list[int]:
        """Under zero_stage 3 one unit's parameter all-gather (``kind`` ag, BF16; the linear weights as FP8 under
        ``fp8_param_gather``) or gradient reduce-scatter (rs, the reduce dtype), dense over dp and expert over edp, on
        the communication stream; its op ids."""
        dense, expert = (self.gather_units if kind == "ag" else self.units)[v][unit]
        nbytes, coll = (1.0, "all_gather") if kind == "ag" else (self.gbytes, "reduce_scatter")
        key = (("fsdp", kind), (chunk, unit, phase, mb))
        suffix = f"c{chunk}.{unit}.{phase}{mb}"
        return self._dp_parts(w, f"dp.fsdp_{kind}", suffix, key, dense, expert, nbytes, coll, phase, mb, chunk)

    def fsdp_units(
        self, w: _ProgramBuilder, v: int, chunk: int, phase: str, mb: int, units: list[str], run: Callable[[str], None]
    ) -> None:
        """Run ``units`` (in execution order) of virtual stage ``v`` under FSDP: each unit's compute waits for its
        parameter all-gather, issued when the unit before it started (one unit of prefetch, PyTorch FSDP's and
        Megatron-FSDP's default); in backward (``phase`` B) each unit's gradients are reduce-scattered as soon as
        its backward is done, and the optimizer waits for them. ``run(unit)`` emits the unit's own steps."""
        gates: dict[str, list[int]] = {}
        if units:
            gates[units[0]] = self._fsdp_comm(w, chunk, v, units[0], "ag", phase, mb)
        for i, unit in enumerate(units):
            if i + 1 < len(units):
                gates[units[i + 1]] = self._fsdp_comm(w, chunk, v, units[i + 1], "ag", phase, mb)
            w.flush()
            w.pending_join += gates.pop(unit)
            run(unit)
            if phase == "B":
                w.flush()
                w.sync_ops += self._fsdp_comm(w, chunk, v, unit, "rs", phase, mb)

    def tied_embeddings(self, w: _ProgramBuilder) -> None:
        """All-reduce of the tied embedding gradient between the first and the last stage."""
        pp, tp = self.pp, self.tp
        groups = tuple((self.gpu(t, 0, w.replica), self.gpu(t, pp - 1, w.replica)) for t in range(tp))
        inst = self.ids.instance(("emb", w.replica))
        w.sync_ops.append(
            w.comm("emb.grad_sync", "all_reduce", self.emb_grad_bytes, groups, "pp", inst, "async", "opt", join=False)
        )

    def optimizer_step(self, w: _ProgramBuilder) -> None:
        """Adam over the local shard after every gradient sync; parameter all-gathers; host overhead."""
        chunks, pp, dp, plan = self.chunks, self.pp, self.dp, self.plan
        dense = sum(d for c in range(chunks) for _u, d, _e in self.orders[c * pp + w.stage])
        expert = sum(e for c in range(chunks) for _u, _d, e in self.orders[c * pp + w.stage])
        local = dense / dp + expert / self.placement.edp if self.zero >= 1 else dense + expert
        adam = (Kernel("adam", "memory", 0.0, OPTIMIZER_BYTES_PER_PARAM * local),)
        f, b, t = self.progs.cost(w.gpu_type, adam)
        w.flush()
        w.pending_join += w.sync_ops
        w.compute(
            "optimizer",
            f,
            b,
            t,
            "opt",
            -1,
            -1,
            self.spec.host.step_s("optimizer", adam),
        )
        opt = w.flush()
        if self.zero >= 1 and not plan.overlap_param_gather and not self.fsdp:
            for c in range(chunks):
                for bk in self.buckets[c * pp + w.stage]:
                    self.gradient_sync(w, c, bk, "param_ag", opt)
        if self.spec.host_overhead_s > 0:  # data loading, logging, Python between iterations
            w.compute("host", 0.0, 0.0, self.spec.host_overhead_s, "opt", -1, -1)
            w.flush()

    def prefetch_params(self, w: _ProgramBuilder) -> None:
        """``overlap_param_gather``: every bucket's parameter all-gather at the start of the iteration (the
        parameters of the previous optimizer step), in forward order; :meth:`param_gate` makes the
        first forward of a bucket's earliest unit wait for it."""
        self._gates: dict[tuple[int, str], list[int]] = {}
        for c in range(self.chunks):
            for bk in reversed(self.buckets[c * self.pp + w.stage]):
                before = len(w.sync_ops)
                self.gradient_sync(w, c, bk, "param_ag")
                if len(w.sync_ops) > before:
                    self._gates[(c, bk.last_unit)] = w.sync_ops[before:]

    def param_gate(self, w: _ProgramBuilder, chunk: int, unit: str) -> None:
        """Make the next compute op wait for the prefetched parameter all-gather whose bucket ``unit`` opens."""
        gate = self._gates.pop((chunk, unit), None)
        if gate:
            w.flush()
            w.pending_join += gate

    # -- schedule steps ------------------------------------------------------------------------

    def run_unit(self, w: _ProgramBuilder, unit: str, tag: str, phase: str, mb: int, chunk: int) -> None:
        """Emit one unit's program (``emb``, ``head`` or ``L<i>``) in ``phase`` F or B, tagged ``{tag}.{unit}``."""
        kind = {"emb": "emb", "head": "head"}.get(unit, "layer")
        layer = int(unit[1:]) if kind == "layer" else 0
        self.offload.before(w, unit, phase, mb)  # CPU activation offloading: wait for the copy this unit needs
        self.run_steps(w, self.progs.program(f"{kind}_{phase.lower()}", layer), f"{tag}.{unit}", phase, mb, chunk)
        self.offload.after(w, unit, phase, f"{tag}.{unit}", mb, chunk)

    def backward_unit_done(
        self, w: _ProgramBuilder, unit: str, chunk: int, ready: dict[str, Bucket], final: bool
    ) -> None:
        """After a unit's backward: the reduction of the bucket it completes (``ready``: bucket by last unit) and, on
        the chunk's last backward, the tied embeddings' all-reduce after the head or embedding."""
        if unit in ready:
            self.gradient_sync(w, chunk, ready[unit])
        if unit in ("head", "emb") and final and self.tied_sync:
            self.tied_embeddings(w)

    def forward_step(self, w: _ProgramBuilder, s: PipelineStep) -> None:
        """Forward of one microbatch on one chunk: receive, embedding, layers, head or send."""
        pp, n_v = self.pp, self.n_v
        v = s.chunk * pp + w.stage
        first, n_layers = self.firsts[v], self.spec.stage_layers[v]
        tag, mb, ch = f"{s.phase}{s.microbatch}.c{s.chunk}", s.microbatch, s.chunk
        self.receive(w, s)
        units = (["emb"] if v == 0 else []) + [f"L{i}" for i in range(first, first + n_layers)]
        units += ["head"] if v == n_v - 1 else []

        def run(unit: str) -> None:
            self.run_unit(w, unit, tag, "F", mb, ch)

        if self.fsdp:
            self.fsdp_units(w, v, ch, "F", mb, units, run)
        else:
            for unit in units:
                self.param_gate(w, ch, unit)
                run(unit)
        if v < n_v - 1:
            self.pipeline_p2p(w, (v + 1) % pp, True, "F", mb, ch, v)

    def backward_step(self, w: _ProgramBuilder, s: PipelineStep, final: bool) -> None:
        """Backward of one microbatch on one chunk; on the chunk's last backward (``final``) each
        bucket's reduction is issued as soon as its last unit is done (overlapped DDP)."""
        pp, n_v, plan = self.pp, self.n_v, self.plan
        v = s.chunk * pp + w.stage
        first, n_layers = self.firsts[v], self.spec.stage_layers[v]
        tag, mb, ch = f"{s.phase}{s.microbatch}.c{s.chunk}", s.microbatch, s.chunk
        fsdp = self.fsdp
        ready = {bk.last_unit: bk for bk in self.buckets[v]} if final and plan.overlap_grad_reduce and not fsdp else {}
        self.receive(w, s)
        units = (["head"] if v == n_v - 1 else []) + [f"L{i}" for i in reversed(range(first, first + n_layers))]
        units += ["emb"] if v == 0 else []

        def run(unit: str) -> None:
            self.run_unit(w, unit, tag, "B", mb, ch)
            self.backward_unit_done(w, unit, ch, ready, final)

        if fsdp:
            self.fsdp_units(w, v, ch, "B", mb, units, run)
        else:
            for unit in units:
                run(unit)
        if v > 0:
            self.pipeline_p2p(w, (v - 1) % pp, True, "B", mb, ch, v)

    def worker_program(self, stage: int, rep: int) -> Program:
        """The program of worker (stage, replica): its schedule, the late gradient syncs, the optimizer."""
        plan, pp = self.plan, self.pp
        slots = self.placement.tp_group(stage, rep)
        w = _ProgramBuilder(
            stage, rep, tuple(s.rank for s in slots), tuple(s.gpu for s in slots), slots[0].gpu_type, self.ids
        )
        m = self.spec.replica_microbatches[rep]
        if plan.overlap_moe_expert_parallel_comm:
            groups = combined_schedule(plan.schedule, pp, stage, m, self.chunks)
        else:
            groups = tuple((s,) for s in pipeline_schedule(plan.schedule, pp, stage, m, self.chunks))
        self._gates, self.offload = {}, ActivationOffload(self.spec.offload)
        if self.zero >= 1 and plan.overlap_param_gather and not self.fsdp:
            self.prefetch_params(w)
        last_b = {s.chunk: i for i, g in enumerate(groups) for s in g if s.phase == "B"}
        self._posted: dict[tuple[str, int, int], int] = {}
        early = plan.p2p_overlapped and pp > 1 and not plan.overlap_moe_expert_parallel_comm
        following = next_of_phase(groups) if early else {}
        for i, g in enumerate(groups):
            if len(g) == 2:
                combined_step(self, w, g[0], g[1], i == last_b[g[1].chunk])
            elif g[0].phase == "F":
                self.forward_step(w, g[0])
            else:
                self.backward_step(w, g[0], i == last_b[g[0].chunk])
            if i in following:
                self.receive(w, groups[following[i]][0], post_only=True)
        if not plan.overlap_grad_reduce and not self.fsdp:
            for c in range(self.chunks):
                for bk in self.buckets[c * pp + stage]:
                    self.gradient_sync(w, c, bk)
        self.optimizer_step(w)
        w.flush()
        return w.program()

    def compile(self) -> Workload:
        """Every worker's program (replica-major, stage-minor) and the workload's metadata."""
        plan, spec = self.plan, self.spec
        programs = [self.worker_program(stage, rep) for rep in range(self.dp) for stage in range(self.pp)]
        meta = {
            "model": self.model.name,
            "tp": self.tp,
            "pp": self.pp,
            "dp": self.dp,
            "ep": plan.ep,
            "etp": plan.expert_tp,
            "cp": plan.cp,
            "vpp": self.chunks,
            "schedule": plan.schedule,
            "recompute": plan.recompute,
            "sequence_parallel": plan.sequence_parallel,
            "zero_stage": self.zero,
            "micro_batch": plan.micro_batch,
            "global_batch": plan.global_batch,
            "stage_layers": list(spec.stage_layers),
            "replica_microbatches": list(spec.replica_microbatches),
            "buckets_per_virtual_stage": {str(v): len(self.buckets[v]) for v in range(self.n_v)},
        }
        if plan.moe_dispatcher == "flex" and plan.ep > 1:
            meta["moe_routing"] = list(self.model.routing)
        if self.spec.host.sync_gap_s > 0:
            meta.update(host_sync_gap_s=self.spec.host.sync_gap_s, host_sync_jitter=self.spec.host.sync_jitter)
        return Workload(self.placement.slots, tuple(programs), self.tp, meta)
