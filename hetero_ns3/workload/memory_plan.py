"""Per-GPU memory of a placed and partitioned plan: weights, gradients and optimizer states by ZeRO stage, the
activations the rank's pipeline schedule keeps in flight, the loss's logits, the reserve (the closed forms are in
:mod:`hetero_ns3.workload.memory`; docs/workload.md "Memory per GPU"); and the overflow check of planning.
"""

from __future__ import annotations

from collections.abc import Sequence

from hetero_ns3.compute.config import ComputeConfig
from hetero_ns3.errors import PlanningError
from hetero_ns3.workload.compiler import GRAD_BYTES, CompileSpec, gather_bytes_in_grad_order, params_in_grad_order
from hetero_ns3.workload.memory import (
    FSDP_GATHERED_UNITS,
    LOSS_LOGIT_BYTES,
    MemoryEstimate,
    RankParams,
    layer_activation_bytes,
    state_bytes,
)
from hetero_ns3.workload.models import ModelSpec
from hetero_ns3.workload.parallel import ParallelismSpec
from hetero_ns3.workload.placement import Placement
from hetero_ns3.workload.schedule import combined_schedule, peak_in_flight, pipeline_schedule


def _saved_linear_bytes(compute: ComputeConfig) -> float:
    """Bytes per element of a saved linear-layer input: the recipe's quantized copy, else BF16."""
    recipe = compute.recipe()
    return recipe.saved_bytes if recipe else 2.0


def saved_activations(model: ModelSpec, plan: ParallelismSpec, compute: ComputeConfig) -> tuple[float, ...]:
    """Activation bytes each layer of the model keeps for backward, per micro-batch on one rank
    (:func:`~hetero_ns3.workload.memory.layer_activation_bytes` with the scenario's recipe and kernels)."""
    args = (plan.micro_batch, plan.tp, plan.sequence_parallel, plan.recompute, compute.flash_attention, plan.cp)
    lin = _saved_linear_bytes(compute)
    return tuple(
        layer_activation_bytes(model, i, *args, lin, plan.recomputed, plan.expert_tp) for i in range(model.layers)
    )


def estimate_memory(
    model: ModelSpec,
    plan: ParallelismSpec,
    placement: Placement,
    spec: CompileSpec,
    compute: ComputeConfig,
) -> tuple[MemoryEstimate, ...]:
    """Per-rank memory (see :mod:`hetero_ns3.workload.memory`)."""
    pp, dp, tp, chunks = plan.pp, placement.dp, plan.tp, plan.chunks
    n_v = pp * chunks
    sp = plan.sequence_parallel
    out = []
    firsts = [sum(spec.stage_layers[:v]) for v in range(n_v)]
    lin_bytes = _saved_linear_bytes(compute)
    per_layer = saved_activations(model, plan, compute)
    cache: dict[tuple[int, int], tuple[RankParams, float, float, RankParams]] = {}
    gathered: dict[int, float] = {}  # FSDP: the largest unit of each stage, bytes gathered
    for slot in placement.slots:
        s, d = slot.pp, slot.dp
        m_rep = spec.replica_microbatches[d]
        key = (s, m_rep)
        if key not in cache:
            dense = expert = frozen = held_dense = held_expert = 0.0
            weights: dict[int, float] = {}
            for c in range(chunks):
                v = c * pp + s
                for _u, dn, ex in params_in_grad_order(spec, v, tp, pp):
                    dense += dn
                    expert += ex
                # the weights are held at the bytes they are gathered at (FP8 linear weights under fp8_param_gather)
                for _u, dn, ex in gather_bytes_in_grad_order(spec, v, tp, pp):
                    held_dense += dn / 2
                    held_expert += ex / 2
                    gathered[s] = max(gathered.get(s, 0.0), dn + ex)
                if plan.peft != "none":  # frozen base weights: BF16 copies only (no gradient, no optimizer state)
                    frozen += sum(dn + ex for _u, dn, ex in params_in_grad_order(spec, v, tp, pp, trainable=False))
                # CPU offloading: the first cpu_offload_layers layers' activations are held in host memory
                weights[c] = sum(per_layer[max(firsts[v], plan.cpu_offload_layers) : firsts[v] + spec.stage_layers[v]])
                if v == n_v - 1:  # the multi-token prediction modules' layers, run with the head
                    weights[c] += model.mtp_layers * per_layer[-1]
            if plan.overlap_moe_expert_parallel_comm:
                # the extra warm-up forward counts; inside a pair the backward frees a layer as the forward fills one,
                # so the pair is counted backward first (about one layer low at its peak)
                groups = combined_schedule(plan.schedule, pp, s, m_rep, chunks)
                steps = tuple(st for g in groups for st in reversed(g))
            else:
                steps = pipeline_schedule(plan.schedule, pp, s, m_rep, chunks)
            act = peak_in_flight(steps, weights)
            if plan.recompute in ("full", "op"):  # one layer's activations live while it is recomputed
                act += layer_activation_bytes(
                    model,
                    firsts[s],
                    plan.micro_batch,
                    tp,
                    sp,
                    "selective",
                    compute.flash_attention,
                    plan.cp,
                    lin_bytes,
                    etp=plan.expert_tp,
                )
            if s == pp - 1:  # the loss's logits of the microbatch in flight at the last stage
                per_logit = LOSS_LOGIT_BYTES[compute.cross_entropy]
                logits = plan.micro_batch * (model.seq_len // plan.cp) * model.padded_vocab(tp) / tp
                act += per_logit * logits * (1 + model.mtp_layers)  # and each prediction module's
            # under LoRA: adapters trained, base frozen
            cache[key] = (RankParams(dense, expert), act, frozen, RankParams(held_dense, held_expert))
        params, act, frozen_params, held = cache[key]
        _, g, o = state_bytes(params, plan.zero_stage, dp, placement.edp, GRAD_BYTES[plan.grad_reduce_dtype])
        w = (
            state_bytes(held, plan.zero_stage, dp, placement.edp)[0] + 2.0 * frozen_params
        )  # 2 bytes per BF16 equivalent
        if plan.zero_stage >= 3:  # the gathered weights of the units in flight (the current and the prefetched)
            w += FSDP_GATHERED_UNITS * gathered[s]
        cap = spec.gpu_of(slot.gpu_type).hbm_bytes
        out.append(
            MemoryEstimate(
                slot.rank,
                slot.gpu,
                slot.gpu_type,
                s,
                params.total + frozen_params,
                w,
                g,
                o,
                act,
                float(compute.memory_reserve),
                cap,
            )
        )
    return tuple(out)


def check_memory(mem: Sequence[MemoryEstimate], plan: ParallelismSpec) -> None:
    """PlanningError naming the worst overflowing GPU and what would make it fit, if any GPU overflows its HBM."""
    over = [m for m in mem if not m.fits]
    if not over:
        return
    worst = max(over, key=lambda m: m.total - m.capacity)
    hints = []
    if plan.zero_stage < 1:
        hints.append("parallelism.zero_stage = 1")
    if plan.recompute != "full":
        hints.append(
            "parallelism.recompute = 'full'"
            if plan.recompute == "selective"
            else "parallelism.recompute = 'selective' or 'full'"
        )
    hints += ["a larger tp or pp", "a smaller micro_batch", "compute.check_memory = false to plan anyway"]
    raise PlanningError(
        f"GPU {worst.gpu} ({worst.gpu_type}, stage {worst.stage}, rank {worst.rank}) would need {worst.describe()}; "
        f"{len(over)} GPU(s) overflow HBM. Try " + ", ".join(hints)
    )
