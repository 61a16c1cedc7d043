"""Roofline timing of training kernels on a GPU type.

``time = max(work x FLOPs / (peak x e_compute), bytes / (HBM bandwidth x e_memory)) + launch``

* GEMMs: ``e_compute = gemm x shape x waves``, with ``shape = prod_d d / (d + gemm_dim_half)`` over the
  m, n, k dimensions (small dimensions starve the tensor cores) and ``waves`` the best tile
  quantization over a few output-tile sizes (tiles / (ceil(tiles / SMs) x SMs), smaller tiles
  penalized 5% per halving).
* Attention: flash-attention-like kernels at ``attention_fwd`` / ``attention_bwd`` of peak times
  ``s / (s + attention_seq_half)`` (sequence length ``s``, the kernel's ``m``), executing ``work`` = 1/2 of
  the model FLOPs under a causal mask (``(n + 1) / (2 n)`` with ``n = ceil(s / attention_causal_tile)`` where
  that tile is set: diagonal tiles run whole); their HBM traffic is Q, K, V, O only. Where
  ``attention_head_tile`` is set the kernel runs the head dimension (the kernel's ``k``) padded to a
  multiple of it (extra work ``padded / hd``) at a measured factor per padded head dimension
  (``attention_head_factors``, 1 at 128). With ``attention_block_rows`` set, the rate is also scaled by the
  kernel's occupancy of the SMs (:func:`attention_occupancy`: its ``batch x heads x ceil(s / rows)`` thread
  blocks scheduled one per SM in grid order).
  Under a causal sliding window of ``w`` keys (``Kernel.window``) the FLOPs count the ``s x w`` band and the
  kernel executes the key tiles of the band (:func:`window_tiles`, or exactly the band's masked fraction
  without a tile law); the sequence-length law reads the length of the causal kernel with as much work per
  query row, the occupancy law row blocks that cost at most the band's key blocks.
* Element-wise (``memory``) kernels: bytes over ``memory`` x HBM bandwidth.
* ``precision = "fp8"`` / ``"fp4"`` follow Transformer Engine (:mod:`hetero_ns3.compute.recipes`): only the linear
  layers' GEMMs (QKV, projection, FC1, FC2: forward, dgrad, wgrad) run at the FP8 / FP4 peak, each forward / dgrad
  GEMM preceded by a memory-bound cast of its input; attention and everything else stays BF16. Under the
  block-scaled recipes (``mxfp8``: 1 x 32 blocks, E8M0 scales; NVFP4: 1 x 16 blocks, E4M3 scales; Blackwell) the
  GEMMs run at ``mxfp8_gemm`` / ``nvfp4_gemm`` times the per-tensor FP8 GEMM's fraction of peak.
* GPUs with a measured matmul ceiling (``mamf_bf16`` / ``mamf_fp8`` in the catalog) get
  ``gemm = mamf_ref_gemm x mamf / mamf_ref``: A100's benchmark GEMM efficiency scaled by the measured
  ratio of their achievable fraction of peak to A100's.

Constants come from the ``[efficiency]`` tables of ``hetero_ns3/data/gpus.toml`` (per architecture);
a measured CSV keyed by (gpu_type, op) replaces them (see :func:`load_efficiency_csv`).
"""

from __future__ import annotations

import csv
import functools
import math
import tomllib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Literal, cast

from hetero_ns3.compute.attention_grid import attention_occupancy, window_tiles
from hetero_ns3.compute.cudnn_era import before
from hetero_ns3.compute.gpus import CATALOG_PATH, GpuSpec
from hetero_ns3.compute.recipes import (
    FP8_RECIPES,
    RECIPES,
    Recipe,
    cast_elements,
    is_fp8_linear,
    quantized_gemm_bytes,
    recipe_for,
)
from hetero_ns3.errors import PlanningError, ScenarioError

