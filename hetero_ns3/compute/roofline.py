"""Roofline timing of training kernels on a GPU type.

``time = max(work x FLOPs / (peak x e_compute), bytes / (HBM bandwidth x e_memory)) + launch``

* GEMMs: ``e_compute = gemm x shape x waves``, with ``shape = prod_d d / (d + gemm_dim_half)`` over the
  m, n, k dimensions (small dimensions starve the tensor cores) and ``waves`` the best tile
  quantization over a few output-tile sizes (tiles / (ceil(tiles / SMs) x SMs), smaller tiles
  penalized 5% per halving).
* Attention: flash-attention-like kernels at ``attention_fwd`` / ``attention_bwd`` of peak, executing
  ``work`` = 1/2 of the model FLOPs under a causal mask; their HBM traffic is Q, K, V, O only.
* Element-wise (``memory``) kernels: bytes over ``memory`` x HBM bandwidth.

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
from typing import Literal

from hetero_ns3.compute.gpus import CATALOG_PATH, GpuSpec
from hetero_ns3.errors import ScenarioError

OpClass = Literal["gemm", "attention_fwd", "attention_bwd", "memory"]
OP_CLASSES: tuple[str, ...] = ("gemm", "attention_fwd", "attention_bwd", "memory")
_TILE_PENALTY = 0.95


@dataclass(frozen=True, slots=True)
class Kernel:
    """One GPU kernel of a training step.

    Attributes:
        name: label (e.g. ``"qkv.dgrad"``).
        op: op class selecting the efficiency: gemm, attention_fwd, attention_bwd or memory.
        flops: model FLOPs (Narayanan et al. convention).
        bytes: HBM bytes read + written.
        m, n, k: GEMM shape of one matrix product (gemm only).
        batch: independent GEMMs of that shape in the kernel (grouped expert GEMMs).
        work: fraction of ``flops`` the kernel executes (0.5 for causal flash attention).
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

    def compute_eff(self, op: str) -> float:
        return float(getattr(self, op)) if op != "memory" else 1.0


@functools.cache
def _eff_tables() -> Mapping[str, Mapping[str, float]]:
    with open(CATALOG_PATH, "rb") as fh:
        return tomllib.load(fh).get("efficiency", {})


def default_efficiency(gpu: GpuSpec) -> Efficiency:
    """The catalog efficiency constants for ``gpu``'s architecture (``default`` filling gaps)."""
    tables = _eff_tables()
    merged = {**tables.get("default", {}), **tables.get(gpu.architecture, {})}
    return Efficiency(
        gemm=float(merged["gemm"]),
        attention_fwd=float(merged["attention_fwd"]),
        attention_bwd=float(merged["attention_bwd"]),
        memory=float(merged["memory"]),
        gemm_dim_half=float(merged["gemm_dim_half"]),
        tile_m=int(merged["tile_m"]),
        tile_n=int(merged["tile_n"]),
        launch_overhead_s=float(merged["launch_overhead_us"]) * 1e-6,
        sustained=float(merged.get("sustained", 1.0)),
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


class Roofline:
    """Kernel timing for one precision, optionally with measured efficiencies.

    Args:
        precision: bf16, fp16 or fp8 (which peak the tensor-core work uses).
        measured: table from :func:`load_efficiency_csv`; its entries replace the defaults.
        launch_overhead_s: replaces every GPU's per-kernel launch overhead when given.
    """

    def __init__(
        self,
        precision: str = "bf16",
        measured: MeasuredEfficiency | None = None,
        launch_overhead_s: float | None = None,
    ) -> None:
        self.precision = precision
        self.measured = measured
        self.launch_overhead_s = launch_overhead_s
        self._eff: dict[str, Efficiency] = {}

    def efficiency(self, gpu: GpuSpec) -> Efficiency:
        """Efficiency constants in force for ``gpu``."""
        if gpu.name not in self._eff:
            e = default_efficiency(gpu)
            if self.launch_overhead_s is not None:
                e = replace(e, launch_overhead_s=self.launch_overhead_s)
            self._eff[gpu.name] = e
        return self._eff[gpu.name]

    def _comp_eff(self, gpu: GpuSpec, k: Kernel, e: Efficiency) -> float:
        if self.measured and (gpu.name, k.op) in self.measured.compute:
            base = self.measured.compute[(gpu.name, k.op)]
        else:
            base = e.compute_eff(k.op)
        base *= e.sustained
        if k.op == "gemm":
            base *= _shape_factor(e, (k.m, k.n, k.k)) * _wave_factor(e, k.m, k.n * k.batch, gpu.sm_count)
        return base

    def _mem_eff(self, gpu: GpuSpec, k: Kernel, e: Efficiency) -> float:
        if self.measured and (gpu.name, k.op) in self.measured.memory:
            return self.measured.memory[(gpu.name, k.op)]
        return e.memory

    def kernel_time(self, k: Kernel, gpu: GpuSpec) -> float:
        """Seconds kernel ``k`` takes on ``gpu``."""
        e = self.efficiency(gpu)
        t_mem = k.bytes / (gpu.hbm_bw_Bps * self._mem_eff(gpu, k, e)) if k.bytes else 0.0
        t_comp = 0.0
        if k.flops and k.op != "memory":
            t_comp = k.flops * k.work / (gpu.peak_flops(self.precision) * self._comp_eff(gpu, k, e))
        return max(t_comp, t_mem) + e.launch_overhead_s

    def time(self, kernels: Iterable[Kernel], gpu: GpuSpec) -> tuple[float, float, float]:
        """(FLOPs, bytes, seconds) of running ``kernels`` back to back on ``gpu``."""
        f = b = t = 0.0
        for k in kernels:
            f += k.flops
            b += k.bytes
            t += self.kernel_time(k, gpu)
        return f, b, t
