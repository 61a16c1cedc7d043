"""Per-GPU memory estimate: weights, gradients, optimizer states, activations of in-flight microbatches.

* Model states (bytes per parameter, Megatron-LM distributed-optimizer documentation): bf16 weights 2,
  fp32 main gradients 4, fp32 master weights + Adam moments 12 -> 18; with the distributed optimizer
  (zero_stage 1) 6 + 12/d; zero_stage 2 also shards gradients: 2 + 16/d; zero_stage 3 (FSDP) the weights
  too: 18/d, plus the gathered BF16 weights of the layers in flight (:data:`FSDP_GATHERED_UNITS`). d is the
  data-parallel
  group of the parameter (dp for dense, dp/ep for expert weights). The gradient buffer holds the
  reduce dtype: 4 bytes with fp32 reduction (Megatron's ``accumulate_allreduce_grads_in_fp32``, the
  default); with bf16 / fp16 reduction (Megatron-Core DDP's ``grad_reduce_in_fp32 = False``, NeMo's
  ``grad_sync_dtype: bf16``) it holds 2 and the optimizer keeps an fp32 copy of its gradient shard
  (4 more per parameter in the optimizer states): 20 bytes, 4 + 16/d distributed (the same table's
  "fp16 param, fp16 grads" row).
* Activations per layer and microbatch (Korthikanti et al., "Reducing Activation Recomputation in
  Large Transformer Models", 2022, Sec. 4): s b h (10 + 24/t + 5 a s / (h t)) bytes without sequence
  parallelism, s b h (34 + 5 a s / h) / t with it; generalized here to GQA and gated MLPs, the
  5 a s / h score term dropped under selective recomputation or flash attention; full
  recomputation keeps 2 s b h bytes (the layer input) per layer plus one layer's activations.
* Held microbatches follow the rank's schedule (``pp - stage`` for 1F1B, all for GPipe).
"""

from __future__ import annotations

from dataclasses import dataclass

from hetero_ns3.workload.mamba import mamba_saved_bytes
from hetero_ns3.workload.models import ModelSpec

GIB = float(2**30)


@dataclass(frozen=True)
class RankParams:
    """Parameters one rank holds: ``dense`` (DP-replicated over dp) and ``expert`` (over dp/ep)."""

    dense: float
    expert: float

    @property
    def total(self) -> float:
        return self.dense + self.expert


FSDP_GATHERED_UNITS = 2
"""Units (layers, the embedding, the head) whose full BF16 weights a rank holds at once under zero_stage 3: the
one running and the one whose all-gather is prefetched."""

LOSS_LOGIT_BYTES = {"unfused": 4.0, "fused": 4.0, "te": 2.0}
"""Bytes per local logit the loss keeps from forward to backward on the last stage, by ``[compute]
cross_entropy``: Megatron-Core's cross-entropy (unfused or fused) keeps its FP32 softmax; Transformer Engine's
kernels keep the BF16 logits, which their backward overwrites with the gradient."""


def _mlp_sharded(model: ModelSpec, ffn: int) -> int:
    """The TP-sharded part of an MLP of inner size ``ffn`` (its matrices and column biases; the output projection's
    row bias, ``hidden`` wide, is replicated): ``ModelSpec.mlp_params`` less that bias."""
    return model.mlp_params(ffn) - (model.hidden if model.bias else 0)


def _attention_split(model: ModelSpec) -> tuple[int, int]:
    """(TP-sharded, replicated) parameters of one attention block: QKV and output projection sharded, the head
    norms replicated; under multi-latent attention the up- and output projections sharded, the down-projections
    and latent norms duplicated on every TP rank (Megatron-Core's ``parallel_mode = "duplicated"``)."""
    h = model.hidden
    if model.mla:
        sharded = model.mla_matrices()[0]
        return sharded, model.attention_params() - sharded
    kvd, q, bias = model.kv_dim, model.q_dim, model.bias
    return h * (q + 2 * kvd) + (q + 2 * kvd if bias else 0) + q * h, model.qk_norm_params()


def layer_params_per_rank(model: ModelSpec, layer: int, tp: int, ep: int, etp: int | None = None) -> RankParams:
    """Parameters of layer ``layer`` on one rank: TP-sharded matrices / tp, replicated norms and row biases; the
    routed experts' matrices / ``etp`` (the expert tensor-parallel size; None: tp)."""
    h, bias = model.hidden, model.bias
    if model.hybrid:
        return _hybrid_params_per_rank(model, layer, tp, ep, etp)
    attn_sharded, attn_repl = _attention_split(model)
    repl = 2 * model.norm_params() + (h if bias else 0) + attn_repl
    mlp_sharded = _mlp_sharded(model, model.ffn_hidden)
    if model.is_moe_layer(layer):
        router, shared, expert = _moe_params_per_rank(model, tp, ep, etp)
        return RankParams(attn_sharded / tp + repl + router + shared, expert)
    return RankParams(attn_sharded / tp + mlp_sharded / tp + repl + (h if bias else 0), 0.0)