OpClass = Literal["gemm", "attention_fwd", "attention_bwd", "memory", "ssd"]
OP_CLASSES: tuple[str, ...] = ("gemm", "attention_fwd", "attention_bwd", "memory")
_TILE_PENALTY = 0.95


@dataclass(frozen=True, slots=True)
class Kernel:
    """One GPU kernel of a training step.

    Attributes:
        name: label (e.g. ``"qkv.dgrad"``).
        op: op class selecting the efficiency: gemm, attention_fwd, attention_bwd, memory or ssd (Mamba-2's scan).
        flops: model FLOPs (Narayanan et al. convention).
        bytes: HBM bytes read + written.
        m, n, k: GEMM shape of one matrix product (gemm); for attention kernels ``m`` is the sequence
            length and ``k`` the head dimension (0 = unknown: no sequence-length or head-dimension factor).
        batch: independent GEMMs of that shape in the kernel (grouped expert GEMMs); for attention kernels the
            sequences x heads the kernel runs (its grid's outer dimension).
        work: fraction of ``flops`` the kernel executes (0.5 for causal flash attention).
        causal: attention under a causal mask (the roofline may replace ``work`` by the tile law of
            ``attention_causal_tile``).
        window: attention under a causal sliding window of this many keys per query (0 = none); ``flops`` then
            count the ``s x window`` band, ``work`` the fraction of it inside the mask (the roofline may replace
            it by the tile law, :func:`window_tiles`).
    """

    name: str
    op: OpClass
    flops: float
    bytes: float
    m: int = 0
    n: int = 0
    k: int = 0
    batch: int = 1
    work: float = 1.0
    causal: bool = False
    window: int = 0


