"""LoRA fine-tuning on the step programs: frozen base weights, low-rank adapters on chosen linear layers.

Megatron-Bridge's ``peft = "lora"`` (Hu et al., "LoRA: Low-Rank Adaptation of Large Language Models", 2021) freezes
every base weight and adds, beside each targeted linear layer ``y = x W`` (``x``: T x k, ``W``: k x n on this rank), an
adapter ``y += (x A) B`` with ``A``: k x r and ``B``: r x n, r the rank. What that changes in one layer's kernels:

* forward: two more GEMMs per targeted layer, ``x A`` (T x r) and ``(x A) B`` (T x n), run in BF16 (the adapters are
  plain linear layers, outside Transformer Engine's FP8 autocast);
* backward: the base layer's data gradient stays (the gradient must reach the layers below), its weight gradient
  goes (Transformer Engine skips ``wgrad`` for a weight without ``requires_grad``); each adapter adds a data- and a
  weight-gradient GEMM per matrix (four);
* the embedding's backward goes entirely (token indices need no gradient, the table none), and so does the output
  layer's weight gradient.

Left out, as small against the layer's GEMMs: the adapters' own tensor-parallel collectives (T x r elements), the
scaling ``alpha / r`` (an element-wise multiply of T x n) and dropout on the adapter input (0 in the recipes). Under
TP > 1 both adapter matrices are taken at the base shard's sizes (``A``: k x r, ``B``: r x n); Megatron-Bridge's
``ParallelLinearAdapter`` (``peft/utils.py``: Megatron-Core's non-TE ``ColumnParallelLinear`` / ``RowParallelLinear``,
so BF16) also splits one of them over TP (``A``'s rank dimension beside a column-parallel layer, ``B``'s outputs
beside a row-parallel one), so its FLOPs and parameters are over-counted by up to (tp - 1) / tp of that matrix.
"""

from __future__ import annotations

from hetero_ns3.compute.roofline import Kernel
from hetero_ns3.workload.models import ModelSpec
from hetero_ns3.workload.steps import Compute, LayerContext, Step, gemm, gemm_bwd

LORA_PREFIX = "lora."
"""Name prefix of adapter kernels (``lora.qkv.in``, ``lora.qkv.out`` and their ``.dgrad`` / ``.wgrad``): not a
Transformer Engine linear GEMM (:func:`hetero_ns3.compute.recipes.is_fp8_linear`), so BF16 under any recipe."""


def _adapter_forward(k: Kernel, r: int) -> tuple[Kernel, Kernel]:
    """``x A`` and ``(x A) B`` beside the base GEMM ``k`` (m = T tokens, n outputs, k inputs on this rank)."""
    return gemm(f"{LORA_PREFIX}{k.name}.in", k.m, r, k.k), gemm(f"{LORA_PREFIX}{k.name}.out", k.m, k.n, r)


def _adapter_backward(base: str, dgrad: Kernel, r: int) -> tuple[Kernel, ...]:
    """The adapter's four backward GEMMs beside the base data gradient ``dgrad`` (m = T, n = inputs, k = outputs)."""
    t, k_in, n_out = dgrad.m, dgrad.n, dgrad.k
    return (
        *gemm_bwd(f"{LORA_PREFIX}{base}.out", t, n_out, r),
        *gemm_bwd(f"{LORA_PREFIX}{base}.in", t, r, k_in),
    )


WEIGHT_GEMMS = frozenset({"qkv", "proj", "fc1", "fc2", "logits", "router", "in_proj", "out_proj"})
"""GEMMs with a weight operand (their ``.wgrad`` is a weight gradient; the unfused attention's ``attn.qk.wgrad`` /
``attn.pv.wgrad`` are gradients of keys and values, and stay). A Mamba-2 mixer's ``in_proj`` / ``out_proj`` are
frozen and carry no adapter (``lora_modules`` offers none for them); the gradients of its convolution, ``dt`` bias,
``A``, ``D`` and norm weights come out of the scan's and the convolution's fused backward kernels, which compute them
whatever is frozen (mamba_ssm's ``MambaSplitConv1dScanCombinedFn.backward``), so those kernels stay."""


BLOCK_LINEARS: dict[str, frozenset[str]] = {
    "transformer": frozenset({"qkv", "proj", "fc1", "fc2"}),
    "attention": frozenset({"qkv", "proj"}),
    "mlp": frozenset({"fc1", "fc2"}),
    "moe": frozenset({"fc1", "fc2"}),  # the shared expert's (routed experts get no adapter)
    "mamba": frozenset(),
}
"""The adaptable linear layers (``lora_modules``) each layer block holds (``ModelSpec.layer_block``)."""


def _kernels(kernels: tuple[Kernel, ...], c: LayerContext) -> tuple[Kernel, ...]:
    out: list[Kernel] = []
    r, mods = c.lora_rank, c.lora_modules
    for k in kernels:
        stem, _, kind = k.name.partition(".")
        adapted = stem in mods and k.batch == 1  # routed experts (a batch of local experts) get no adapter
        if k.name.startswith(LORA_PREFIX):
            out.append(k)
        elif kind == "wgrad" and stem in WEIGHT_GEMMS:
            continue  # frozen weight
        elif kind == "" and adapted:
            out += (k, *_adapter_forward(k, r))
        elif kind == "dgrad" and adapted:
            out += (k, *_adapter_backward(stem, k, r))
        else:
            out.append(k)
    return tuple(out)


def lora_steps(steps: list[Step], c: LayerContext) -> list[Step]:
    """``steps`` (a layer's or the head's forward or backward program) under LoRA: adapters beside the targeted
    GEMMs, base weight gradients dropped and compute steps left empty removed (an asynchronous collective whose
    overlapping weight gradient went is then waited for at once by its join). Unchanged without PEFT. Apply it once
    to a program built without adapters: a base GEMM gets its adapter each time (the layer programs build a full
    recomputation's forward unadapted, then adapt the whole backward)."""
    if not c.frozen:
        return steps
    out: list[Step] = []
    for st in steps:
        if isinstance(st, Compute):
            kernels = _kernels(st.kernels, c)
            if kernels:
                out.append(Compute(st.name, kernels))
        else:
            out.append(st)
    return out


def adapter_params(model: ModelSpec, layer: int, tp: int, rank: int, modules: frozenset[str]) -> float:
    """Adapter parameters of layer ``layer`` on one rank: r x (inputs + outputs) of each targeted linear layer's shard
    (both matrices at the shard's sizes: an upper bound under TP, see the module's docstring). In an MoE layer the
    MLP adapters sit on the shared expert alone (``model.shared_ffn``; none without one), as :func:`lora_steps` places
    them: the routed experts get none. A hybrid layer has only its block's: ``qkv`` / ``proj`` on an attention block,
    ``fc1`` / ``fc2`` on an MLP or MoE block, none on a Mamba-2 block."""
    h, q, kv = model.hidden, model.q_dim, model.kv_dim
    f = model.shared_ffn if model.is_moe_layer(layer) else model.ffn_hidden
    up = f * (2 if model.gated_mlp else 1)
    dims = {"qkv": (h, (q + 2 * kv) // tp), "proj": (q // tp, h), "fc1": (h, up // tp), "fc2": (f // tp, h)}
    has = BLOCK_LINEARS[model.layer_block(layer)]
    return float(sum(rank * (dims[m][0] + dims[m][1]) for m in modules if m in has and (f or m in ("qkv", "proj"))))
