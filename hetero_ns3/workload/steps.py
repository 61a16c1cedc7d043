"""The step vocabulary of per-rank programs: compute kernels, collectives, joins, and the shapes one rank sees.

A program is a list of steps executed in order on one rank:

* :class:`Compute` — kernels run back to back on the compute stream;
* :class:`Comm` — a collective of the layer's TP, EP or CP group; ``blocking`` collectives sit on the
  compute stream (Megatron issues them synchronously), ``async`` ones run on the comm stream
  overlapping the following compute until a :class:`Join`;
* :class:`Join` — the next compute waits for every outstanding async collective.

Collective sizes follow NCCL's ``size`` (nccl-tests): all-reduce = buffer bytes; all-gather = output
bytes; reduce-scatter = input bytes; all-to-all = send-buffer bytes of one rank.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from hetero_ns3.compute.roofline import Kernel
from hetero_ns3.workload.models import ModelSpec

ACT_BYTES = 2  # bf16/fp16 activations


@dataclass(frozen=True, slots=True)
class Compute:
    name: str
    kernels: tuple[Kernel, ...]


@dataclass(frozen=True, slots=True)
class Comm:
    name: str
    collective: Literal["all_reduce", "all_gather", "reduce_scatter", "all_to_all"]
    bytes: float
    dim: Literal["tp", "ep", "cp"]
    mode: Literal["blocking", "async"] = "blocking"


@dataclass(frozen=True, slots=True)
class Join:
    pass


Step = Compute | Comm | Join

CrossEntropyImpl = Literal["unfused", "fused", "te"]
"""Loss-kernel implementations (``[compute] cross_entropy``; their bytes: ``layers.CE_BYTES``)."""


@dataclass(frozen=True)
class LayerContext:
    """Shapes seen by one rank: model, micro_batch b, tp, sequence parallelism, ep, recompute, and the software
    choices that change kernels: flash attention, TP overlap, the CP scheme, the loss kernels, the bytes of
    an element of the main (accumulated) gradient (4 FP32, 2 when gradients are reduced in BF16 / FP16), and the
    attention window of the layer at hand."""

    model: ModelSpec
    micro_batch: int
    tp: int
    sequence_parallel: bool
    ep: int
    recompute: str
    flash_attention: bool = True
    tp_comm_overlap: bool = False
    cp: int = 1
    cp_comm_type: Literal["p2p", "all_gather", "a2a"] = "p2p"
    cross_entropy: CrossEntropyImpl = "unfused"
    main_grad_bytes: float = 4.0
    window: int = 0
    """Sliding attention window of the layer being built, keys per query (0: full attention;
    ``ModelSpec.layer_window``)."""
    recomputed: frozenset[str] = frozenset()
    """Modules the backward recomputes under selective recomputation (``ParallelismSpec.recomputed``)."""
    ep_routing_gather: bool = False
    """Whether each MoE layer's forward dispatch first all-gathers the routing maps of the expert-parallel group
    and preprocesses them (HybridEP's metadata preprocessing: ``parallelism.moe_flex_backend = "hybridep"``)."""
    lora_rank: int = 0
    """LoRA adapter rank under ``parallelism.peft = "lora"``; 0 = no PEFT (every weight trained)."""
    lora_modules: frozenset[str] = frozenset()
    """Linear layers carrying an adapter (``ParallelismSpec.lora``)."""
    quantized_linears: bool = False
    """Whether the linear layers' GEMMs run in FP8 / FP4 (``[compute] precision``): read by the per-operator
    recomputation (``recompute = "op"``), whose save list holds BF16 matmuls only."""
    moe_dispatcher: Literal["alltoall", "flex"] = "alltoall"
    etp: int | None = None
    """Expert tensor-parallel size (``ParallelismSpec.etp``; None: ``tp``)."""
    """Megatron-Core's token dispatcher (``parallelism.moe_dispatcher``): the all-to-all one sorts the received
    tokens by local expert (:func:`sort_by_expert_bytes`); flex (DeepEP / HybridEP) carries FP32 routing
    probabilities (:func:`expert_bias_bytes`)."""

    @property
    def frozen(self) -> bool:
        """Whether the base weights are frozen (LoRA): no weight gradients but the adapters'."""
        return self.lora_rank > 0

    @property
    def expert_tp(self) -> int:
        """Ranks splitting each routed expert's matrices (and gathering the tokens for them): ``etp`` or ``tp``."""
        return self.tp if self.etp is None else self.etp

    def recomputes(self, module: str) -> bool:
        """Whether the backward re-runs ``module`` (``core_attn``, ``layernorm``, ``mlp``, ``moe_act``, ``moe``)."""
        return module in self.recomputed

    @property
    def seq_local(self) -> int:
        """Tokens of one sequence on this rank: s / cp (context parallelism splits every sequence)."""
        return self.model.seq_len // self.cp

    @property
    def tokens(self) -> int:
        """Tokens of a microbatch on this rank, T = b x s / cp."""
        return self.micro_batch * self.seq_local

    @property
    def tokens_elementwise(self) -> int:
        """Tokens an element-wise op touches on one rank (T / tp under sequence parallelism)."""
        return self.tokens // self.tp if self.sequence_parallel and self.tp > 1 else self.tokens

    @property
    def act_bytes(self) -> float:
        """Bytes of one activation tensor [T, h] (the size of every TP collective of a layer)."""
        return float(ACT_BYTES * self.tokens * self.model.hidden)


def gemm(name: str, m: int, n: int, k: int, batch: int = 1) -> Kernel:
    """Kernel of ``batch`` products (m x k) @ (k x n) in 2-byte precision."""
    return Kernel(
        name, "gemm", 2.0 * m * n * k * batch, float(ACT_BYTES * (m * k + k * n + m * n) * batch), m, n, k, batch
    )


def gemm_bwd(name: str, m: int, n: int, k: int, batch: int = 1) -> tuple[Kernel, Kernel]:
    """Data-gradient (m x n @ n x k) and weight-gradient (k x m @ m x n) kernels of a forward GEMM."""
    return gemm(f"{name}.dgrad", m, k, n, batch), gemm(f"{name}.wgrad", k, n, m, batch)


def benchmark_gemm(m: int, n: int, k: int, precision: str) -> Kernel:
    """One product (m x k) @ (k x n) as a GEMM benchmark runs it: BF16, or FP8 on operands already in FP8 (named as
    Transformer Engine's weight-gradient GEMM, the FP8 linear GEMM that casts no input)."""
    return gemm("fc1.wgrad" if precision in ("fp8", "fp4") else "gemm", m, n, k)


def mem(name: str, nbytes: float) -> Kernel:
    """Element-wise kernel moving ``nbytes`` bytes."""
    return Kernel(name, "memory", 0.0, float(nbytes))


# -- building blocks the dense and MoE layer programs share (workload/layers.py, workload/moe.py) --------------


def sp_on(c: LayerContext) -> bool:
    """Sequence parallelism in effect (asked for, and tp > 1)."""
    return c.sequence_parallel and c.tp > 1


def col_parallel_bwd(c: LayerContext, name: str, dgrad: Kernel, wgrad: Kernel) -> list[Step]:
    """Backward of a column-parallel linear: its input-gradient reduction overlaps the weight gradient."""
    if c.tp == 1:
        return [Compute(name, (dgrad, wgrad))]
    if sp_on(c):
        return [
            Comm(f"{name}.ag_input", "all_gather", c.act_bytes, "tp", "async"),
            Compute(f"{name}.dgrad", (dgrad,)),
            Join(),
            Comm(f"{name}.rs_grad", "reduce_scatter", c.act_bytes, "tp", "async"),
            Compute(f"{name}.wgrad", (wgrad,)),
            Join(),
        ]
    return [
        Compute(f"{name}.dgrad", (dgrad,)),
        Comm(f"{name}.ar_grad", "all_reduce", c.act_bytes, "tp", "async"),
        Compute(f"{name}.wgrad", (wgrad,)),
        Join(),
    ]


def tp_enter(c: LayerContext, name: str) -> list[Comm]:
    """Forward entry of a TP region: all-gather under SP, nothing otherwise."""
    return [Comm(f"{name}.ag", "all_gather", c.act_bytes, "tp")] if sp_on(c) else []


def tp_exit(c: LayerContext, name: str) -> list[Comm]:
    """Forward exit of a TP region: reduce-scatter under SP, all-reduce otherwise (tp > 1)."""
    if c.tp == 1:
        return []
    if sp_on(c):
        return [Comm(f"{name}.rs", "reduce_scatter", c.act_bytes, "tp")]
    return [Comm(f"{name}.ar", "all_reduce", c.act_bytes, "tp")]


def norm_bytes(c: LayerContext) -> float:
    """A norm over the rank's element-wise tokens: read and write one tensor."""
    return 2.0 * ACT_BYTES * c.tokens_elementwise * c.model.hidden


def bda_bytes(c: LayerContext) -> float:
    """Bias + dropout + residual add: read two tensors, write one (+ a 1-byte mask with dropout)."""
    return (3.0 * ACT_BYTES + (1 if c.model.dropout else 0)) * c.tokens_elementwise * c.model.hidden


def act_bytes(c: LayerContext, f_local: int, tokens: int) -> float:
    """The MLP activation over ``tokens`` of inner size ``f_local``: read the FC1 output (2 f gated), write f."""
    return ACT_BYTES * tokens * f_local * (3 if c.model.gated_mlp else 2)


def glu_clamp_bytes(tokens: int, f_local: int) -> tuple[float, float]:
    """Forward and backward bytes of the clamps of a clamped gated activation (``ModelSpec.glu_clamp``) over
    ``tokens`` rows of inner size ``f_local``, beside the fused activation kernel (:func:`act_bytes`).

    Megatron-Core's ``weighted_bias_quick_geglu_impl`` (``megatron/core/fusions/fused_bias_geglu.py``, the same in
    the 26.02 .. 26.06 containers' Megatron-LM) splits the FC1 output into its halves, clamps each (two PyTorch
    kernels, each reading and writing f elements) and concatenates them (reads and writes 2 f) before the fused
    kernel: 8 f elements forward. Backward: each clamp's gradient reads the incoming gradient and its saved input and
    writes f (6 f in all), and the split's gradient concatenates the two halves (4 f): 10 f. BF16 elements."""
    return float(ACT_BYTES * 8 * tokens * f_local), float(ACT_BYTES * 10 * tokens * f_local)


def expert_bias_bytes(c: LayerContext, tokens: int) -> tuple[float, float]:
    """Forward and backward bytes of the routed experts' FC2 bias, over ``tokens`` routed copies of hidden size h.

    Megatron-Core's grouped experts (``TEGroupedMLP``, ``linear_fc2`` with ``skip_bias_add``) add each expert's bias
    scaled by the copy's routing probability outside the GEMM (``TEGroupedMLP._apply_bias``): per local expert
    ``t + b * p`` on a split of the output, concatenated and cast back to BF16. With BF16 probabilities (the router's
    dtype, Megatron's default; the all-to-all dispatcher) the product, the sum and the concatenation each write a
    BF16 tensor: 12 bytes per element forward; backward, the bias's and the probability's gradients each multiply
    the incoming gradient and reduce it (6 bytes each): 12. The flex dispatcher (DeepEP / HybridEP) casts the
    probabilities to FP32, so the product, sum and concatenation are FP32 and a cast back follows: 28 bytes forward;
    backward the cast's gradient (6), the BF16 gradient of the output (6) and the two FP32 products and reductions
    (12 each): 36."""
    n = float(tokens * c.model.hidden)
    if c.moe_dispatcher == "flex":
        return 28.0 * n, 36.0 * n
    return 12.0 * n, 12.0 * n


def sort_by_expert_bytes(c: LayerContext, tokens: int) -> float:
    """Bytes of the all-to-all dispatcher's second permutation over ``tokens`` received copies: Megatron-Core's
    ``MoEAlltoAllTokenDispatcher`` receives the tokens ordered by source rank and, with more than one local expert,
    sorts them by expert (``sort_chunks_by_idxs``, fused or not, or a transposed copy when dropping and padding) and
    un-sorts the experts' output before the combine: one read and one write of the BF16 copies each time (the
    probabilities beside them, 1 / h of it, are left out). 0 under the flex dispatcher or with one local expert."""
    if c.moe_dispatcher != "alltoall" or c.model.experts // c.ep <= 1:
        return 0.0
    return float(2 * ACT_BYTES * tokens * c.model.hidden)


def recomputed(steps: list[Step], outside: tuple[str, ...]) -> list[Step]:
    """A module's forward ``steps`` re-run in the backward (selective ``mlp`` / ``moe``): renamed ``recompute.*``,
    without the kernels named in ``outside`` (the norm before the module, the residual add after it) and the
    compute steps left empty by that."""
    out: list[Step] = []
    for st in steps:
        if isinstance(st, Compute):
            kernels = tuple(k for k in st.kernels if k.name not in outside)
            if kernels:
                out.append(Compute(f"recompute.{st.name}", kernels))
        else:
            out.append(tag_recompute(st))
    return out


def tag_recompute(s: Step) -> Step:
    """``s`` renamed ``recompute.*`` (a join stays as it is)."""
    return tagged(s, "recompute")


def tagged(s: Step, prefix: str) -> Step:
    """``s`` renamed ``prefix.*`` (a join stays as it is)."""
    if isinstance(s, Compute):
        return Compute(f"{prefix}.{s.name}", s.kernels)
    if isinstance(s, Comm):
        return Comm(f"{prefix}.{s.name}", s.collective, s.bytes, s.dim, s.mode)
    return s
