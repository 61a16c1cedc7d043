"""The ``[compute]`` scenario section: precision, efficiency tables, memory allowance."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from hetero_ns3.compute.cudnn_era import is_release
from hetero_ns3.compute.gpus import GpuSpec, gpu_spec_from_table
from hetero_ns3.compute.recipes import Recipe, recipe_for
from hetero_ns3.compute.roofline import Roofline, load_efficiency_csv
from hetero_ns3.errors import field_error
from hetero_ns3.workload.host import GRAPH_SCOPES, HOST_SYNC_GAP_S, HOST_SYNC_JITTER, HostModel


@dataclass(frozen=True)
class ComputeConfig:
    """How compute time and memory are estimated.

    Attributes:
        precision: tensor-core precision of the linear layers' GEMMs: bf16, fp16, fp8 (Transformer Engine's FP8, the
            recipe in ``fp8_recipe``) or fp4 (Transformer Engine's ``NVFP4BlockScaling``, the NVFP4 of
            Megatron-Bridge's tables: E2M1 values with an E4M3 scale per 16 elements, Blackwell only;
            docs/compute.md "NVFP4"). Under fp8 / fp4 everything but those GEMMs runs in BF16.
        efficiency_table: CSV of measured efficiencies (gpu_type, op, compute_efficiency,
            memory_efficiency), relative to the scenario file; replaces the catalog constants.
        launch_overhead: per-kernel fixed cost, seconds (``"3us"``); unset = catalog value.
        sustained: the tensor-core rate inside a training step over its microbenchmark rate, the factor fitted to
            Megatron SC'21 (catalog: 0.849; docs/compute.md "Calibration"); unset = catalog value. Set it for GPUs
            held at a lower power cap or clock than the calibration's, or to see what the assumption is worth
            (``hetero-ns3 validate --set compute.sustained=...``).
        host_overhead: per-iteration host time on every GPU after the optimizer step (data loading,
            logging, Python between iterations), seconds; default 0: the Megatron SC'21 fit puts it at
            0 within its bound (docs/compute.md).
        flash_attention: attention runs as fused flash kernels (no s^2 score tensors kept).
        attention_kernel: which fused kernel family: ``auto`` (the architecture's constants: on Hopper
            cuDNN's fused attention as measured, what Transformer Engine prefers there since mid-2024) or
            ``flash2`` (FlashAttention-2 without Hopper-specific paths: Transformer Engine's choice on Hopper
            before that, and any stack running the ``flash-attn`` 2 package); only Hopper has separate
            ``flash2`` constants (gpus.toml), elsewhere both are the architecture's.
        cudnn: the cuDNN release the fused attention kernels come from, e.g. ``"9.13.1"`` (the training container's;
            Megatron-Bridge lists them in ``docs/releases/software-versions.md``); unset: the newest the catalog
            describes. Where an architecture's attention constants changed with a release (Blackwell: cuDNN 9.18.1's
            SDPA improvements, ``[cudnn_era.Blackwell]`` in gpus.toml) an older release takes the older constants;
            docs/compute.md "Blackwell attention".
        cross_entropy: the loss kernels over the vocabulary-parallel logits: ``unfused`` (Megatron-LM's
            default: PyTorch ops on an FP32 copy, 52 bytes of HBM traffic per local logit, forward and
            backward), ``fused`` (Megatron-Core's ``cross_entropy_loss_fusion`` with its native fused
            helpers, NeMo 2.0's default: 40 bytes) or ``te`` (``cross_entropy_fusion_impl = "te"``:
            Transformer Engine's online-softmax kernels on the BF16 logits, Megatron-Bridge's performance
            recipes: 6 bytes); docs/workload.md "Loss, rotary and embedding kernels".
        fp8_recipe: FP8 scaling with ``precision = "fp8"`` (ignored otherwise): ``delayed`` (Transformer Engine's
            ``DelayedScaling``, NeMo 2.0's ``bf16_with_fp8_mixed``) or ``current`` (``Float8CurrentScaling``, the
            "FP8-CS" of Megatron-Bridge's tables: one more read of every cast input for its amax) or ``mxfp8``
            (``MXFP8BlockScaling``, the "FP8-MX" / MXFP8 of those tables: 1 x 32 blocks with E8M0 scales, Blackwell
            only; docs/compute.md "MXFP8").
        fp8_param_gather: the linear layers' weights are kept in FP8 and the parameter all-gathers carry them so
            (Megatron-Core's ``--fp8-param-gather``; on in Megatron-Bridge's FP8 and MXFP8 presets and NeMo 2.0's
            ``fp8_params``): under per-tensor FP8 (``delayed``, ``current``) those weights gather at 1 byte per
            element instead of 2 and take 1 byte of HBM; under ``mxfp8`` Megatron-Core gathers BF16 into the reused
            gradient buffer and quantizes after, so the gathers keep 2 bytes. Needs ``precision = "fp8"``;
            docs/workload.md "FP8 parameter gather".
        host_op: host time to issue one modelled kernel or collective call eagerly (Python, framework
            dispatch, launch), seconds; with ``host_launch`` 0 (both default) the host thread is not modelled
            (docs/compute.md "Host issue model", :mod:`hetero_ns3.workload.host`).
        host_launch: host time per further per-expert GEMM launch of a grouped expert GEMM, and per kernel of its
            expert-by-expert input quantization (current scaling, MXFP8), seconds.
        host_graph: host time to replay one step captured in a CUDA graph, seconds.
        moe_host_sync: the dropless MoE token dispatcher synchronises the host once per MoE layer forward
            (Megatron-Core's all-to-all and flex dispatchers without a fixed capacity); only with the host
            model on.
        host_sync_gap: mean host time from a synchronisation's return to the next issue, seconds; > 0 turns
            the host model on (the issue costs stay 0 unless set). Default :data:`HOST_SYNC_GAP_S`, from a
            public profile; it acts only where a step synchronises the host (dropless MoE layers).
        host_sync_jitter: share (0-1) of ``host_sync_gap`` drawn per rank and synchronisation from an exponential
            distribution (host-driven jitter between ranks); the rest every rank spends alike. Default
            :data:`HOST_SYNC_JITTER`, fitted to the same profile; 1: the whole gap is drawn.
        cuda_graphs: scopes captured in CUDA graphs (``attn``, ``mlp``, ``moe_router``; Megatron-Core's
            ``cuda_graph_scope``); only with the host model on.
        memory_reserve: bytes set aside per GPU (CUDA context, NCCL buffers, fragmentation).
        check_memory: fail planning when a GPU's estimate exceeds its HBM.
        gpus: extra GPU types, ``{NAME = {fp16_tflops = ..., hbm_gib = ..., ...}}`` as in gpus.toml.
    """

    precision: Literal["bf16", "fp16", "fp8", "fp4"] = "bf16"
    efficiency_table: str | None = None
    launch_overhead: float | None = field(default=None, metadata={"unit": "time"})
    sustained: float | None = None
    host_overhead: float = field(default=0.0, metadata={"unit": "time"})
    flash_attention: bool = True
    attention_kernel: Literal["auto", "flash2"] = "auto"
    cudnn: str | None = None
    cross_entropy: Literal["unfused", "fused", "te"] = "unfused"
    fp8_recipe: Literal["delayed", "current", "mxfp8"] = "delayed"
    fp8_param_gather: bool = False
    host_op: float = field(default=0.0, metadata={"unit": "time"})
    host_launch: float = field(default=0.0, metadata={"unit": "time"})
    host_graph: float = field(default=0.0, metadata={"unit": "time"})
    moe_host_sync: bool = True
    host_sync_gap: float = field(default=HOST_SYNC_GAP_S, metadata={"unit": "time"})
    host_sync_jitter: float = HOST_SYNC_JITTER
    cuda_graphs: tuple[str, ...] = ()
    memory_reserve: int = field(default=2 * 2**30, metadata={"unit": "size"})
    check_memory: bool = True
    gpus: Mapping[str, Any] = field(default_factory=dict)

    def validate(self, where: str = "compute") -> None:
        if self.fp8_param_gather and self.precision != "fp8":
            raise field_error(
                f"{where}.fp8_param_gather",
                True,
                f"needs {where}.precision = 'fp8' (is {self.precision!r}): only FP8 weights are gathered as FP8",
                f"set {where}.precision = 'fp8' or fp8_param_gather = false",
            )
        if self.sustained is not None and not 0 < self.sustained <= 1.5:
            raise field_error(
                f"{where}.sustained", self.sustained, "must be in (0, 1.5]", "e.g. 0.849 (the fitted value) or 0.8"
            )
        if self.cudnn is not None and not is_release(self.cudnn):
            raise field_error(
                f"{where}.cudnn",
                self.cudnn,
                "must be a cuDNN release as dotted numbers",
                'e.g. "9.13.1" (quoted), or leave it unset for the newest',
            )
        if self.host_overhead < 0:
            raise field_error(f"{where}.host_overhead", self.host_overhead, "must be >= 0", "e.g. '5ms'")
        for name in ("host_op", "host_launch", "host_graph", "host_sync_gap"):  # types, signs: the loader's coercion
            v = getattr(self, name)
            if not 0 <= v <= 1.0:
                raise field_error(f"{where}.{name}", v, "must be a time between 0 and 1 s", "e.g. '20us'")
        if not 0 <= self.host_sync_jitter <= 1:
            raise field_error(
                f"{where}.host_sync_jitter",
                self.host_sync_jitter,
                "must be a share between 0 and 1 of host_sync_gap",
                f"e.g. {HOST_SYNC_JITTER} (the fitted default) or 1 (the whole gap drawn per rank)",
            )
        for scope in self.cuda_graphs:  # a list of strings: the loader's tuple coercion
            if scope not in GRAPH_SCOPES:
                raise field_error(
                    f"{where}.cuda_graphs",
                    scope,
                    "is not a supported CUDA-graph scope",
                    f"use one of {sorted(GRAPH_SCOPES)}",
                )
        for name, tbl in self.gpus.items():
            if not isinstance(tbl, Mapping):
                raise field_error(f"{where}.gpus.{name}", tbl, "must be a table of GPU fields")
            gpu_spec_from_table(name, tbl, f"{where}.gpus.{name}")

    def recipe(self) -> Recipe | None:
        """The low-precision recipe this section runs (:func:`~hetero_ns3.compute.recipes.recipe_for`); None in
        BF16 / FP16."""
        return recipe_for(self.precision, self.fp8_recipe)

    def param_gather_bytes(self) -> float:
        """Bytes per element of a linear layer's weight in the parameter all-gathers and in HBM: the recipe's
        (:attr:`~hetero_ns3.compute.recipes.Recipe.param_gather_bytes`) under ``fp8_param_gather``, else 2 (BF16)."""
        recipe = self.recipe()
        if self.fp8_param_gather and recipe is not None and recipe.param_gather_bytes > 0:
            return recipe.param_gather_bytes
        return 2.0

    def host_model(self) -> HostModel:
        """The host issue model this section describes (off unless ``host_op``, ``host_launch`` or
        ``host_sync_gap`` > 0)."""
        return HostModel(
            float(self.host_op),
            float(self.host_launch),
            float(self.host_graph),
            bool(self.moe_host_sync),
            tuple(dict.fromkeys(self.cuda_graphs)),
            float(self.host_sync_gap),
            recipe.expert_cast_launches if (recipe := self.recipe()) else 0,
            float(self.host_sync_jitter),
        )

    def extra_gpus(self) -> dict[str, GpuSpec]:
        """User-defined GPU types of this section."""
        return {n: gpu_spec_from_table(n, t, f"compute.gpus.{n}") for n, t in self.gpus.items()}

    def roofline(self, base_dir: Path | None = None) -> Roofline:
        """The Roofline model this section describes (measured table read relative to ``base_dir``)."""
        measured = None
        if self.efficiency_table:
            p = Path(self.efficiency_table)
            if not p.is_absolute() and base_dir is not None:
                p = base_dir / p
            measured = load_efficiency_csv(p)
        return Roofline(
            self.precision,
            measured,
            self.launch_overhead,
            attention_kernel=self.attention_kernel,
            fp8_recipe=self.fp8_recipe,
            sustained=None if self.sustained is None else float(self.sustained),
            cudnn=self.cudnn,
        )
