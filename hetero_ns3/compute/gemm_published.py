"""Published GEMM size curves against the roofline's shape law: a cross-generation check, not a fit.

The roofline runs a GEMM at ``peak x gemm x shape x waves`` (:mod:`hetero_ns3.compute.roofline`): ``gemm`` from each
GPU's measured best-shape ceiling (the MAMF table), ``shape`` and ``waves`` from the dimensions, the same law on
every generation (set on the ratios of CUTLASS's square-GEMM curve, checked on our own H200 measurements). Azure's AI
benchmarking guide times cuBLASLt (hipBLASLt on MI300X) at square sizes 1024-32768 and three model shapes, with
random data after 10,000 warm-up iterations, on five GPU types (FP16 on A100, FP8 on the others): a public curve per
generation for the part of the law no ceiling measures.

Published table: ``hetero_ns3/data/validation/gemm_published.csv`` (source URL at a commit per row). The model's
rate for a row is its roofline time of that product (:func:`model_tflops`): the precision's peak, no launch cost
(the benchmark's loop of asynchronous calls hides it wherever a kernel outlasts the host's issue time), no power
limit (``sustained`` = 1: the ceilings are burst rates), and no FP8 cast (the benchmark's operands are FP8 already:
:func:`hetero_ns3.workload.steps.benchmark_gemm`). Each rate is compared as a fraction of its own GPU's best row,
measured against modelled (:func:`published_residuals`), so the ceiling and the two methods' offset (docs/compute.md
"Azure's method against MAMF") cancel and the shape law is what is left. Rows whose every dimension is at least
:data:`LARGE` are the check; smaller ones are reported (a 2048^3 FP8 product is 17 GFLOP, 7-15 us), also with the
catalog's launch cost added (``with_launch``), the per-call cost a step's kernels pay.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path

from hetero_ns3.compute.gpus import get_gpu
from hetero_ns3.compute.roofline import Roofline, default_efficiency
from hetero_ns3.errors import ScenarioError
from hetero_ns3.inputs import read_csv_rows
from hetero_ns3.paths import PACKAGE_DATA
from hetero_ns3.workload.steps import benchmark_gemm

PUBLISHED_CSV = PACKAGE_DATA / "validation" / "gemm_published.csv"
COLUMNS = ("gpu_type", "precision", "m", "n", "k", "tflops", "software", "source")
PRECISIONS = ("bf16", "fp8")
LARGE = 4096
"""Smallest dimension (elements) of a row the check compares; smaller rows are reported."""
BOUND_PCT = {"MI300X": 13.0}
"""Stated bound (per cent) on a large row's error per GPU type, :data:`DEFAULT_BOUND_PCT` where absent: hipBLASLt's
MI300X curve is not monotonic (16384^3 runs 12% below 8192^3), which no law rising with size follows."""
DEFAULT_BOUND_PCT = 7.0


@dataclass(frozen=True)
class PublishedGemm:
    """One row of the published table: an ``m x n x k`` product's measured rate (TFLOP/s, 10^12 FLOP/s)."""

    gpu_type: str
    precision: str
    m: int
    n: int
    k: int
    tflops: float
    software: str
    source: str

    @property
    def large(self) -> bool:
        """Whether every dimension is at least :data:`LARGE` (a row of the check)."""
        return min(self.m, self.n, self.k) >= LARGE


@dataclass(frozen=True)
class GemmResidual:
    """A published row against the model: both rates, each as a fraction of its GPU's best row, and the error."""

    row: PublishedGemm
    model_tflops: float
    measured_rel: float
    model_rel: float

    @property
    def error_pct(self) -> float:
        """Model over measured, as fractions of each side's best row, minus one, in per cent."""
        return (self.model_rel / self.measured_rel - 1.0) * 100.0


def load_published(path: str | Path | None = None) -> tuple[PublishedGemm, ...]:
    """Rows of the published table. Raises ScenarioError naming the bad row and field."""
    p = Path(path) if path is not None else PUBLISHED_CSV
    rows = []
    for i, r in enumerate(read_csv_rows(p, "published GEMM table", COLUMNS), start=1):
        if r["precision"] not in PRECISIONS:
            raise ScenarioError(f"{p}: data row {i}: precision {r['precision']!r}; use one of {', '.join(PRECISIONS)}")
        try:
            m, n, k, tflops = int(r["m"]), int(r["n"]), int(r["k"]), float(r["tflops"])
        except ValueError as e:
            raise ScenarioError(f"{p}: data row {i}: {e}; m, n and k are integers, tflops a number") from None
        if min(m, n, k) <= 0 or not (math.isfinite(tflops) and tflops > 0):
            raise ScenarioError(f"{p}: data row {i}: m, n, k and tflops must be positive and finite")
        try:
            get_gpu(r["gpu_type"])
        except ScenarioError as e:
            raise ScenarioError(f"{p}: data row {i}: {e}") from None
        if not r["source"].startswith("https://"):
            raise ScenarioError(f"{p}: data row {i}: source {r['source']!r}; give the page's https URL")
        rows.append(PublishedGemm(r["gpu_type"], r["precision"], m, n, k, tflops, r["software"], r["source"]))
    if not rows:
        raise ScenarioError(f"{p}: no data rows; the check needs published GEMM rates")
    return tuple(rows)


def model_tflops(row: PublishedGemm, with_launch: bool = False) -> float:
    """The roofline's rate for ``row``'s product: catalog constants, ``sustained`` 1, no FP8 cast; no launch cost
    unless ``with_launch``."""
    gpu = get_gpu(row.gpu_type)
    eff = replace(default_efficiency(gpu), sustained=1.0)
    if not with_launch:
        eff = replace(eff, launch_overhead_s=0.0)
    rf = Roofline(row.precision, efficiency={gpu.name: eff})
    kernel = benchmark_gemm(row.m, row.n, row.k, row.precision)
    return 2.0 * row.m * row.n * row.k / rf.kernel_time(kernel, gpu) / 1e12


def published_residuals(rows: Sequence[PublishedGemm], with_launch: bool = False) -> list[GemmResidual]:
    """Every row against the model, rates as fractions of the best row of the same GPU type and precision."""
    model = [model_tflops(r, with_launch) for r in rows]
    best_meas: dict[tuple[str, str], float] = {}
    best_model: dict[tuple[str, str], float] = {}
    for r, t in zip(rows, model, strict=True):
        key = (r.gpu_type, r.precision)
        best_meas[key] = max(best_meas.get(key, 0.0), r.tflops)
        best_model[key] = max(best_model.get(key, 0.0), t)
    return [
        GemmResidual(r, t, r.tflops / best_meas[(r.gpu_type, r.precision)], t / best_model[(r.gpu_type, r.precision)])
        for r, t in zip(rows, model, strict=True)
    ]


def out_of_bound(residuals: Sequence[GemmResidual]) -> list[GemmResidual]:
    """The large rows whose error exceeds their GPU type's stated bound."""
    return [r for r in residuals if r.row.large and abs(r.error_pct) > BOUND_PCT.get(r.row.gpu_type, DEFAULT_BOUND_PCT)]
