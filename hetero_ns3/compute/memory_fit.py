"""Memory-bound kernel efficiency fitted to published kernel times: NVIDIA's normalization benchmarks.

The roofline runs an element-wise (``memory``) kernel in ``bytes / (HBM bandwidth x memory) + launch``
(:mod:`hetero_ns3.compute.roofline`). :func:`fit_memory` fits ``memory`` of one GPU type to published times of such
kernels by a grid search on log time, the launch cost held at the catalog's, as the roofline charges it.

Published table: ``hetero_ns3/data/validation/memory_published.csv`` (source URL at a commit per row), one row per
kernel and pass with the bytes the benchmark counts (read + written) and the bandwidth it reports (GB/s, 10^9 B/s):

* ``cudnn``, ``pytorch``, ``torch_compile``: cudnn-frontend's normalization benchmark (March 2026, NGC PyTorch 25.12
  with cuDNN 9.19.1; kernel device time from the PyTorch profiler), RMSNorm and LayerNorm forward and backward in
  BF16 at the shapes of eleven training recipes (tokens x hidden size; Qwen3's and DeepSeek-V3's head norms too,
  rows of 128), on H200, GB200 and GB300 (GB300's rows check the Blackwell constant, never fitted). PyTorch's
  backward is several kernels of which the bandwidth counts the bytes of one; reported, never fitted.
* ``babelstream``: Azure's HBM bandwidth runs (BabelStream's copy, mul, add, triad and dot, best of 100 runs, the
  default 2^25 doubles per array, which sets the bytes) on A100 80GB, H100, H200 and MI300X: the rate simple
  streams reach, an upper bound for the kernels of a training step, which do more per element.

Fitted (:data:`FITS`): cuDNN's RMSNorm at hidden sizes (rows of at least :data:`FIT_MIN_COLS` elements), forward
and backward, give ``memory`` of the Hopper (H200) and Blackwell (GB200) tables: the HBM and its controller set the
rate, and B200 has GB200's die and memory. Head-norm rows (128 elements), LayerNorm and the other back ends are
reported against the model (:func:`published_residuals`).
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path

from hetero_ns3.compute.gpus import GpuSpec, get_gpu
from hetero_ns3.compute.roofline import Kernel, Roofline, default_efficiency
from hetero_ns3.errors import ScenarioError
from hetero_ns3.inputs import read_csv_rows
from hetero_ns3.paths import PACKAGE_DATA

PUBLISHED_CSV = PACKAGE_DATA / "validation" / "memory_published.csv"
EFFICIENCIES = tuple(round(0.50 + 0.01 * i, 2) for i in range(51))
"""Candidate ``memory`` values (fractions of the HBM bandwidth)."""
FIT_MIN_COLS = 2048
"""Shortest row (elements) of a fitted norm: hidden sizes; head norms (rows of 128) are reported, not fitted."""
FITS = (("H200-SXM", "Hopper"), ("GB200", "Blackwell"))
"""(GPU type whose cuDNN RMSNorm rows are fitted, catalog table whose ``memory`` the fit gives)."""
BACKENDS = ("cudnn", "pytorch", "torch_compile", "babelstream")
KERNELS = ("rmsnorm", "layernorm", "copy", "mul", "add", "triad", "dot")
PASSES = ("fwd", "bwd")
COLUMNS = ("gpu_type", "backend", "software", "kernel", "pass", "rows", "cols", "bytes", "gbps", "source")


@dataclass(frozen=True)
class PublishedKernel:
    """One row of the published table: a memory-bound kernel's bytes and time (s)."""

    gpu_type: str
    backend: str
    software: str
    kernel: str
    direction: str
    rows: int
    cols: int
    bytes: float
    time_s: float
    source: str

    @property
    def fitted(self) -> bool:
        """Whether the row enters a fit of :data:`FITS`: cuDNN's RMSNorm at a hidden size on a fitted GPU."""
        return (
            self.backend == "cudnn"
            and self.kernel == "rmsnorm"
            and self.cols >= FIT_MIN_COLS
            and any(self.gpu_type == g for g, _ in FITS)
        )

    @property
    def fraction(self) -> float:
        """Bandwidth reached, as a fraction of the GPU's HBM bandwidth."""
        return self.bytes / self.time_s / get_gpu(self.gpu_type).hbm_bw_Bps

    def kernel_object(self) -> Kernel:
        """The roofline kernel of this row (op class ``memory``, the benchmark's bytes)."""
        return Kernel(f"{self.kernel}.{self.direction}", "memory", 0.0, self.bytes)


