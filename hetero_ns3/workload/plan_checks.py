"""Checks of a parallel plan against a model and a GPU count (Megatron-Core's own requirements), each error naming
the fields and values and a fix (``parallelism.tp (6) must divide model.heads (64); choose tp among [1, 2, 4, ...]``).
The checks the plan needs alone are :meth:`hetero_ns3.workload.parallel.ParallelismSpec.validate`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

from hetero_ns3.errors import divisors, field_error
from hetero_ns3.workload.models import ModelSpec
from hetero_ns3.workload.parallel import ParallelismSpec


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
            f"choose pp x vpp among {[d for d in divisors(slots) if d > 1]}",
        )


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


def _check_mla(plan: ParallelismSpec, model: ModelSpec, where: str, mwhere: str) -> None:
    """What multi-latent attention is not modelled with (context parallelism, TP communication overlap, the
    per-operator checkpoint, LoRA), and ``mla_up_proj`` without it."""
    if not model.mla:
        if "mla_up_proj" in plan.recompute_modules:
            raise field_error(
                f"{where}.recompute_modules",
                list(plan.recompute_modules),
                f"holds 'mla_up_proj', which needs multi-latent attention ({mwhere}.kv_lora_rank > 0)",
                "remove 'mla_up_proj'",
            )
        return
    _refuse(
        plan,
        where,
        (*_UNMODELLED_WITH, _PEFT),
        f"multi-latent attention ({mwhere}.kv_lora_rank = {model.kv_lora_rank})",
    )


_UNMODELLED_WITH = (
    ("cp", lambda p: p.cp > 1, "cp = 1"),
    ("tp_comm_overlap", lambda p: p.tp_comm_overlap and p.tp > 1, "tp_comm_overlap = false"),
    ("recompute", lambda p: p.recompute == "op", "recompute = 'selective' or 'full'"),
)
"""(key, whether the plan uses it, the fix) of what multi-latent attention and hybrid models are not modelled with."""

_PEFT = ("peft", lambda p: p.peft != "none", "peft = 'none'")
"""LoRA, not modelled with multi-latent attention (hybrid models take it: adapters on attention and MLP blocks)."""


def _refuse(plan: ParallelismSpec, where: str, checks: Iterable[tuple[str, Callable[[ParallelismSpec], bool], str]],
            what: str) -> None:  # fmt: skip
    """Refuse the first of ``checks`` the plan uses, as not modelled with ``what``, naming the key and the fix."""
    for key, on, fix in checks:
        if on(plan):
            raise field_error(
                f"{where}.{key}", getattr(plan, key), f"is not modelled with {what}", f"set {where}.{fix}"
            )


def _check_hybrid(plan: ParallelismSpec, model: ModelSpec, where: str, mwhere: str) -> None:
    """What a hybrid model's Mamba-2 layers need of tp (Megatron-Core's ``MambaMixer`` asserts: tp divides the heads
    and the groups), and what hybrid models are not modelled with."""
    if not model.hybrid:
        return
    for key in ("mamba_heads", "mamba_groups"):
        n = getattr(model, key)
        if n and n % plan.tp:
            raise field_error(
                f"{where}.tp", plan.tp, f"must divide {mwhere}.{key} ({n}) (the Mamba-2 mixer splits them)",
                f"choose tp among {divisors(n)}",
            )  # fmt: skip
    ep_overlap = (
        "overlap_moe_expert_parallel_comm",
        lambda p: p.overlap_moe_expert_parallel_comm,
        "overlap_moe_expert_parallel_comm = false",
    )
    _refuse(plan, where, (*_UNMODELLED_WITH, ep_overlap), f"a hybrid model ({mwhere}.hybrid_pattern is set)")


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
            f"choose tp among {divisors(model.heads)}",
        )
    if model.n_kv_heads % tp:
        raise field_error(
            f"{where}.tp",
            tp,
            f"must divide {mwhere}.kv_heads ({model.n_kv_heads})",
            f"choose tp among {divisors(model.n_kv_heads)}",
        )
    if model.ffn_hidden % tp:
        raise field_error(f"{where}.tp", tp, f"must divide {mwhere}.ffn_hidden ({model.ffn_hidden})")
    _check_mla(plan, model, where, mwhere)
    _check_hybrid(plan, model, where, mwhere)
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
    if plan.recompute == "op" and model.is_moe:
        raise field_error(
            f"{where}.recompute", "op", f"is modelled for dense layers only ({mwhere}.experts is {model.experts})",
            "use recompute = 'selective' (e.g. recompute_modules = ['moe_act']) or 'full'",
        )  # fmt: skip
    if plan.recompute == "op" and model.bias:
        # linears with a bias run aten.addmm, which the policy's save list does not hold
        raise field_error(
            f"{where}.recompute", "op", f"is modelled for linears without biases only ({mwhere}.bias is true)",
            "use recompute = 'selective' or 'full'",
        )  # fmt: skip
    folded = plan.expert_tp != tp
    if folded and not model.is_moe:
        raise field_error(f"{where}.etp", plan.etp, f"needs an MoE model ({mwhere}.experts is 1)", "leave etp unset")
    if folded and plan.ep % tp:
        raise field_error(
            f"{where}.ep",
            plan.ep,
            f"must be a multiple of tp ({tp}) with {where}.etp = 1 (each expert-parallel group takes whole TP groups)",
            f"choose ep among {[m for m in divisors(tp * dp) if m % tp == 0]}",
        )
    if plan.ep > 1 or folded:
        if not model.is_moe:
            raise field_error(f"{where}.ep", plan.ep, f"needs an MoE model ({mwhere}.experts is 1)", "set ep = 1")
        if folded and (tp * dp) % plan.ep:
            raise field_error(
                f"{where}.ep",
                plan.ep,
                f"must divide tp x dp ({tp} x {dp}) with {where}.etp = 1",
                f"choose ep among {[m for m in divisors(tp * dp) if m % tp == 0]}",
            )
        if not folded and dp % plan.ep:
            raise field_error(
                f"{where}.ep",
                plan.ep,
                f"must divide dp ({dp})",
                f"choose ep among {divisors(dp)}"
                + (f", or fold it over tp x dp with {where}.etp = 1" if tp > 1 else ""),
            )
        if model.experts % plan.ep:
            raise field_error(
                f"{where}.ep",
                plan.ep,
                f"must divide {mwhere}.experts ({model.experts})",
                f"choose among {divisors(model.experts)}",
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
        ends = (0, vstages - 1) if vstages > 1 else ()
        for v, n in enumerate(plan.stage_layers):
            if n < (0 if v in ends else 1):
                raise field_error(
                    f"{where}.stage_layers",
                    list(plan.stage_layers),
                    f"puts {n} layers on (virtual) stage {v}: every stage needs at least 1, except the first and the "
                    "last, which may hold the embedding or the head (with any multi-token prediction modules) alone",
                    "move layers there from a neighbouring stage",
                )
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
        raise field_error(f"{where}.cp", cp, f"must divide dp ({dp})", f"choose cp among {divisors(dp)}")
    if plan.ep > 1:
        raise field_error(
            f"{where}.cp", cp, f"with {where}.ep = {plan.ep} is not modelled", "use cp = 1 with expert parallelism"
        )
    if model.seq_len % (2 * cp):
        raise field_error(
            f"{mwhere}.seq_len",
            model.seq_len,
            f"must be a multiple of 2 x {where}.cp ({2 * cp}): each rank takes two of 2 x cp equal chunks",
            f"choose cp among {[d for d in divisors(model.seq_len // 2) if dp % d == 0]}",
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
