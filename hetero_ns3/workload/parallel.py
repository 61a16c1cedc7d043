"""The parallel plan (the ``[parallelism]`` scenario section) and the checks it needs alone.

Field docs carry units; ``validate`` checks the plan alone (field ranges, schedule options, the offloading and LoRA
conditions); :mod:`hetero_ns3.workload.plan_checks` checks it against a model and a GPU count (and the
expert-parallel overlap conditions), naming fields and values (``parallelism.tp (6) must divide model.heads (64)``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

from hetero_ns3.errors import ScenarioError, field_error

Schedule = Literal["1f1b", "gpipe", "interleaved"]
Recompute = Literal["none", "selective", "full", "op"]
RecomputeModule = Literal["core_attn", "layernorm", "mlp", "moe_act", "moe", "mla_up_proj"]
LoraModule = Literal["qkv", "proj", "fc1", "fc2"]
DIMS = ("tp", "pp", "dp")


@dataclass(frozen=True)
class ParallelismSpec:
    """How one training job is split over GPUs.

    Attributes:
        tp: tensor-parallel size (Megatron column/row-parallel linears; inside a node by default).
        pp: pipeline-parallel stages.
        dp: data-parallel replicas; 0 = derived from the GPU count (gpus / (tp x pp)).
        ep: expert-parallel size for MoE layers, carved out of dp (must divide dp); with ``etp = 1`` carved out of
            tp x dp instead (MoE parallel folding).
        etp: expert tensor-parallel size (Megatron-Core ``--expert-tensor-parallel-size``): how the routed experts'
            matrices are split. Unset: ``tp`` (the experts split over the attention's TP ranks, which gather their
            tokens around the exchange). ``1``: MoE parallel folding (Liu et al. 2025, Megatron-Core's default for
            large MoE recipes): every rank keeps its own sequence-parallel tokens and whole experts, the
            expert-parallel group takes ``ep`` consecutive ranks of a pipeline stage (tp fastest, then dp), so ep
            may exceed dp; needs ep a multiple of tp. Only ``tp`` and ``1`` are modelled.
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
            attention core by default), ``full`` (layer) or ``op`` (torchtitan's per-operator selective checkpoint,
            ``selective_ac_option = "op"``: each layer's forward re-run in its backward but for the attention core and
            every other BF16 matmul, whose outputs it saves; FP8 linears are not on its save list and re-run too;
            tp = 1, cp = 1, dense layers without biases; docs/workload.md "Per-operator recomputation").
        recompute_modules: with ``recompute = "selective"``, what the backward recomputes (Megatron-Core's
            ``--recompute-modules``): ``core_attn`` (the attention core), ``layernorm`` (the two norms' outputs,
            the QKV and MLP inputs), ``mlp`` (dense MLP layers: FC1, activation, FC2 and their tensor-parallel
            communication), ``moe_act`` (MoE layers: the experts' activation, the FC2 input), ``moe`` (MoE
            layers: router, permutation, all-to-alls, experts) and ``mla_up_proj`` (multi-latent attention: the
            query / key-value up-projections and the rotary kernels, whose outputs are dropped once the attention
            core has read them); empty = ``core_attn``.
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
        ep_overlap_dispatch: with ``overlap_moe_expert_parallel_comm``, when a paired forward's token dispatch may
            start: ``after_experts`` (the default) once the other micro-batch's expert backward, issued just before it
            on the compute stream, has ended, the host's synchronisation inside the dispatch included (an empirical
            rule that reproduces three published A/Bs of the overlap), or ``eager`` as soon as its inputs are ready,
            the ideal overlap of Megatron-Core's issue order (docs/workload.md "Expert-parallel overlap"). Read only
            with ``overlap_moe_expert_parallel_comm``.
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
    etp: int | None = None
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
    ep_overlap_dispatch: Literal["after_experts", "eager"] = "after_experts"
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
        if self.etp is not None and self.etp not in (1, self.tp):
            raise field_error(
                f"{where}.etp",
                self.etp,
                f"is modelled as 1 (MoE parallel folding) or tp ({self.tp}) only",
                "set etp = 1, or leave it unset for etp = tp",
            )
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
        if self.recompute == "op":
            _check_op_recompute(self, where)
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
    def expert_tp(self) -> int:
        """Expert tensor-parallel size: ``etp``, or ``tp`` where it is unset."""
        return self.tp if self.etp is None else self.etp

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


def _check_op_recompute(plan: ParallelismSpec, where: str) -> None:
    """What the per-operator policy is built for: torchtitan's save list also keeps tensor-parallel reduce-scatter
    outputs, which this model does not split out, and its context parallelism runs other attention kernels."""
    for name, value in (("tp", plan.tp), ("cp", plan.cp)):
        if value != 1:
            raise field_error(
                f"{where}.recompute", "op", f"is modelled with {where}.{name} = 1 only (is {value})",
                f"set {name} = 1, or recompute = 'selective' / 'full'",
            )  # fmt: skip


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


def validate_order(order: str) -> tuple[str, ...]:
    """The rank order as a tuple of dims, fastest-varying first."""
    dims = tuple(order.split("-"))
    if sorted(dims) != sorted(DIMS):
        raise ScenarioError(f"parallelism.order ({order!r}) must be a permutation of tp-pp-dp")
    return dims