def _moe_params_per_rank(model: ModelSpec, tp: int, ep: int, etp: int | None) -> tuple[float, float, float]:
    """An MoE block on one rank: (the router, the shared expert's shard, the local experts' matrices / ``etp``)."""
    h, bias = model.hidden, model.bias
    expert_sharded = _mlp_sharded(model, model.expert_ffn)
    expert = (model.experts // ep) * (expert_sharded / (tp if etp is None else etp) + (h if bias else 0))
    sf = model.shared_ffn
    shared = _mlp_sharded(model, sf) / tp + (h if bias else 0) if sf else 0
    return float(h * model.experts), float(shared), expert


def _hybrid_params_per_rank(model: ModelSpec, layer: int, tp: int, ep: int, etp: int | None) -> RankParams:
    """:func:`layer_params_per_rank` of a hybrid layer: its block's share and its (replicated) norm. A Mamba-2 mixer
    is split over tp whole (projections, convolution, per-head and norm parameters: Megatron-Core shards each on its
    heads or groups)."""
    h, bias, block = model.hidden, model.bias, model.layer_block(layer)
    norm = model.norm_params()
    if block == "mamba":
        return RankParams(model.mamba_params() / tp + norm, 0.0)
    if block == "attention":
        sharded, repl = _attention_split(model)
        return RankParams(sharded / tp + repl + norm + (h if bias else 0), 0.0)
    if block == "mlp":
        return RankParams(_mlp_sharded(model, model.ffn_hidden) / tp + norm + (h if bias else 0), 0.0)
    router, shared, expert = _moe_params_per_rank(model, tp, ep, etp)
    return RankParams(norm + router + shared, expert)


def linear_weights_per_rank(model: ModelSpec, layer: int, tp: int, ep: int, etp: int | None = None) -> RankParams:
    """The part of :func:`layer_params_per_rank` that Transformer Engine's linear modules hold as weight matrices:
    QKV, the output projection, the MLP's (or the local experts' and the shared expert's) matrices, without biases,
    norms and the router; what FP8 weight storage (``[compute] fp8_param_gather``) quantizes."""
    h, kvd, q = model.hidden, model.kv_dim, model.q_dim
    block = model.layer_block(layer)
    if block == "mamba":
        return RankParams(h * (model.mamba_in_dim + model.mamba_inner) / tp, 0.0)
    if model.mla:  # the sharded projections per rank, the duplicated down-projections whole
        sharded, duplicated = model.mla_matrices()
        attn = sharded / tp + duplicated
    else:
        attn = (h * (q + 2 * kvd) + q * h) / tp
    mats = 3 if model.gated_mlp else 2
    if block in ("mlp", "moe"):
        attn = 0.0
    elif block == "attention":
        return RankParams(attn, 0.0)
    if model.is_moe_layer(layer):
        shared = mats * h * model.shared_ffn / tp if model.shared_ffn else 0.0
        return RankParams(
            attn + shared, (model.experts // ep) * mats * h * model.expert_ffn / (tp if etp is None else etp)
        )
    return RankParams(attn + mats * h * model.ffn_hidden / tp, 0.0)


def embedding_params_per_rank(model: ModelSpec, tp: int) -> float:
    """Vocab-parallel input embedding shard plus the (replicated) position table."""
    return model.padded_vocab(tp) * model.hidden / tp + (model.seq_len * model.hidden if model.learned_pos_emb else 0)


def head_params_per_rank(model: ModelSpec, tp: int, pp: int) -> float:
    """Final norm plus the output layer shard (a tied output layer is a copy on the last stage when pp > 1)."""
    out = model.padded_vocab(tp) * model.hidden / tp if (not model.tie_embeddings or pp > 1) else 0.0
    return model.norm_params() + out


def mtp_params_per_rank(model: ModelSpec, tp: int, pp: int, ep: int, etp: int | None = None) -> RankParams:
    """The multi-token prediction modules on the last stage (``model.mtp_layers``): per module its norms, the 2h -> h
    projection's shard and its layer (the last layer's kind); and, with pp > 1, the copy of the embedding table they
    look the shifted tokens up in (Megatron-Core builds one on the stage that runs them)."""
    if not model.mtp_layers:
        return RankParams(0.0, 0.0)
    layer = layer_params_per_rank(model, model.layers - 1, tp, ep, etp)
    own = 3 * model.norm_params() + 2 * model.hidden * model.hidden / tp + layer.dense
    table = embedding_params_per_rank(model, tp) if pp > 1 else 0.0
    return RankParams(model.mtp_layers * own + table, model.mtp_layers * layer.expert)


def state_bytes(
    params: RankParams, zero_stage: int, dp: int, edp: int, grad_bytes: float = 4.0
) -> tuple[float, float, float]:
    """(weights, gradients, optimizer) bytes of ``params`` under ZeRO stage ``zero_stage``: the dense part sharded
    over ``dp`` ranks, the experts' over the ``edp`` ranks holding the same experts (``Placement.edp``).

    ``grad_bytes``: bytes per gradient element in the reduce buffer (4 for fp32 reduction, 2 for bf16 / fp16;
    below 4 the optimizer also keeps an fp32 copy of its gradient shard).
    """
    d_dense, d_exp = dp, edp

    def shard(x_dense: float, x_exp: float, on: bool) -> float:
        return (params.dense * x_dense / d_dense + params.expert * x_exp / d_exp) if on else params.total * x_dense

    weights = shard(2.0, 2.0, zero_stage >= 3)
    grads = shard(grad_bytes, grad_bytes, zero_stage >= 2)
    per_opt = 12.0 if grad_bytes >= 4.0 else 16.0
    optim = shard(per_opt, per_opt, zero_stage >= 1)
    return weights, grads, optim


def layer_activation_bytes(
    model: ModelSpec,
    layer: int,
    micro_batch: int,
    tp: int,
    sp: bool,
    recompute: str,
    flash: bool,
    cp: int = 1,
    lin_bytes: float = 2.0,
    modules: frozenset[str] | None = None,
    etp: int | None = None,
) -> float:
    """Activation bytes one layer keeps for backward, per microbatch, on one rank (``s / cp`` tokens per sequence
    under context parallelism). ``etp``: the expert tensor-parallel size (None: ``tp``).

    ``modules``: what selective recomputation re-runs (``ParallelismSpec.recomputed``; None = the attention core
    alone, Megatron's default): ``layernorm`` keeps neither norm's output (the QKV and MLP inputs), ``moe_act`` no
    expert FC2 input, ``mlp`` / ``moe`` only the MLP / MoE module's BF16 input instead of everything inside it;
    ``core_attn`` keeps no attention scores (the unfused path's ``s x s`` tensors; fused kernels keep none anyway).

    ``lin_bytes``: bytes per element of a linear layer's saved input: 2 (BF16), or under Transformer Engine's FP8 /
    FP4 training the quantized copy the GEMMs used (``Recipe.saved_bytes``: 1 for FP8, 0.5625 for NVFP4: the QKV
    and fc1 inputs, the fc2 input after the activation, and the projection's input, which attention keeps in BF16
    besides); TE's ``Linear`` / ``LayerNormLinear`` / ``LayerNormMLP`` save the quantized input for the weight
    gradient."""
    s, b, h = model.seq_len // cp, micro_batch, model.hidden
    sbh = float(s * b)
    sp_div = tp if (sp and tp > 1) else 1
    if recompute == "full":
        return 2.0 * sbh * h / sp_div
    if recompute == "op":
        return _op_saved_bytes(model, sbh, lin_bytes < 2.0)
    if recompute != "selective":
        modules = frozenset()
    elif modules is None:
        modules = frozenset(("core_attn",))
    drop = 1.0 if model.dropout else 0.0
    if isinstance(lin_bytes, bool) or not 0 < lin_bytes <= 2:
        raise ValueError(f"lin_bytes ({lin_bytes!r}) must be the bytes per saved element, in (0, 2]")
    quantized = lin_bytes < 2.0
    moe = model.is_moe_layer(layer)
    whole = ("moe" if moe else "mlp") in modules  # the MLP / MoE module checkpointed: its BF16 input kept
    qkv_in = 0.0 if "layernorm" in modules else lin_bytes
    mlp_in = 2.0 if whole else qkv_in
    # two norm inputs, the QKV and fc1 (MLP module) inputs, dropout masks
    non_par = (4.0 + qkv_in + mlp_in + 2 * drop) * sbh * h
    q, kv = model.q_dim, model.kv_dim
    attn = (4.0 * q + 4.0 * kv + (lin_bytes * q if quantized else 0.0)) * sbh  # Q, K, V, O (+ O's quantized copy)
    if model.qk_norm:
        attn += 2.0 * (q + kv) * sbh  # the query and key head norms' inputs
    if model.mla:
        attn, latent = _mla_saved(model, lin_bytes, "mla_up_proj" in modules)
        attn, non_par = attn * sbh, non_par + latent * sbh
    k = model.top_k if moe else 1
    fc2_in = 0.0 if moe and "moe_act" in modules else lin_bytes
    f = model.expert_ffn if moe else model.ffn_hidden
    mlp = 0.0 if whole else (2.0 * f * (2 if model.gated_mlp else 1) + fc2_in * f) * sbh * k
    if moe and model.glu_clamp and not whole and "moe_act" not in modules:
        # the clamped halves' concatenation, the fused activation's saved input, beside the FC1 output the clamps keep
        mlp += 2.0 * 2 * f * sbh * k
    # the experts' FC1 input: every routed copy of the token after dispatch and the expert-TP gather, whole on every
    # expert-TP rank (the experts split their inner size over etp, not the tokens gathered for them); with etp = 1
    # (parallel folding) a rank's own sequence-parallel share of the copies
    dispatched = lin_bytes * h * sbh * k * (tp if etp is None else etp) / tp if moe and not whole else 0.0
    if moe and model.shared_ffn and not whole:  # the shared expert: its FC1 output and FC2 input (input: the norm's)
        sf = model.shared_ffn
        mlp += (2.0 * sf * (2 if model.gated_mlp else 1) + lin_bytes * sf) * sbh
    scores = 0.0
    if "core_attn" not in modules and not flash:
        scores = (2.0 + 3.0 * drop) * model.heads * s * s * b
    if model.hybrid:  # one block per layer: its norm's input, what its block keeps
        block = model.layer_block(layer)
        if block == "mamba":
            np_m, per_tp = mamba_saved_bytes(model, lin_bytes)
            return np_m * sbh / sp_div + per_tp * sbh / tp
        if block == "attention":
            return (non_par - (2.0 + mlp_in + drop) * sbh * h) / sp_div + (attn + scores) / tp
        return (2.0 + mlp_in + drop) * sbh * h / sp_div + mlp / tp + dispatched
    return non_par / sp_div + (attn + mlp + scores) / tp + dispatched


def _mla_saved(model: ModelSpec, lin_bytes: float, up_recomputed: bool) -> tuple[float, float]:
    """Bytes per token a multi-latent attention block keeps for backward: (over the rank's heads, before dividing
    by tp) the attention kernel's query, key and value heads (dropped under ``mla_up_proj``, which re-runs what made
    them) and its output (with its quantized copy under FP8), and (over the sequence-parallel tokens) the two latents'
    norm inputs and the up-projections' inputs."""
    n, qk, v = model.heads, model.qk_head_dim, model.v_dim
    heads = 0.0 if up_recomputed else 2.0 * n * (2 * qk + v)
    heads += 2.0 * n * v + (lin_bytes * n * v if lin_bytes < 2.0 else 0.0)
    latent = (2.0 + lin_bytes) * (model.q_lora_rank + model.kv_lora_rank)
    return heads, latent


def _op_saved_bytes(model: ModelSpec, sbh: float, quantized: bool) -> float:
    """What torchtitan's per-operator checkpoint keeps per layer (tp = 1, cp = 1; ``layers.op_recomputed``): the
    layer's BF16 input, the attention core's output and its FP32 log-sum-exp per head and token, and with BF16 linears
    the outputs of the saved matmuls (q, v, then w1 and w2 of a gated MLP, fc1 of a plain one); FP8 linears save none."""
    h, q, kv, f = model.hidden, model.q_dim, model.kv_dim, model.ffn_hidden
    kept = 2.0 * h + 2.0 * q + 4.0 * model.heads
    if not quantized:
        kept += 2.0 * (q + kv) + (2.0 * (f + h) if model.gated_mlp else 2.0 * f)
    return kept * sbh


@dataclass(frozen=True)
class MemoryEstimate:
    """Memory of one GPU, bytes.

    Attributes:
        rank, gpu, gpu_type: where.
        stage: pipeline stage.
        params: parameters held (count).
        weights, gradients, optimizer: model-state bytes.
        activations: peak activation bytes over the schedule (plus logits on the last stage).
        reserve: fixed allowance (CUDA context, NCCL buffers, allocator fragmentation).
        capacity: the GPU's HBM bytes.
    """

    rank: int
    gpu: str
    gpu_type: str
    stage: int
    params: float
    weights: float
    gradients: float
    optimizer: float
    activations: float
    reserve: float
    capacity: float

    @property
    def total(self) -> float:
        return self.weights + self.gradients + self.optimizer + self.activations + self.reserve

    @property
    def fits(self) -> bool:
        return self.total <= self.capacity

    def describe(self) -> str:
        """One line in GiB: ``total / capacity (weights w, grads g, optimizer o, activations a, reserve r)``."""
        return (
            f"{self.total / GIB:.1f} GiB of {self.capacity / GIB:.0f} GiB (weights {self.weights / GIB:.1f}, "
            f"gradients {self.gradients / GIB:.1f}, optimizer {self.optimizer / GIB:.1f}, "
            f"activations {self.activations / GIB:.1f}, reserve {self.reserve / GIB:.1f})"
        )
