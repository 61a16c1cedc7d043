"""The parallel plan (the ``[parallelism]`` scenario section) and its checks against a model.

Field docs carry units; ``validate`` checks the plan alone (field ranges, schedule options) and
:func:`check_plan` checks it against a model and a GPU count, naming fields and values
(``parallelism.tp (6) must divide model.heads (64)``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

from hetero_ns3.errors import ScenarioError, field_error
from hetero_ns3.workload.models import ModelSpec

Schedule = Literal["1f1b", "gpipe", "interleaved"]
Recompute = Literal["none", "selective", "full"]
RecomputeModule = Literal["core_attn", "layernorm", "mlp", "moe_act", "moe"]
LoraModule = Literal["qkv", "proj", "fc1", "fc2"]
DIMS = ("tp", "pp", "dp")


@dataclass(frozen=True)
class ParallelismSpec:
    """How one training job is split over GPUs.

    Attributes:
        tp: tensor-parallel size (Megatron column/row-parallel linears; inside a node by default).
        pp: pipeline-parallel stages.
        dp: data-parallel replicas; 0 = derived from the GPU count (gpus / (tp x pp)).
        ep: expert-parallel size for MoE layers, carved out of dp (must divide dp).
        cp: context-parallel size, carved out of dp like ep (must divide dp): each group of ``cp``
            consecutive data-parallel ranks splits every sequence of the same microbatches into ``cp``
            load-balanced parts and exchanges keys / values around a ring in attention (Megatron-Core
            ``--context-parallel-size`` with Transformer Engine's P2P ring); ``dp / cp`` replicas then
            share the global batch (Megatron's data-parallel size) and gradients are reduced over all
            ``dp`` ranks. Needs fused attention (``compute.flash_attention``).
        cp_comm_type: how the CP ranks exchange attention inputs (Megatron-Core ``--cp-comm-type``): ``p2p``
            (ring of key / value blocks overlapping the attention steps, the default), ``all_gather`` (keys
            and values gathered before attention, the Llama 3 paper's scheme) or ``a2a`` (all-to-alls to head
            shards and back, DeepSpeed-Ulysses; the rank's heads and key / value heads divisible by cp).
        vpp: virtual pipeline chunks per stage (interleaved schedule); 1 = none.
        sequence_parallel: Megatron sequence parallelism (TP all-reduce -> all-gather + reduce-scatter).
        micro_batch: sequences per microbatch.
        global_batch: sequences per iteration over all replicas.
        schedule: ``1f1b`` (PipeDream-flush), ``gpipe`` (all forwards then all backwards) or
            ``interleaved`` (1F1B with ``vpp`` virtual stages).
        recompute: activation recomputation: ``none``, ``selective`` (the modules of ``recompute_modules``; the
            attention core by default) or ``full`` (layer).
        recompute_modules: with ``recompute = "selective"``, what the backward recomputes (Megatron-Core's
            ``--recompute-modules``): ``core_attn`` (the attention core), ``layernorm`` (the two norms' outputs,
            the QKV and MLP inputs), ``mlp`` (dense MLP layers: FC1, activation, FC2 and their tensor-parallel
            communication), ``moe_act`` (MoE layers: the experts' activation, the FC2 input) and ``moe`` (MoE
            layers: router, permutation, all-to-alls, experts); empty = ``core_attn``.
        zero_stage: 0 plain DP all-reduce; 1 distributed optimizer (gradient reduce-scatter,
            parameter all-gather, optimizer states sharded); 2 also shards gradients; 3 fully sharded data
            parallelism (ZeRO-3 / FSDP, Megatron-FSDP's ``optim_grads_params``): weights sharded too, each
            layer's parameters all-gathered before its forward and again before its backward in every
            micro-batch (the next layer's gather issued as the current one starts), its gradients
            reduce-scattered after its backward in every micro-batch.
        bucket_params: gradient bucket size, parameters (Megatron ``ddp_bucket_size``; 40M default).
        overlap_grad_reduce: launch each bucket's reduction as soon as its gradients are final
            (Megatron ``--overlap-grad-reduce``).
        overlap_param_gather: with the distributed optimizer (zero_stage >= 1), issue the parameter
            all-gathers at the start of the iteration, bucket by bucket, each gating the forward of its
            first layer (Megatron ``--overlap-param-gather``) instead of after the optimizer step.
        tp_comm_overlap: overlap the forward TP all-gather / reduce-scatter (all-reduce) with the
            adjacent GEMM (Megatron-Core ``--tp-comm-overlap``, Transformer Engine userbuffers); default off
            as in Megatron.
        moe_dispatcher: how MoE layers exchange tokens between expert-parallel ranks (Megatron-Core
            ``--moe-token-dispatcher-type``): ``alltoall`` (NCCL all-to-all, one copy per routed expert, the
            default) or ``flex`` (DeepEP / HybridEP: one copy per destination rank, and across nodes one per
            destination node forwarded over NVLink; the ``expert_dispatch`` collective, docs/collectives.md).
        moe_flex_backend: the library behind ``flex`` (Megatron-Core ``--moe-flex-dispatcher-backend``):
            ``deepep`` (the default) or ``hybridep``, whose metadata preprocessing adds, to each MoE layer's
            forward dispatch, an all-gather of the expert-parallel group's routing maps (one byte per token and
            expert) and a kernel that turns the gathered map into the exchange's layout (docs/collectives.md,
            "MoE token exchange"). Read only with ``moe_dispatcher = "flex"``.
        overlap_moe_expert_parallel_comm: expert-parallel overlap (Megatron-Core's flag of that name): each steady
            forward runs layer by layer together with another micro-batch's backward, the token dispatch and
            combine of one on the communication stream behind the other's attention and experts
            (:mod:`hetero_ns3.workload.ep_overlap`); one more warm-up forward. Needs ep > 1, the interleaved
            schedule when pp > 1, and no full recomputation, no ``moe`` in ``recompute_modules``, no FSDP (as
            Megatron-Core, whose FSDP path this does not model). Default off, as in Megatron.
        delay_wgrad_compute: with ``overlap_moe_expert_parallel_comm``, the routed experts' weight-gradient GEMMs of
            a paired backward are issued after the forward's dispatch, so the backward's dispatch waits only for the
            data gradients (Megatron-Core's flag; its attention weight gradients are not delayed here).
        grad_reduce_dtype: gradient dtype on the wire: ``fp32`` (Megatron with bf16, ``accumulate_allreduce_grads_in_fp32``), ``bf16`` or ``fp16`` (2 bytes; Megatron 2021 fp16 runs reduced fp16 gradients).
        order: rank order, fastest-varying first: ``tp-pp-dp`` (default) or ``tp-dp-pp``.
        partition: ``auto`` (stage layers and replica microbatches proportional to throughput) or
            ``uniform`` (equal split, Megatron's default).
        stage_layers: explicit layers per pipeline stage (per virtual stage when vpp > 1).
        replica_microbatches: explicit microbatches per data-parallel replica.
        account_for_embedding_in_pipeline_split: the input embedding takes one layer's slot in the pipeline split
            (Megatron-Core's flag of that name): the ``layers`` plus the accounted slots are split evenly over the
            ``pp x vpp`` virtual stages, which they must divide, and the first virtual stage builds one layer fewer
            (none where the split is one slot per stage). Fixes the split: not with ``stage_layers``, and
            ``partition = "auto"`` no longer moves layers between stages.
        account_for_loss_in_pipeline_split: the same for the output layer and loss on the last virtual stage.
        overlap_p2p_comm: the interleaved schedule posts each pipeline receive right after the step of the same
            direction before it (with that step's send), so the transfer overlaps the step in between (Megatron-Core
            ``overlap_p2p_comm``); off, a receive is posted when its step is reached. Unset: on under the
            interleaved schedule with vpp > 1, as Megatron-Bridge sets it (docs/workload.md "Pipeline p2p").
        cpu_offload_layers: the activations of the model's first this many layers go to host memory during the
            forward and come back for the backward (Megatron-Core ``cpu_offloading_num_layers``, activations only);
            0 = off. Needs pp = 1 and no recomputation (docs/workload.md "CPU activation offloading").
        peft: parameter-efficient fine-tuning: ``none`` (every weight trained, the default) or ``lora``
            (Megatron-Bridge's ``peft = "lora"``): every base weight frozen (no weight-gradient GEMMs, no gradient
            reduction, optimizer state or parameter gather for them; BF16 weights only in memory), low-rank
            adapters on ``lora_modules`` trained instead (docs/workload.md "LoRA fine-tuning").
        lora_rank: adapter rank r (Megatron-Bridge's ``dim``; 16 in its Llama 3 70B recipe). Read only with
            ``peft = "lora"``.
        lora_modules: linear layers that carry an adapter (Megatron-Bridge's ``target_modules``: ``qkv``, ``proj``,
            ``fc1``, ``fc2`` for ``linear_qkv`` ... ``linear_fc2``); empty = all four, its default. Read only with
            ``peft = "lora"``.
    """

    tp: int = 1
    pp: int = 1
    dp: int = 0
    ep: int = 1
    cp: int = 1
    cp_comm_type: Literal["p2p", "all_gather", "a2a"] = "p2p"
    vpp: int = 1
    sequence_parallel: bool = False
    micro_batch: int = 1
    global_batch: int = field(default=0, metadata={"doc": "sequences per iteration"})
    schedule: Schedule = "1f1b"
    recompute: Recompute = "none"
    recompute_modules: tuple[RecomputeModule, ...] = ()
    zero_stage: int = 0
    bucket_params: int = 40_000_000
    overlap_grad_reduce: bool = True
    overlap_param_gather: bool = False
    tp_comm_overlap: bool = False
    moe_dispatcher: Literal["alltoall", "flex"] = "alltoall"
    moe_flex_backend: Literal["deepep", "hybridep"] = "deepep"
    overlap_moe_expert_parallel_comm: bool = False
    delay_wgrad_compute: bool = False
    grad_reduce_dtype: Literal["fp32", "bf16", "fp16"] = "fp32"
    order: Literal["tp-pp-dp", "tp-dp-pp"] = "tp-pp-dp"
    partition: Literal["auto", "uniform"] = "auto"
    stage_layers: tuple[int, ...] | None = None
    replica_microbatches: tuple[int, ...] | None = None
    account_for_embedding_in_pipeline_split: bool = False
    account_for_loss_in_pipeline_split: bool = False
    overlap_p2p_comm: bool | None = None
    cpu_offload_layers: int = 0
    peft: Literal["none", "lora"] = "none"
    lora_rank: int = 16
    lora_modules: tuple[LoraModule, ...] = ()

    def validate(self, where: str = "parallelism") -> None:
        """Checks that need no model or cluster."""
        for key in ("tp", "pp", "ep", "cp", "vpp", "micro_batch", "bucket_params"):
            if getattr(self, key) < 1:
                raise field_error(f"{where}.{key}", getattr(self, key), "must be >= 1")
        if self.dp < 0:
            raise field_error(f"{where}.dp", self.dp, "must be >= 1 (or 0 to derive it from the GPU count)")
        if self.global_batch < 1:
            raise field_error(
                f"{where}.global_batch", self.global_batch, "must be >= 1", "set the sequences per iteration"
            )
        if self.zero_stage not in (0, 1, 2, 3):
            raise field_error(f"{where}.zero_stage", self.zero_stage, "must be 0, 1, 2 or 3")
        if self.global_batch % self.micro_batch:
            raise field_error(
                f"{where}.global_batch",
                self.global_batch,
                f"is not a multiple of {where}.micro_batch ({self.micro_batch})",
                f"use a multiple of {self.micro_batch}, e.g. {max(1, round(self.global_batch / self.micro_batch)) * self.micro_batch}",
            )
        if self.vpp > 1 and self.schedule != "interleaved":
            raise field_error(
                f"{where}.vpp",
                self.vpp,
                f"needs {where}.schedule = 'interleaved' (is {self.schedule!r})",
                "or set vpp = 1",
            )
        if self.overlap_p2p_comm and self.schedule != "interleaved":
            raise field_error(
                f"{where}.overlap_p2p_comm",
                True,
                f"needs {where}.schedule = 'interleaved' (is {self.schedule!r}): Megatron-Core overlaps pipeline "
                "sends and receives only in its interleaved schedule",
                "leave it unset",
            )
        if self.cpu_offload_layers:
            _check_offload(self, where)
        if self.schedule == "interleaved" and self.pp < 2:
            raise field_error(f"{where}.schedule", self.schedule, f"needs {where}.pp >= 2 (is {self.pp})")
        _check_peft(self, where)
        if self.recompute_modules and self.recompute != "selective":
            raise field_error(
                f"{where}.recompute_modules",
                list(self.recompute_modules),
                f"needs {where}.recompute = 'selective' (is {self.recompute!r})",
                "set recompute = 'selective' or recompute_modules = []",
            )

    @property
    def accounted_slots(self) -> int:
        """Pipeline-split slots taken by the embedding and the loss (0-2; the ``account_for_*`` flags)."""
        return int(self.account_for_embedding_in_pipeline_split) + int(self.account_for_loss_in_pipeline_split)

    def accounted_split(self, layers: int) -> tuple[int, ...]:
        """Layers per virtual stage under the ``account_for_*`` flags (index v = chunk x pp + stage): ``layers``
        plus the accounted slots split evenly, one fewer on the first (embedding) and the last (loss) stage."""
        vstages = self.pp * self.chunks
        per = (layers + self.accounted_slots) // vstages
        split = [per] * vstages
        split[0] -= int(self.account_for_embedding_in_pipeline_split)
        split[-1] -= int(self.account_for_loss_in_pipeline_split)
        return tuple(split)

    @property
    def recomputed(self) -> frozenset[str]:
        """Modules recomputed in the backward under ``recompute = "selective"``: ``recompute_modules``, or the
        attention core alone when it is empty (Megatron-Core's default); empty for ``none`` and ``full``."""
        if self.recompute != "selective":
            return frozenset()
        return frozenset(self.recompute_modules or ("core_attn",))

    @property
    def lora(self) -> frozenset[str]:
        """Linear layers carrying a LoRA adapter (``lora_modules``, or all four when empty); empty without PEFT."""
        if self.peft != "lora":
            return frozenset()
        return frozenset(self.lora_modules or ("qkv", "proj", "fc1", "fc2"))

    @property
    def microbatches(self) -> int:
        """Microbatches per iteration over all replicas (global_batch / micro_batch)."""
        return self.global_batch // self.micro_batch

    @property
    def p2p_overlapped(self) -> bool:
        """Whether pipeline receives are posted one same-direction step early (``overlap_p2p_comm``; unset: under
        the interleaved schedule with vpp > 1)."""
        if self.overlap_p2p_comm is None:
            return self.chunks > 1
        return self.overlap_p2p_comm

    @property
    def chunks(self) -> int:
        """Model chunks per pipeline stage (vpp for interleaved, else 1)."""
        return self.vpp if self.schedule == "interleaved" else 1


def _check_accounted_split(
    plan: ParallelismSpec, model: ModelSpec, what: str, val: object, where: str, mwhere: str
) -> None:
    """Megatron-Core's conditions on the ``account_for_*`` pipeline split: the layers plus the accounted slots divide
    evenly over the virtual stages (one slot each at least), and no explicit ``stage_layers``."""
    flag = (
        "account_for_embedding_in_pipeline_split"
        if plan.account_for_embedding_in_pipeline_split
        else "account_for_loss_in_pipeline_split"
    )
    if plan.stage_layers is not None:
        raise field_error(
            f"{where}.stage_layers",
            list(plan.stage_layers),
            f"cannot be combined with {where}.{flag} (the flag fixes the split)",
            "drop one of the two",
        )
    slots = model.layers + plan.accounted_slots
    if slots % (plan.pp * plan.chunks):
        raise field_error(
            what,
            val,
            f"must divide {mwhere}.layers + {plan.accounted_slots} accounted slot(s) ({slots}) under {where}.{flag}",
            f"choose pp x vpp among {[d for d in _divisors(slots) if d > 1]}",
        )


def _check_peft(plan: ParallelismSpec, where: str) -> None:
    """The LoRA fields: a positive rank, modules only with ``peft = "lora"``, not with fully sharded weights."""
    if plan.lora_rank < 1:
        raise field_error(f"{where}.lora_rank", plan.lora_rank, "must be >= 1", "16 is Megatron-Bridge's default")
    if plan.peft == "lora" and plan.zero_stage >= 3:
        raise field_error(
            f"{where}.peft",
            plan.peft,
            f"is not modelled with {where}.zero_stage = 3 (fully sharded weights)",
            "use zero_stage 0, 1 or 2 (the frozen weights are not sharded)",
        )
    if plan.lora_modules and plan.peft != "lora":
        raise field_error(
            f"{where}.lora_modules",
            list(plan.lora_modules),
            f"needs {where}.peft = 'lora' (is {plan.peft!r})",
            "set peft = 'lora' or lora_modules = []",
        )


def _check_offload(plan: ParallelismSpec, where: str) -> None:
    """Megatron-Core's conditions on CPU activation offloading (``cpu_offloading``): no pipeline parallelism, no
    recomputation."""
    what, n = f"{where}.cpu_offload_layers", plan.cpu_offload_layers
    if n < 0:
        raise field_error(what, n, "must be >= 0", "0 turns offloading off")
    if plan.pp > 1:
        raise field_error(
            what, n, f"needs {where}.pp = 1 (is {plan.pp}): Megatron-Core has no CPU offloading with pipeline "
            "parallelism", f"set {where}.pp = 1 or cpu_offload_layers = 0",
        )  # fmt: skip
    if plan.recompute != "none":
        raise field_error(
            what, n, f"needs {where}.recompute = 'none' (is {plan.recompute!r}): Megatron-Core does not offload "
            "with activation recomputation", f"set {where}.recompute = 'none' or cpu_offload_layers = 0",
        )  # fmt: skip


def _divisors(n: int) -> list[int]:
    return [d for d in range(1, n + 1) if n % d == 0]


def resolve_dp(plan: ParallelismSpec, n_gpus: int, where: str = "parallelism") -> int:
    """The data-parallel size: ``plan.dp`` or gpus / (tp x pp); checks tp x pp x dp == gpus."""
    mp = plan.tp * plan.pp
    if plan.dp == 0:
        if n_gpus % mp:
            raise field_error(
                f"{where}.tp x {where}.pp",
                f"{plan.tp} x {plan.pp} = {mp}",
                f"does not divide the cluster's {n_gpus} GPUs",
                "choose tp and pp whose product divides the GPU count",
            )
        return n_gpus // mp
    if mp * plan.dp != n_gpus:
        raise field_error(
            f"{where}.tp x {where}.pp x {where}.dp",
            f"{plan.tp} x {plan.pp} x {plan.dp} = {mp * plan.dp}",
            f"does not match the cluster's {n_gpus} GPUs",
            (f"set dp = {n_gpus // mp} or dp = 0 to derive it" if n_gpus % mp == 0 else "change tp, pp or dp")
            + (f" (dp counts the CP ranks: Megatron's data-parallel size x cp {plan.cp})" if plan.cp > 1 else ""),
        )
    return plan.dp


def check_plan(
    plan: ParallelismSpec, model: ModelSpec, dp: int, where: str = "parallelism", mwhere: str = "model"
) -> None:
    """Checks of the plan against the model and the resolved dp; ScenarioError naming fields and values."""
    tp, pp = plan.tp, plan.pp
    if model.heads % tp:
        raise field_error(
            f"{where}.tp",
            tp,
            f"must divide {mwhere}.heads ({model.heads})",
            f"choose tp among {_divisors(model.heads)}",
        )
    if model.n_kv_heads % tp:
        raise field_error(
            f"{where}.tp",
            tp,
            f"must divide {mwhere}.kv_heads ({model.n_kv_heads})",
            f"choose tp among {_divisors(model.n_kv_heads)}",
        )
    if model.ffn_hidden % tp:
        raise field_error(f"{where}.tp", tp, f"must divide {mwhere}.ffn_hidden ({model.ffn_hidden})")
    if plan.cpu_offload_layers >= model.layers:
        raise field_error(
            f"{where}.cpu_offload_layers", plan.cpu_offload_layers,
            f"must be below {mwhere}.layers ({model.layers}): one layer's activations stay on the GPU",
            f"use at most {model.layers - 1}; {model.layers - 2} or less for copies that overlap the compute",
        )  # fmt: skip
    vstages = pp * plan.chunks
    what = f"{where}.pp" if plan.chunks == 1 else f"{where}.pp x {where}.vpp"
    val = pp if plan.chunks == 1 else f"{pp} x {plan.vpp} = {vstages}"
    if plan.accounted_slots:
        _check_accounted_split(plan, model, what, val, where, mwhere)
    elif vstages > model.layers:
        raise field_error(what, val, f"is larger than {mwhere}.layers ({model.layers})", "every stage needs a layer")
    cp = plan.cp
    if cp > 1:
        _check_context_parallel(plan, model, dp, where, mwhere)
    m_total = plan.microbatches
    reps = dp // cp  # replicas sharing the global batch (the CP ranks of one replica run the same microbatches)
    dps = "dp / cp" if cp > 1 else "dp"
    uniform = plan.partition == "uniform" or cp > 1
    if m_total % reps and plan.replica_microbatches is None and uniform:
        raise field_error(
            f"{where}.global_batch",
            plan.global_batch,
            f"is not a multiple of micro_batch x {'replicas' if cp > 1 else 'dp'} ({plan.micro_batch} x {reps}"
            + (f"; replicas = dp / cp = {dp} / {cp})" if cp > 1 else ")"),
            "change global_batch" + ("" if cp > 1 else ", or use partition = 'auto' to split microbatches unevenly"),
        )
    per_replica_min = m_total // reps
    if plan.schedule in ("1f1b", "interleaved") and pp > 1 and per_replica_min < pp:
        raise field_error(
            f"{where}.global_batch",
            plan.global_batch,
            f"gives {per_replica_min} microbatches per replica (global_batch / (micro_batch x {dps}) = "
            f"{plan.global_batch} / ({plan.micro_batch} x {reps})), fewer than {where}.pp ({pp}) for the "
            f"{plan.schedule} schedule",
            f"use global_batch >= {pp * plan.micro_batch * reps}",
        )
    if plan.schedule == "interleaved" and plan.replica_microbatches is None and m_total % (reps * pp):
        raise field_error(
            f"{where}.global_batch",
            plan.global_batch,
            f"must give a multiple of pp ({pp}) microbatches per replica for the interleaved schedule",
            f"use a multiple of {pp * plan.micro_batch * reps}",
        )
    if plan.ep > 1:
        if not model.is_moe:
            raise field_error(f"{where}.ep", plan.ep, f"needs an MoE model ({mwhere}.experts is 1)", "set ep = 1")
        if dp % plan.ep:
            raise field_error(f"{where}.ep", plan.ep, f"must divide dp ({dp})", f"choose ep among {_divisors(dp)}")
        if model.experts % plan.ep:
            raise field_error(
                f"{where}.ep",
                plan.ep,
                f"must divide {mwhere}.experts ({model.experts})",
                f"choose among {_divisors(model.experts)}",
            )
    if plan.overlap_moe_expert_parallel_comm:
        _check_ep_overlap(plan, where)
    elif plan.delay_wgrad_compute:
        raise field_error(
            f"{where}.delay_wgrad_compute", True, f"needs {where}.overlap_moe_expert_parallel_comm = true",
            "turn on expert-parallel overlap or delay_wgrad_compute off (as Megatron-Bridge requires)",
        )  # fmt: skip
    if model.is_moe and tp > 1 and not plan.sequence_parallel:
        raise field_error(
            f"{where}.sequence_parallel", False, "must be true for MoE models with tp > 1 (as Megatron requires)"
        )
    if plan.stage_layers is not None:
        if len(plan.stage_layers) != vstages:
            raise field_error(
                f"{where}.stage_layers",
                list(plan.stage_layers),
                f"needs {vstages} entries (pp x vpp), has {len(plan.stage_layers)}",
            )
        if any(n < 1 for n in plan.stage_layers):
            raise field_error(f"{where}.stage_layers", list(plan.stage_layers), "entries must be >= 1")
        if sum(plan.stage_layers) != model.layers:
            raise field_error(
                f"{where}.stage_layers",
                list(plan.stage_layers),
                f"sums to {sum(plan.stage_layers)}, not {mwhere}.layers ({model.layers})",
            )
    if plan.replica_microbatches is not None:
        rm = plan.replica_microbatches
        if len(rm) != dp:
            raise field_error(f"{where}.replica_microbatches", list(rm), f"needs dp ({dp}) entries, has {len(rm)}")
        if sum(rm) != m_total:
            raise field_error(
                f"{where}.replica_microbatches",
                list(rm),
                f"sums to {sum(rm)}, not global_batch / micro_batch ({m_total})",
            )
        low = pp if plan.schedule in ("1f1b", "interleaved") and pp > 1 else 1
        if min(rm) < low:
            raise field_error(
                f"{where}.replica_microbatches", list(rm), f"entries must be >= {low} for the {plan.schedule} schedule"
            )
        if plan.schedule == "interleaved" and any(m % pp for m in rm):
            raise field_error(f"{where}.replica_microbatches", list(rm), f"entries must be multiples of pp ({pp})")
        if plan.ep > 1 and len(set(rm)) > 1:
            raise field_error(
                f"{where}.replica_microbatches", list(rm), "must be equal when ep > 1 (all-to-all pairs replicas)"
            )
        if cp > 1 and any(len(set(rm[g : g + cp])) > 1 for g in range(0, dp, cp)):
            raise field_error(
                f"{where}.replica_microbatches",
                list(rm),
                f"must be equal within each group of cp ({cp}) consecutive ranks (they split the same sequences)",
            )


def _check_context_parallel(plan: ParallelismSpec, model: ModelSpec, dp: int, where: str, mwhere: str) -> None:
    """Context parallelism against the model and dp (Megatron-Core's own requirements)."""
    cp = plan.cp
    if dp % cp:
        raise field_error(f"{where}.cp", cp, f"must divide dp ({dp})", f"choose cp among {_divisors(dp)}")
    if plan.ep > 1:
        raise field_error(
            f"{where}.cp", cp, f"with {where}.ep = {plan.ep} is not modelled", "use cp = 1 with expert parallelism"
        )
    if model.seq_len % (2 * cp):
        raise field_error(
            f"{mwhere}.seq_len",
            model.seq_len,
            f"must be a multiple of 2 x {where}.cp ({2 * cp}): each rank takes two of 2 x cp equal chunks",
            f"choose cp among {[d for d in _divisors(model.seq_len // 2) if dp % d == 0]}",
        )
    if plan.cp_comm_type == "a2a":
        for key, heads in (("heads", model.heads), ("kv_heads", model.n_kv_heads)):
            if (heads // plan.tp) % cp:
                raise field_error(
                    f"{where}.cp",
                    cp,
                    f"must divide {mwhere}.{key} / tp ({heads} / {plan.tp}) for cp_comm_type = 'a2a' (head shards)",
                    "use cp_comm_type = 'p2p' or 'all_gather', or a smaller cp",
                )
    if plan.sequence_parallel and plan.tp > 1 and (model.seq_len // cp) % plan.tp:
        raise field_error(
            f"{where}.tp",
            plan.tp,
            f"must divide seq_len / cp ({model.seq_len} / {cp}) under sequence parallelism",
        )


def validate_order(order: str) -> tuple[str, ...]:
    """The rank order as a tuple of dims, fastest-varying first."""
    dims = tuple(order.split("-"))
    if sorted(dims) != sorted(DIMS):
        raise ScenarioError(f"parallelism.order ({order!r}) must be a permutation of tp-pp-dp")
    return dims


def _check_ep_overlap(plan: ParallelismSpec, where: str) -> None:
    """Megatron-Core's conditions for ``overlap_moe_expert_parallel_comm`` (``TransformerConfig.__post_init__``),
    and FSDP, whose combination this model does not build."""
    key = f"{where}.overlap_moe_expert_parallel_comm"
    if plan.ep < 2:
        raise field_error(key, True, f"needs expert parallelism ({where}.ep is {plan.ep})", "set ep > 1 or turn it off")
    if plan.pp > 1 and plan.schedule != "interleaved":
        raise field_error(
            key, True, f"needs {where}.schedule = 'interleaved' when pp > 1 (is {plan.schedule!r})",
            "use the interleaved schedule with vpp > 1, as Megatron-Core requires",
        )  # fmt: skip
    if plan.recompute == "full":
        raise field_error(key, True, f"cannot run with {where}.recompute = 'full'", "use 'selective' or 'none'")
    if "moe" in plan.recomputed:
        raise field_error(
            key, True, f"cannot run with 'moe' in {where}.recompute_modules", "recompute 'moe_act' instead"
        )
    if plan.zero_stage >= 3:
        raise field_error(key, True, f"is not modelled with FSDP ({where}.zero_stage 3)", "use zero_stage <= 2")