@dataclass(frozen=True)
class MemoryFit:
    """``memory`` fitted to ``cases`` kernels, with the RMS and worst log error (percent) over them."""

    memory: float
    rms_pct: float
    worst_pct: float
    cases: int


def load_published(path: str | Path | None = None) -> tuple[PublishedKernel, ...]:
    """Rows of the published table. Raises ScenarioError naming the bad row and field."""
    p = Path(path) if path is not None else PUBLISHED_CSV
    rows = []
    for i, r in enumerate(read_csv_rows(p, "published memory-kernel table", COLUMNS), start=1):
        for col, allowed in (("backend", BACKENDS), ("kernel", KERNELS), ("pass", PASSES)):
            if r[col] not in allowed:
                raise ScenarioError(f"{p}: data row {i}: {col} {r[col]!r}; use one of {', '.join(allowed)}")
        try:
            n, c, nbytes, gbps = int(r["rows"]), int(r["cols"]), float(r["bytes"]), float(r["gbps"])
        except ValueError as e:
            raise ScenarioError(f"{p}: data row {i}: {e}; rows and cols are integers, bytes and gbps numbers") from None
        if min(n, c) <= 0 or not (math.isfinite(nbytes) and nbytes > 0 and math.isfinite(gbps) and gbps > 0):
            raise ScenarioError(f"{p}: data row {i}: rows, cols, bytes and gbps must be positive and finite")
        try:
            get_gpu(r["gpu_type"])
        except ScenarioError as e:
            raise ScenarioError(f"{p}: data row {i}: {e}") from None
        rows.append(
            PublishedKernel(
                r["gpu_type"],
                r["backend"],
                r["software"],
                r["kernel"],
                r["pass"],
                n,
                c,
                nbytes,
                nbytes / (gbps * 1e9),
                r["source"],
            )
        )
    if not rows:
        raise ScenarioError(f"{p}: no data rows; the fit needs published memory-kernel times")
    return tuple(rows)


def _log_errors(gpu: GpuSpec, memory: float, cases: Sequence[PublishedKernel]) -> list[float]:
    rf = Roofline("bf16", efficiency={gpu.name: replace(default_efficiency(gpu), memory=memory)})
    return [math.log(rf.kernel_time(c.kernel_object(), gpu) / c.time_s) for c in cases]


def fit_memory(gpu_type: str, cases: Sequence[PublishedKernel], effs: Sequence[float] = EFFICIENCIES) -> MemoryFit:
    """Grid fit of ``memory`` (``effs``) to ``cases`` on ``gpu_type``: least squares on log time, the launch cost
    and every other constant held at the catalog's."""
    if not cases:
        raise ScenarioError(f"no memory-bound kernel times to fit for {gpu_type}")
    gpu = get_gpu(gpu_type)
    best = min(effs, key=lambda e: sum(x * x for x in _log_errors(gpu, e, cases)))
    err = _log_errors(gpu, best, cases)
    return MemoryFit(best, 100 * math.sqrt(statistics.fmean(x * x for x in err)), 100 * max(err, key=abs), len(cases))


def fit_published(gpu_type: str, rows: Sequence[PublishedKernel] | None = None) -> MemoryFit:
    """The fit of ``gpu_type``'s fitted published rows (:attr:`PublishedKernel.fitted`)."""
    rows = load_published() if rows is None else rows
    return fit_memory(gpu_type, [r for r in rows if r.gpu_type == gpu_type and r.fitted])


@dataclass(frozen=True)
class PublishedResidual:
    """One published row against the catalog's constants: model / published - 1 (percent)."""

    row: PublishedKernel
    error_pct: float


def published_residuals(rows: Sequence[PublishedKernel] | None = None) -> list[PublishedResidual]:
    """Every published row timed by the catalog roofline (``memory`` and launch as shipped)."""
    rows = load_published() if rows is None else rows
    rf = Roofline("bf16")
    out = []
    for r in rows:
        gpu = get_gpu(r.gpu_type)
        out.append(PublishedResidual(r, 100 * (rf.kernel_time(r.kernel_object(), gpu) / r.time_s - 1)))
    return out