@dataclass(frozen=True)
class Efficiency:
    """Roofline constants of one GPU type (fractions of peak; launch overhead in seconds)."""

    gemm: float
    attention_fwd: float
    attention_bwd: float
    memory: float
    gemm_dim_half: float
    tile_m: int
    tile_n: int
    launch_overhead_s: float
    sustained: float = 1.0
    """Sustained-training factor on tensor-core kernels (GEMM, attention): the ratio of a kernel's rate
    inside an end-to-end training step to its isolated microbenchmark rate (clocks under sustained
    power, stream gaps). Fitted on A100 (Megatron SC'21 Table 1), carried to every generation."""
    gemm_fp8: float | None = None
    """Large-GEMM efficiency with FP8 inputs, fraction of the FP8 peak; None = same as ``gemm``."""
    mxfp8_gemm: float = 0.0
    """Rate of a block-scaled (MXFP8: 1 x 32 blocks, E8M0 scales) FP8 GEMM as a fraction of the per-tensor scaled
    FP8 GEMM's (``gemm_fp8``); 0 = the GPU has no block-scaled tensor cores (``fp8_recipe = "mxfp8"`` is refused)."""
    nvfp4_gemm: float = 0.0
    """An NVFP4 GEMM's fraction of the FP4 peak over the per-tensor FP8 GEMM's fraction of the FP8 peak
    (``gemm_fp8``); 0 = the GPU has no NVFP4 tensor cores (``precision = "fp4"`` is refused)."""
    attention_seq_half: float = 0.0
    """Sequence length (tokens) at which fused attention reaches half its ``attention_fwd`` / ``_bwd``
    efficiency: the factor ``s / (s + attention_seq_half)``; 0 = no sequence-length dependence."""
    attention_causal_tile: float = 0.0
    """Side (tokens) of the tiles a causal mask skips by: a causal kernel computes the ``n (n + 1) / 2`` tiles
    on and below the diagonal of ``n = ceil(s / tile)``, i.e. ``(n + 1) / (2 n)`` of the full square's work
    (diagonal tiles run whole); 0 = exactly half."""
    attention_block_rows: int = 0
    """Query rows per thread block of the fused attention kernels (the backward: key rows); with it set, a kernel's
    ``batch x heads x ceil(s / rows)`` blocks are scheduled onto the SMs one block per SM in grid order, each
    taking time in proportion to its key (query) blocks (all ``n`` under a full mask, ``i + 1`` for row block
    ``i`` under a causal one), and the rate is scaled by the busy fraction of the SMs; 0 = full occupancy."""
    attention_head_tile: int = 0
    """Granularity (elements) the fused attention kernels pad the head dimension to: a head dimension ``hd``
    runs as ``ceil(hd / tile) x tile`` (executed work ``x padded / hd``); 0 = no padding."""
    attention_head_factors: tuple[tuple[int, float, float], ...] = ()
    """``(padded head dimension, forward factor, backward factor)`` rows, ascending, multiplying
    ``attention_fwd`` / ``attention_bwd`` (which hold at head dimension 128, factor 1); linear between rows,
    the end rows beyond them; empty = no head-dimension dependence."""
    ssd: float = 0.0
    """Rate of Mamba-2's SSD scan kernels (op ``ssd``) as a fraction of the dense BF16 tensor peak, with their FLOPs
    counted over the intra-chunk product's causal half (:mod:`hetero_ns3.workload.mamba`); no shape law."""

    def head_factor(self, op: str, head_dim: int) -> float:
        """Factor on the efficiency of attention kernel ``op`` (``attention_fwd`` or ``attention_bwd``) at
        ``head_dim`` elements, padded per ``attention_head_tile``; 1 without rows or for an unknown head dim (0)."""
        rows = self.attention_head_factors
        if not rows or not head_dim:
            return 1.0
        hd = self.padded_head_dim(head_dim)
        col = 1 if op == "attention_fwd" else 2
        if hd <= rows[0][0]:
            return rows[0][col]
        for lo, hi in zip(rows, rows[1:], strict=False):
            if hd <= hi[0]:
                return lo[col] + (hi[col] - lo[col]) * (hd - lo[0]) / (hi[0] - lo[0])
        return rows[-1][col]

    def padded_head_dim(self, head_dim: int) -> int:
        """``head_dim`` rounded up to a multiple of ``attention_head_tile`` (unchanged where it is 0)."""
        t = self.attention_head_tile
        return -(-head_dim // t) * t if t else head_dim

    def compute_eff(self, op: str, precision: str = "bf16") -> float:
        if op == "memory":
            return 1.0
        if op == "gemm" and precision in ("fp8", "fp4") and self.gemm_fp8 is not None:
            return self.gemm_fp8
        return float(getattr(self, op))


@functools.cache
def _catalog_tables() -> Mapping[str, Any]:
    with open(CATALOG_PATH, "rb") as fh:
        return tomllib.load(fh)


def _eff_tables() -> Mapping[str, Mapping[str, float]]:
    return _catalog_tables().get("efficiency", {})


def cudnn_era_table(architecture: str) -> Mapping[str, Any]:
    """The catalog's ``[cudnn_era.<architecture>]`` table (the attention constants of cuDNN releases before its
    ``before``; empty when the architecture has none)."""
    return _catalog_tables().get("cudnn_era", {}).get(architecture, {})


def cudnn_era_efficiency(gpu: GpuSpec, e: Efficiency, cudnn: str | None) -> Efficiency:
    """``e`` with the attention constants of cuDNN release ``cudnn`` (:func:`cudnn_era_table`): those of the older
    era when the release lies before the era's ``before`` and ``gpu`` takes its attention from its architecture's
    table (no attention constants of its own), else ``e``. None: the newest release the catalog describes."""
    era = cudnn_era_table(gpu.architecture)
    if cudnn is None or not era or "attention_fwd" in efficiency_table(gpu.name):
        return e
    if not before(cudnn, str(era["before"])):
        return e
    return replace(
        e,
        attention_fwd=float(era["attention_fwd"]),
        attention_bwd=float(era["attention_bwd"]),
        attention_seq_half=float(era["attention_seq_half"]),
        attention_causal_tile=float(era["attention_causal_tile"]),
    )


def efficiency_table(name: str) -> Mapping[str, float]:
    """The catalog's ``[efficiency.<name>]`` table as written (an architecture, a GPU type or ``default``;
    empty when absent)."""
    return _eff_tables().get(name, {})


def default_efficiency(gpu: GpuSpec) -> Efficiency:
    """The catalog efficiency constants for ``gpu``: its own table where the catalog has one (keyed by the GPU's
    name: constants fitted to that GPU's published kernels), over its architecture's, over ``default``."""
    tables = _eff_tables()
    merged = {**tables.get("default", {}), **tables.get(gpu.architecture, {}), **tables.get(gpu.name, {})}
    gemm = float(merged["gemm"])
    gemm_fp8 = None
    ref, ref_gemm = merged.get("mamf_ref"), merged.get("mamf_ref_gemm")
    if ref and ref_gemm:
        if gpu.mamf_bf16 is not None:
            gemm = float(ref_gemm) * (gpu.mamf_bf16 / float(ref))
        if gpu.mamf_fp8 is not None:
            gemm_fp8 = float(ref_gemm) * (gpu.mamf_fp8 / float(ref))
    return Efficiency(
        gemm=gemm,
        attention_fwd=float(merged["attention_fwd"]),
        attention_bwd=float(merged["attention_bwd"]),
        memory=float(merged["memory"]),
        gemm_dim_half=float(merged["gemm_dim_half"]),
        tile_m=int(merged["tile_m"]),
        tile_n=int(merged["tile_n"]),
        launch_overhead_s=float(merged["launch_overhead_us"]) * 1e-6,
        sustained=float(merged.get("sustained", 1.0)),
        ssd=float(merged.get("ssd", 0.0)),
        gemm_fp8=gemm_fp8,
        mxfp8_gemm=float(merged.get("mxfp8_gemm", 0.0)),
        nvfp4_gemm=float(merged.get("nvfp4_gemm", 0.0)),
        attention_seq_half=float(merged.get("attention_seq_half", 0.0)),
        attention_causal_tile=float(merged.get("attention_causal_tile", 0.0)),
        attention_block_rows=int(merged.get("attention_block_rows", 0)),
        attention_head_tile=int(merged.get("attention_head_tile", 0)),
        attention_head_factors=tuple(
            (int(hd), float(f), float(b))
            for hd, f, b in cast("list[list[float]]", merged.get("attention_head_factors", []))
        ),
    )


def flash2_efficiency(gpu: GpuSpec, e: Efficiency) -> Efficiency:
    """``e`` with FlashAttention-2's attention constants where ``gpu``'s architecture has them (Hopper), else ``e``.

    The cuDNN-measured head-dimension factors are dropped with them (FlashAttention-2 pads to its own tiles); the
    sequence-length, causal-tile and occupancy laws stay (how any flash kernel's grid runs)."""
    merged = {**_eff_tables().get("default", {}), **_eff_tables().get(gpu.architecture, {})}
    if "flash2_attention_fwd" not in merged:
        return e
    return replace(
        e,
        attention_fwd=float(merged["flash2_attention_fwd"]),
        attention_bwd=float(merged["flash2_attention_bwd"]),
        attention_head_tile=0,
        attention_head_factors=(),
    )


@dataclass(frozen=True)
class MeasuredEfficiency:
    """Measured efficiencies keyed by (gpu_type, op); None entries keep the default."""

    compute: Mapping[tuple[str, str], float]
    memory: Mapping[tuple[str, str], float]


def load_efficiency_csv(path: str | Path) -> MeasuredEfficiency:
    """Read a CSV with columns ``gpu_type, op, compute_efficiency, memory_efficiency``.

    ``op`` is one of gemm, attention_fwd, attention_bwd, memory; an empty cell keeps the default;
    efficiencies must lie in (0, 1]. Errors name the file, row and column.
    """
    p = Path(path)
    if not p.is_file():
        raise ScenarioError(f"compute.efficiency_table ({str(path)!r}) does not exist")
    comp: dict[tuple[str, str], float] = {}
    mem: dict[tuple[str, str], float] = {}
    with open(p, newline="") as fh:
        reader = csv.DictReader(fh)
        need = {"gpu_type", "op"}
        if not reader.fieldnames or not need <= set(reader.fieldnames):
            raise ScenarioError(f"{p}: header must include gpu_type, op, compute_efficiency, memory_efficiency")
        for i, row in enumerate(reader, start=2):
            op = (row.get("op") or "").strip()
            if op not in OP_CLASSES:
                raise ScenarioError(f"{p}:{i}: op ({op!r}) must be one of {list(OP_CLASSES)}")
            key = ((row.get("gpu_type") or "").strip(), op)
            for col, dst in (("compute_efficiency", comp), ("memory_efficiency", mem)):
                cell = (row.get(col) or "").strip()
                if not cell:
                    continue
                try:
                    v = float(cell)
                except ValueError as err:
                    raise ScenarioError(f"{p}:{i}: {col} ({cell!r}) is not a number") from err
                if not 0 < v <= 1:
                    raise ScenarioError(f"{p}:{i}: {col} ({v}) must be in (0, 1]")
                dst[key] = v
    return MeasuredEfficiency(comp, mem)


def _window_length(k: Kernel, e: Efficiency) -> float:
    """Sequence length the sequence-length law reads for windowed kernel ``k``: that of the causal kernel doing
    as much work per query row, ``s x`` (the window's executed tiles / the causal square's), or the same ratio
    of masked pairs without a tile law; ``s`` again as the window grows to ``s``."""
    s, w = k.m, k.window
    tile = int(e.attention_causal_tile)
    if tile:
        n = math.ceil(s / tile)
        return s * window_tiles(s, w, tile) / (n * (n + 1) / 2)
    return s * (w * s - w * (w - 1) / 2) / (s * (s + 1) / 2)


def _shape_factor(eff: Efficiency, dims: Iterable[int]) -> float:
    f = 1.0
    for d in dims:
        f *= d / (d + eff.gemm_dim_half)
    return f


def _wave_factor(eff: Efficiency, m: int, n: int, sms: int) -> float:
    if sms <= 0:
        return 1.0
    best = 0.0
    tm, tn, penalty = eff.tile_m, eff.tile_n, 1.0
    for _ in range(3):
        tiles = math.ceil(m / tm) * math.ceil(n / tn)
        waves = math.ceil(tiles / sms)
        best = max(best, penalty * tiles / (waves * sms))
        tm, tn, penalty = max(16, tm // 2) if tn <= tm else tm, max(16, tn // 2), penalty * _TILE_PENALTY
    return best


def require_block_scaling(gpu: GpuSpec, e: Efficiency | None = None, recipe: str = "mxfp8") -> None:
    """PlanningError naming the GPU, the field and the fix unless ``gpu`` (constants ``e``, the catalog's when None)
    has the block-scaled tensor cores ``recipe`` (``mxfp8`` or ``nvfp4``) needs: its ``gemm_factor`` > 0."""
    r = RECIPES[recipe]
    if getattr(e or default_efficiency(gpu), r.gemm_factor) <= 0:
        raise PlanningError(r.refusal.format(gpu=gpu.name, arch=gpu.architecture))


class Roofline:
    """Kernel timing for one precision, optionally with measured efficiencies.

    Args:
        precision: bf16, fp16, fp8 or fp4. Under fp8 / fp4 only linear-layer GEMMs (:func:`is_fp8_linear`) use
            the FP8 / FP4 peak, plus a cast of their input (:class:`Recipe`); every other kernel runs in BF16.
        measured: table from :func:`load_efficiency_csv`; its entries replace the defaults.
        launch_overhead_s: replaces every GPU's per-kernel launch overhead when given.
        efficiency: whole constant sets by GPU type name, replacing the catalog's (fits, sensitivity
            studies); ``launch_overhead_s`` still applies to them.
        attention_kernel: fused-attention kernel family: ``auto`` (the architecture's constants: cuDNN's on
            Hopper, measured; FlashAttention-2's on Ampere) or ``flash2`` (:func:`flash2_efficiency` applied to
            the catalog constants).
        fp8_recipe: FP8 scaling under ``precision = "fp8"``: ``delayed`` (scales from the amax history, the
            amax taken inside the cast), ``current`` (each cast first reads its input for the amax, one launch
            more) or ``mxfp8`` (1 x 32 block scaling: the cast also writes the scales, no amax pass, and the FP8
            GEMMs run at the GPU's ``mxfp8_gemm`` fraction of the per-tensor rate; refused on GPUs without
            block-scaled tensor cores); ``precision = "fp4"`` runs NVFP4 (``nvfp4_gemm``). Bytes per recipe:
            :data:`hetero_ns3.compute.recipes.RECIPES`.
        sustained: replaces every GPU's ``sustained`` factor when given (``[compute] sustained``), like
            ``launch_overhead_s`` also for constant sets given in ``efficiency``.
        cudnn: the cuDNN release the fused attention comes from (``[compute] cudnn``, e.g. ``"9.13.1"``): an
            architecture's older attention constants apply below its era boundary (:func:`cudnn_era_efficiency`);
            None: the newest.
    """

    def __init__(
        self,
        precision: str = "bf16",
        measured: MeasuredEfficiency | None = None,
        launch_overhead_s: float | None = None,
        efficiency: Mapping[str, Efficiency] | None = None,
        attention_kernel: str = "auto",
        fp8_recipe: str = "delayed",
        sustained: float | None = None,
        cudnn: str | None = None,
    ) -> None:
        if fp8_recipe not in FP8_RECIPES:
            raise ValueError(f"fp8_recipe {fp8_recipe!r}: use one of {FP8_RECIPES}")
        self.precision = precision
        self.recipe: Recipe | None = recipe_for(precision, fp8_recipe)
        self.measured = measured
        self.launch_overhead_s = launch_overhead_s
        self.sustained = sustained
        self.attention_kernel = attention_kernel
        self.cudnn = cudnn
        self._given = dict(efficiency or {})
        self._eff: dict[str, Efficiency] = {}

    def efficiency(self, gpu: GpuSpec) -> Efficiency:
        """Efficiency constants in force for ``gpu``."""
        if gpu.name not in self._eff:
            e = self._given.get(gpu.name) or default_efficiency(gpu)
            if self.attention_kernel == "flash2" and gpu.name not in self._given:
                e = flash2_efficiency(gpu, e)
            elif gpu.name not in self._given:
                e = cudnn_era_efficiency(gpu, e, self.cudnn)
            if self.launch_overhead_s is not None:
                e = replace(e, launch_overhead_s=self.launch_overhead_s)
            if self.sustained is not None:
                e = replace(e, sustained=self.sustained)
            self._eff[gpu.name] = e
        return self._eff[gpu.name]

    def kernel_precision(self, k: Kernel) -> str:
        """Precision ``k`` runs in: fp8 / fp4 only for linear-layer GEMMs of an fp8 / fp4 roofline, else bf16."""
        if self.recipe is not None and not is_fp8_linear(k):
            return "bf16"
        return self.precision

    def _comp_eff(self, gpu: GpuSpec, k: Kernel, e: Efficiency, precision: str) -> float:
        if self.measured and (gpu.name, k.op) in self.measured.compute:
            base = self.measured.compute[(gpu.name, k.op)]
        else:
            base = e.compute_eff(k.op, precision)
        base *= e.sustained
        if k.op == "gemm" and self.recipe is not None and precision == self.recipe.peak and self.recipe.gemm_factor:
            require_block_scaling(gpu, e, self.recipe.name)
            base *= getattr(e, self.recipe.gemm_factor)
        if k.op == "gemm":
            base *= _shape_factor(e, (k.m, k.n, k.k)) * _wave_factor(e, k.m, k.n * k.batch, gpu.sm_count)
        else:
            if e.attention_seq_half and k.m:
                length = _window_length(k, e) if k.window else k.m
                base *= length / (length + e.attention_seq_half)
            base *= e.head_factor(k.op, k.k)
            if e.attention_block_rows and k.m:
                rows = e.attention_block_rows
                band = -(-k.window // rows) + 1 if k.window else 0
                base *= attention_occupancy(k.batch, -(-k.m // rows), k.causal, gpu.sm_count, band)
        return base

    def _mem_eff(self, gpu: GpuSpec, k: Kernel, e: Efficiency) -> float:
        if self.measured and (gpu.name, k.op) in self.measured.memory:
            return self.measured.memory[(gpu.name, k.op)]
        return e.memory

    def work_fraction(self, k: Kernel, gpu: GpuSpec) -> float:
        """The share of kernel ``k``'s FLOPs the GPU executes: the tiles of the causal triangle or the window's band
        that a fused attention kernel visits (``attention_causal_tile``), times the head dimension padded to the
        kernel's tile over the real one (``attention_head_tile``); ``k.work`` where neither applies (1 for a GEMM)."""
        e = self.efficiency(gpu)
        work = k.work
        if k.window and e.attention_causal_tile and k.m:
            n = math.ceil(k.m / e.attention_causal_tile)
            work = window_tiles(k.m, k.window, int(e.attention_causal_tile)) / (n * n) * k.m / k.window
        elif k.causal and e.attention_causal_tile and k.m:
            n = math.ceil(k.m / e.attention_causal_tile)
            work = (n + 1) / (2 * n)
        if k.op != "gemm" and k.k and e.attention_head_tile:
            work *= e.padded_head_dim(k.k) / k.k
        return work

    def kernel_time(self, k: Kernel, gpu: GpuSpec) -> float:
        """Seconds kernel ``k`` takes on ``gpu``."""
        e = self.efficiency(gpu)
        prec = self.kernel_precision(k)
        recipe = self.recipe if prec != "bf16" and k.op == "gemm" else None
        nbytes = quantized_gemm_bytes(k, recipe) if recipe else k.bytes
        bw = gpu.hbm_bw_Bps * self._mem_eff(gpu, k, e)
        t_mem = nbytes / bw if nbytes else 0.0
        t_comp = 0.0
        if k.flops and k.op != "memory":
            work = self.work_fraction(k, gpu)
            t_comp = k.flops * work / (gpu.peak_flops(prec) * self._comp_eff(gpu, k, e, prec))
        t = max(t_comp, t_mem) + e.launch_overhead_s
        elements = cast_elements(k) if recipe else 0
        if recipe and elements:
            per_expert = recipe.grouped_cast_launches(k.batch)
            if per_expert:
                # Quantized expert by expert: the same bytes, a launch per kernel per expert (recipes.RECIPES).
                t += (recipe.cast_bytes + recipe.amax_bytes) * elements / (gpu.hbm_bw_Bps * e.memory)
                t += per_expert * e.launch_overhead_s
            else:
                t += recipe.cast_bytes * elements / (gpu.hbm_bw_Bps * e.memory) + e.launch_overhead_s
                if recipe.amax_bytes:
                    t += recipe.amax_bytes * elements / (gpu.hbm_bw_Bps * e.memory) + e.launch_overhead_s
        return t

    def time(self, kernels: Iterable[Kernel], gpu: GpuSpec) -> tuple[float, float, float]:
        """(FLOPs, bytes, seconds) of running ``kernels`` back to back on ``gpu``."""
        f = b = t = 0.0
        for k in kernels:
            f += k.flops
            b += k.bytes
            t += self.kernel_time(k, gpu)
        return f, b, t
