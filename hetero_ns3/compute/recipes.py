"""Low-precision training recipes of Transformer Engine: which GEMMs they quantize and what their casts cost.

Under ``[compute] precision = "fp8"`` (recipes ``delayed``, ``current``, ``mxfp8``) or ``"fp4"`` (the NVFP4 recipe),
only the GEMMs of Transformer Engine's linear modules run in the low precision (:func:`is_fp8_linear`); each forward
and dgrad GEMM first casts its BF16 input (:func:`cast_elements`), the weight-gradient GEMM reuses the column-wise
copies both casts wrote. A :class:`Recipe` holds what the roofline charges for that: bytes per element of the GEMM's
operands and scales, of the cast and of a separate amax pass, and which efficiency constant scales the GEMM rate.
Weights are quantized once per step (on the first microbatch) and are left out, as is the rest of the step (attention,
norms, the logits GEMM), which stays BF16. Sources per recipe below and in docs/compute.md ("FP8", "MXFP8", "NVFP4").
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from hetero_ns3.compute.roofline import Kernel

FP8_LINEAR_GEMMS = frozenset(
    {"qkv", "proj", "fc1", "fc2", "q_down", "kv_down", "q_up", "kv_up", "mtp_proj", "in_proj", "out_proj"}
)
"""Kernel-name stems of the GEMMs Transformer Engine runs in FP8 / FP4 (its Linear / LayerNormLinear / LayerNormMLP /
GroupedLinear modules; the Mamba-2 mixer's input and output projections); names follow ``workload/layers.py`` (``qkv``, ``qkv.dgrad``, ``qkv.wgrad``, ...). The logits
GEMM (Megatron's own output layer), the MoE router and attention's batched products are not TE linear layers and stay
BF16."""
FP8_CAST_BYTES_PER_ELEMENT = 4.0
"""Cast-transpose of one GEMM input to FP8 under delayed scaling: read 2 B (BF16), write 1 B FP8 and
1 B of its FP8 transpose (kept for the other backward GEMM); the amax is reduced inside the same
pass (Transformer Engine, "FP8 Delayed Scaling": one tensor read per quantization)."""
FP8_AMAX_BYTES_PER_ELEMENT = 2.0
"""Current scaling's extra pass per FP8 cast: Transformer Engine computes the tensor's amax in a kernel of its
own (``nvte_compute_amax``, one read of the 2-byte input) before the scale and the cast; delayed scaling takes
the scale from the amax history instead and reduces the new amax inside the cast."""
MXFP8_BLOCK = 32
"""Elements per MXFP8 scaling block (OCP Microscaling Formats v1.0: 1 x 32, one E8M0 byte of scale each)."""
MXFP8_SCALE_BYTES_PER_ELEMENT = 2.0 / MXFP8_BLOCK
"""Scale bytes an MXFP8 cast writes per element: one E8M0 byte per 32-element block of the row-wise copy and one of
the column-wise copy (Transformer Engine's MXFP8 quantizer produces both in the pass that writes the two FP8
copies; the block amax is reduced in registers, so no separate amax pass as under current scaling)."""
NVFP4_BLOCK = 16
"""Elements per NVFP4 scaling block (one E4M3 byte of scale each, under one FP32 scale per tensor)."""
NVFP4_OPERAND_BYTES = 0.5 + 1.0 / NVFP4_BLOCK
"""Bytes per element of an NVFP4 tensor: a 4-bit E2M1 value and 1/16 of its block's E4M3 scale."""
NVFP4_CAST_BYTES_PER_ELEMENT = 2.0 + 2 * NVFP4_OPERAND_BYTES
"""The NVFP4 cast of one GEMM input: read 2 B (BF16), write the row-wise NVFP4 copy and the column-wise one (the
latter after a 16 x 16 random Hadamard transform, for the weight-gradient GEMM) with their scales, in one fused
kernel (Transformer Engine's ``nvte_quantize_with_hadamard_transform``)."""
NVFP4_AMAX_BYTES_PER_ELEMENT = 2.0
"""NVFP4's amax pass before each cast: the per-tensor scale needs the input's amax, and that of its Hadamard
transform for the column-wise copy, both from one read of the 2-byte input (``nvte_hadamard_transform_amax``)."""
CURRENT_SCALING_LAUNCHES_PER_TENSOR = 4
"""Kernels Transformer Engine launches to quantize one tensor under current scaling when nothing is fused with it
(``Float8CurrentScalingQuantizer::quantize_impl``, TE 2.8-2.17): ``zero_amax_kernel`` (one thread), the amax
reduction, ``compute_scale_from_amax_kernel`` (one thread) and the cast-transpose."""


@dataclass(frozen=True)
class Recipe:
    """What one low-precision recipe costs a Transformer Engine linear GEMM.

    Attributes:
        name: the ``[compute]`` value selecting it (``fp8_recipe``, or ``nvfp4`` for ``precision = "fp4"``).
        peak: the GPU peak its GEMMs run at (``fp8`` or ``fp4``, :meth:`GpuSpec.peak_flops`).
        operand_bytes: HBM bytes per element of a quantized GEMM operand, scales excluded.
        scale_bytes: block-scale bytes per operand element (0 under per-tensor scaling).
        cast_bytes: HBM bytes per input element of the cast before a forward / dgrad GEMM (one launch).
        amax_bytes: HBM bytes per input element of a separate amax pass before the cast (0 = none; one launch).
        gemm_factor: the :class:`Efficiency` attribute scaling its GEMMs' rate, a fraction of the per-tensor FP8
            GEMM's fraction of peak ("" = none); a GPU whose value is 0 refuses the recipe.
        saved_bytes: bytes per element of a linear layer's input kept for the backward pass (the quantized copy
            Transformer Engine saves for the weight gradient; 1 for the FP8 recipes, MXFP8's 1/32 B of scales not
            counted).
        refusal: the planning error for a GPU without ``gemm_factor`` (``{gpu}``, ``{arch}`` filled in): the field,
            the value, what the hardware lacks and the fix.
        expert_cast_launches: kernels launched per expert slice when a grouped expert GEMM's input is quantized
            expert by expert (Transformer Engine's ``split_quantize`` loops over the experts for recipes without a
            fused multi-tensor cast); 0 = the group is cast in one fused pass, charged like a single tensor.
        param_gather_bytes: bytes per element of a linear layer's weight in the parameter all-gathers under
            ``[compute] fp8_param_gather`` (Megatron-Core's ``--fp8-param-gather``): 1 under per-tensor FP8, whose
            weights live and travel as FP8; 2 under MXFP8, which Megatron-Core gathers as BF16 into the reused
            gradient buffer and quantizes after (``reuse_grad_buf_for_mxfp8_param_ag``, set with it by
            Megatron-Bridge); 0 where the flag does not apply (NVFP4's ``fp4_param_gather`` is not modelled).
    """

    name: str
    peak: str
    operand_bytes: float
    scale_bytes: float
    cast_bytes: float
    amax_bytes: float
    gemm_factor: str = ""
    saved_bytes: float = 1.0
    refusal: str = ""
    param_gather_bytes: float = 1.0
    expert_cast_launches: int = 0

    def grouped_cast_launches(self, experts: int) -> int:
        """Kernels launched to quantize the input of a grouped GEMM over ``experts`` experts expert by expert; 0 where
        the recipe casts the group in one fused pass (or there is a single expert), which the single-tensor charge
        covers."""
        return self.expert_cast_launches * experts if experts > 1 and self.expert_cast_launches else 0


RECIPES = {
    "delayed": Recipe("delayed", "fp8", 1.0, 0.0, FP8_CAST_BYTES_PER_ELEMENT, 0.0),
    "current": Recipe(
        "current",
        "fp8",
        1.0,
        0.0,
        FP8_CAST_BYTES_PER_ELEMENT,
        FP8_AMAX_BYTES_PER_ELEMENT,
        expert_cast_launches=CURRENT_SCALING_LAUNCHES_PER_TENSOR,
    ),
    "mxfp8": Recipe(
        "mxfp8",
        "fp8",
        1.0,
        1.0 / MXFP8_BLOCK,
        FP8_CAST_BYTES_PER_ELEMENT + MXFP8_SCALE_BYTES_PER_ELEMENT,
        0.0,
        "mxfp8_gemm",
        refusal="compute.fp8_recipe ('mxfp8'): GPU {gpu} ({arch}) has no block-scaled FP8 tensor cores (MXFP8 needs "
        "Blackwell); set compute.fp8_recipe to 'current' or 'delayed'",
        param_gather_bytes=2.0,
        expert_cast_launches=1,
    ),
    "nvfp4": Recipe(
        "nvfp4",
        "fp4",
        0.5,
        1.0 / NVFP4_BLOCK,
        NVFP4_CAST_BYTES_PER_ELEMENT,
        NVFP4_AMAX_BYTES_PER_ELEMENT,
        "nvfp4_gemm",
        NVFP4_OPERAND_BYTES,
        "compute.precision ('fp4'): GPU {gpu} ({arch}) has no NVFP4 tensor cores (NVFP4 needs Blackwell); set "
        "compute.precision to 'fp8' or 'bf16'",
        param_gather_bytes=0.0,
    ),
}
"""The recipes by name: FP8 delayed and current (per-tensor) scaling, MXFP8 (1 x 32 blocks, E8M0 scales) and NVFP4.

Grouped expert GEMMs (``Kernel.batch`` > 1, Transformer Engine's ``GroupedLinear``) quantize their input with
``split_quantize`` (``pytorch/csrc/extensions/cast.cpp``, TE 2.8-2.17; 2.18 adds grouped current-scaling kernels,
``nvte_group_compute_amax_with_config`` and ``nvte_group_quantize``, not modelled): delayed scaling runs one fused
``nvte_multi_cast_transpose`` over all experts and NVFP4 one fused split quantize, charged like one tensor; current
scaling and MXFP8 quantize expert by expert (``multi_tensor_quantize_impl`` fuses only delayed scaling's casts),
:data:`CURRENT_SCALING_LAUNCHES_PER_TENSOR` kernels per expert under current scaling, one under MXFP8."""
FP8_RECIPES = tuple(name for name, r in RECIPES.items() if r.peak == "fp8")
"""The values of ``[compute] fp8_recipe``."""


def recipe_for(precision: str, fp8_recipe: str = "delayed") -> Recipe | None:
    """The recipe a ``[compute]`` section runs: ``fp8_recipe`` under FP8, NVFP4 under FP4, None otherwise."""
    if precision == "fp8":
        return RECIPES[fp8_recipe]
    if precision == "fp4":
        return RECIPES["nvfp4"]
    return None


def is_fp8_linear(k: Kernel) -> bool:
    """Whether ``k`` is a linear-layer GEMM Transformer Engine runs in FP8 / FP4 (forward, dgrad or wgrad)."""
    if k.op != "gemm":
        return False
    stem, _, rest = k.name.partition(".")
    return stem in FP8_LINEAR_GEMMS and rest in ("", "dgrad", "wgrad")


def cast_elements(k: Kernel) -> int:
    """Elements of the input low-precision GEMM ``k`` casts first (its ``m x k`` operand): forward GEMMs cast their
    activation input, dgrad GEMMs the incoming gradient; wgrad GEMMs reuse the copies both casts wrote (0)."""
    if not is_fp8_linear(k) or k.name.endswith(".wgrad"):
        return 0
    return k.m * k.k * k.batch


def quantized_gemm_bytes(k: Kernel, recipe: Recipe) -> float:
    """HBM traffic of GEMM ``k`` under ``recipe``: quantized operands with their block scales, a 2-byte (BF16)
    output."""
    operands = k.m * k.k + k.k * k.n
    return float((operands * recipe.operand_bytes + operands * recipe.scale_bytes + 2 * k.m * k.n) * k.batch)
