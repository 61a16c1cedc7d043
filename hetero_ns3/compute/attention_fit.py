"""Fused-attention constants fitted to attention kernel times: our own H200 measurements and NVIDIA's published ones.

The roofline runs a fused attention kernel at ``peak x attention_fwd (_bwd) x sustained x s / (s +
attention_seq_half) x occupancy``, executing ``(n + 1) / (2 n)`` of the square under a causal mask with ``n =
ceil(s / attention_causal_tile)`` (:mod:`hetero_ns3.compute.roofline`). :func:`fit_attention_cases` fits the four
constants to kernel times by a grid search on log time; :func:`hetero_ns3.compute.measured.fit_attention` feeds it
the tables measured on one H200 (``hetero_ns3/data/measured/h200/``), :func:`fit_published` the published table
below.

Published table: ``hetero_ns3/data/validation/attention_published.csv`` (source URL at a commit per row), BF16
forward and backward times in ms of fused attention (``backend`` ``cudnn``: cuDNN's SDPA; ``flash2``: PyTorch
SDPA's FlashAttention-2) from NVIDIA's cudnn-frontend benchmarks: the SDPA training benchmark on B200, GB200, GB300 and
H200 (head dimension 128, Llama 3.1 405B's grouped-query shapes, batch 1, and batch 2 on GB200 / GB300 in
cuDNN 9.22; and GPT-OSS's shape, head dimension 64 under causal sliding windows of 1024 or 128 tokens, batch 2,
reported, not fitted: :data:`FIT_HEAD_DIM`), and its
first attention benchmark of May 2024 on H200 (PyTorch 24.03 container, cuDNN 9.1.0 against PyTorch's
FlashAttention-2, 16 heads of 128, 4k-64k tokens; times from the published TFLOP/s and the script's FLOP count).
Three timing methods:

* ``events`` (cudnn-frontend 1.13 and 1.15, B200 rows, cuDNN 9.10.2 and 9.13.0): CUDA events around one PyTorch
  SDPA call, which includes PyTorch's dispatch. Below 8192 tokens that shows as a floor (0.10-0.16 ms forward at
  512 tokens where the FLOPs take ~0.01 ms), so only rows of :data:`EVENTS_MIN_SEQ` tokens and more are fitted.
* ``timer`` (May 2024, H200): ``torch.utils.benchmark`` means over 30 calls (ms-long kernels, dispatch hidden).
* ``profiler`` (1.17 on; GB200 and H200 rows, cudnn-frontend 1.18 / 1.19, cuDNN 9.18.1 and 9.19.1): the kernels'
  device time from the PyTorch profiler.

Fitted (:data:`FITS`): B200's cuDNN rows give the Blackwell architecture's table, GB200's (the same die at 1200 W,
measured on cuDNN releases half a year newer; its 9.18 / 9.19 rows, :attr:`FitSpec.software`) its own table, GB300's
(Blackwell Ultra, cuDNN 9.22.0, April 2026; GB200's rows of that release and table are reported) its own, and H200's
PyTorch FlashAttention-2 rows Hopper's
``flash2_attention_fwd`` / ``_bwd`` (the sequence and causal-tile laws held at Hopper's). H200's cuDNN rows are not
fitted: they check the Hopper constants fitted to our own H200 measurements (:data:`CHECK_ONLY`). Every fit and
check applies ``sustained``, as the fits to our own continuous measurements do. Bandwidth-bound parts (the
backward's pre-pass and dQ conversion) are included as the layer programs run them; FLOPs count the query heads.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from hetero_ns3.compute.gpus import GpuSpec, get_gpu
from hetero_ns3.compute.roofline import (
    Efficiency,
    Kernel,
    Roofline,
    cudnn_era_table,
    default_efficiency,
    efficiency_table,
)
from hetero_ns3.errors import ScenarioError
from hetero_ns3.inputs import read_csv_rows
from hetero_ns3.paths import PACKAGE_DATA
from hetero_ns3.workload.layers import flash_attention_kernels

PUBLISHED_CSV = PACKAGE_DATA / "validation" / "attention_published.csv"
CAUSAL_TILES = (0.0, 128.0, 256.0, 384.0)
"""Candidate causal-mask tile sides of the fit (tokens; 0 = exactly half the square)."""
EFFICIENCIES = tuple(round(0.30 + 0.01 * i, 2) for i in range(71))
"""Candidate ``attention_fwd`` / ``attention_bwd`` values (fractions of the dense BF16 peak)."""
MEASURED_HALVES = tuple(25.0 * i for i in range(25))
"""Candidate ``attention_seq_half`` values for our own H200 measurements (0 .. 600 tokens)."""
PUBLISHED_HALVES = tuple(25.0 * i for i in range(81))
"""Candidate ``attention_seq_half`` values for the published tables (0 .. 2000 tokens: B200's optimum is 525)."""
EVENTS_MIN_SEQ = 8192
"""Shortest sequence (tokens) of an ``events``-timed row that enters the fit (PyTorch's dispatch below it)."""
FIT_HEAD_DIM = 128
"""Head dimension of the fitted rows: the constants are those at 128; Blackwell has no head-dimension factors, so
rows at other head dimensions (and sliding windows) are reported against the model, not fitted."""


@dataclass(frozen=True)
class FitSpec:
    """Which published rows give which catalog constants: rows of ``gpu_type`` and ``backend`` (of the
    ``software`` releases only, when given) fit ``[efficiency.<table>]``'s ``<prefix>attention_fwd`` / ``_bwd``
    and, when ``laws``, its ``attention_seq_half`` and ``attention_causal_tile`` too (else those are held at the
    table's)."""

    gpu_type: str
    backend: str
    table: str
    prefix: str = ""
    laws: bool = True
    software: tuple[str, ...] = ()
    cudnn: str | None = None
    """The cuDNN release whose constants the fit gives (``[compute] cudnn``; None: the newest)."""


FITS = (
    # B200's tables (cuDNN 9.10 / 9.13): Blackwell's constants before cuDNN 9.18.1; GB200's (9.18.1 / 9.19.1) since
    FitSpec("B200", "cudnn", "cudnn_era.Blackwell", cudnn="9.13.0"),
    FitSpec("GB200", "cudnn", "Blackwell", software=("cuDNN 9.18.1", "cuDNN 9.19.1")),
    FitSpec("GB300", "cudnn", "GB300"),
    FitSpec("H200-SXM", "flash2", "Hopper", prefix="flash2_", laws=False),
)
"""The published fits (:func:`fit_published`)."""
CHECK_ONLY = (("H200-SXM", "cudnn"),)
"""(GPU type, back end) whose published rows only check constants fitted elsewhere."""
BACKENDS = ("cudnn", "flash2")


def roofline_for(backend: str, software: str = "") -> Roofline:
    """The roofline a published row of ``backend`` is timed with: the catalog's constants for that back end (cuDNN's
    at the row's own release, ``software`` as ``"cuDNN 9.13.0"``, or ``flash2``'s)."""
    if backend == "flash2":
        return Roofline("bf16", attention_kernel="flash2")
    release = software.removeprefix("cuDNN ").strip()
    return Roofline("bf16", cudnn=release if release[:1].isdigit() else None)


def shipped_constants(spec: FitSpec) -> Mapping[str, Any]:
    """The catalog table ``spec`` fits, as written (``[efficiency.<table>]``, or ``[cudnn_era.<architecture>]`` for a
    table named ``cudnn_era.<architecture>``)."""
    if spec.table.startswith("cudnn_era."):
        return cudnn_era_table(spec.table.removeprefix("cudnn_era."))
    return efficiency_table(spec.table)


COLUMNS = (
    "gpu_type",
    "backend",
    "software",
    "timing",
    "batch",
    "heads",
    "kv_heads",
    "seq",
    "head_dim",
    "causal",
    "window",
    "fwd_ms",
    "bwd_ms",
)


@dataclass(frozen=True)
class AttentionFit:
    """Fused-attention constants fitted to kernel times (fractions of peak; tokens), with the RMS and worst log
    error (percent) of each direction over the fitted cases."""

    attention_fwd: float
    attention_bwd: float
    attention_seq_half: float
    attention_causal_tile: float
    rms_fwd_pct: float
    rms_bwd_pct: float
    worst_fwd_pct: float
    worst_bwd_pct: float
    cases: int


@dataclass(frozen=True)
class TimedAttention:
    """One attention shape with its forward and backward kernels and their times (s)."""

    fwd: tuple[Kernel, ...]
    fwd_s: float
    bwd: tuple[Kernel, ...]
    bwd_s: float


@dataclass(frozen=True)
class PublishedRow:
    """One row of the published table (times in seconds)."""

    gpu_type: str
    backend: str
    software: str
    timing: str
    batch: int
    heads: int
    kv_heads: int
    seq: int
    head_dim: int
    causal: bool
    window: int
    fwd_s: float
    bwd_s: float
    source: str

    @property
    def fitted(self) -> bool:
        """Whether the row enters a fit of :data:`FITS`: head dimension FIT_HEAD_DIM, no sliding window, a release
        the fit takes (:attr:`FitSpec.software`), and at least EVENTS_MIN_SEQ tokens under ``events`` timing."""
        spec = _spec(self.gpu_type, self.backend)
        if self.head_dim != FIT_HEAD_DIM or self.window or spec is None:
            return False
        if spec.software and self.software not in spec.software:
            return False
        return self.timing != "events" or self.seq >= EVENTS_MIN_SEQ

    def timed(self) -> TimedAttention:
        """The layer programs' forward and backward kernels for this shape, with the published times."""
        b, s, hq, hkv, hd, w = self.batch, self.seq, self.heads, self.kv_heads, self.head_dim, self.window
        return TimedAttention(
            flash_attention_kernels(b, s, hq, hkv, hd, self.causal, backward=False, window=w),
            self.fwd_s,
            flash_attention_kernels(b, s, hq, hkv, hd, self.causal, backward=True, window=w),
            self.bwd_s,
        )


def load_published(path: str | Path | None = None) -> tuple[PublishedRow, ...]:
    """Rows of the published attention table. Raises ScenarioError naming the bad row and field."""
    p = Path(path) if path is not None else PUBLISHED_CSV
    rows = []
    for i, r in enumerate(read_csv_rows(p, "published attention table", (*COLUMNS, "source")), start=1):
        if r["causal"] not in ("0", "1"):
            raise ScenarioError(f"{p}: data row {i}: causal {r['causal']!r}; use 1 (causal mask) or 0 (none)")
        try:
            row = PublishedRow(
                r["gpu_type"],
                r["backend"],
                r["software"],
                r["timing"],
                batch=int(r["batch"]),
                heads=int(r["heads"]),
                kv_heads=int(r["kv_heads"]),
                seq=int(r["seq"]),
                head_dim=int(r["head_dim"]),
                causal=r["causal"] == "1",
                window=int(r["window"]),
                fwd_s=float(r["fwd_ms"]) / 1e3,
                bwd_s=float(r["bwd_ms"]) / 1e3,
                source=r["source"],
            )
        except ValueError as e:
            raise ScenarioError(f"{p}: data row {i}: {e}; counts are integers and times are ms") from None
        if row.timing not in ("events", "timer", "profiler"):
            raise ScenarioError(f"{p}: data row {i}: timing {row.timing!r}; use 'events', 'timer' or 'profiler'")
        if row.backend not in BACKENDS:
            raise ScenarioError(f"{p}: data row {i}: backend {row.backend!r}; use one of {', '.join(BACKENDS)}")
        if min(row.fwd_s, row.bwd_s) <= 0 or not math.isfinite(row.fwd_s + row.bwd_s):
            raise ScenarioError(f"{p}: data row {i}: times must be positive and finite ms")
        try:
            get_gpu(row.gpu_type)
        except ScenarioError as e:
            raise ScenarioError(f"{p}: data row {i}: {e}") from None
        rows.append(row)
    if not rows:
        raise ScenarioError(f"{p}: no data rows; the fit needs published attention times")
    return tuple(rows)


def _log_errors(
    gpu: GpuSpec,
    base: Efficiency,
    cases: Sequence[TimedAttention],
    tile: float,
    half: float,
    e_fwd: float,
    e_bwd: float,
) -> tuple[list[float], list[float]]:
    eff = replace(
        base,
        attention_fwd=e_fwd,
        attention_bwd=e_bwd,
        attention_seq_half=half,
        attention_causal_tile=tile,
    )
    rf = Roofline("bf16", efficiency={gpu.name: eff})
    ef = [math.log(rf.time(c.fwd, gpu)[2] / c.fwd_s) for c in cases]
    eb = [math.log(rf.time(c.bwd, gpu)[2] / c.bwd_s) for c in cases]
    return ef, eb


def fit_attention_cases(
    gpu_type: str,
    cases: Sequence[TimedAttention],
    halves: Sequence[float] = MEASURED_HALVES,
    effs: Sequence[float] = EFFICIENCIES,
    tiles: Sequence[float] = CAUSAL_TILES,
    base: Efficiency | None = None,
) -> AttentionFit:
    """Grid fit of ``attention_fwd``, ``attention_bwd`` (``effs``), one shared ``attention_seq_half``
    (``halves``) and the causal tile (``tiles``) to ``cases`` on ``gpu_type``: least squares on log
    time over forward and backward, the other constants of ``base`` (default: the catalog's; ``sustained``,
    memory, launch, occupancy) held."""
    if not cases:
        raise ScenarioError(f"no attention times to fit for {gpu_type}")
    gpu = get_gpu(gpu_type)
    base = base or default_efficiency(gpu)
    best: tuple[float, float, float, float, float] | None = None
    for tile in tiles:
        for h in halves:
            e_f = min(effs, key=lambda e: sum(x * x for x in _log_errors(gpu, base, cases, tile, h, e, 0.5)[0]))
            e_b = min(effs, key=lambda e: sum(x * x for x in _log_errors(gpu, base, cases, tile, h, 0.5, e)[1]))
            ef, eb = _log_errors(gpu, base, cases, tile, h, e_f, e_b)
            loss = sum(x * x for x in ef) + sum(x * x for x in eb)
            if best is None or loss < best[0]:
                best = (loss, tile, h, e_f, e_b)
    assert best is not None
    _loss, tile, half, e_f, e_b = best
    ef, eb = _log_errors(gpu, base, cases, tile, half, e_f, e_b)
    return AttentionFit(
        e_f,
        e_b,
        half,
        tile,
        100 * math.sqrt(statistics.fmean(x * x for x in ef)),
        100 * math.sqrt(statistics.fmean(x * x for x in eb)),
        100 * max(ef, key=abs),
        100 * max(eb, key=abs),
        len(cases),
    )


def _spec(gpu_type: str, backend: str) -> FitSpec | None:
    return next((f for f in FITS if (f.gpu_type, f.backend) == (gpu_type, backend)), None)


def fit_published(spec: FitSpec, rows: Sequence[PublishedRow] | None = None) -> AttentionFit:
    """The fit of ``spec``'s fitted published rows (:attr:`PublishedRow.fitted`); without ``spec.laws`` the
    sequence-length half point and the causal tile stay at the catalog table's."""
    rows = load_published() if rows is None else rows
    cases = [r.timed() for r in rows if (r.gpu_type, r.backend) == (spec.gpu_type, spec.backend) and r.fitted]
    if spec.laws:
        return fit_attention_cases(spec.gpu_type, cases, halves=PUBLISHED_HALVES)
    gpu = get_gpu(spec.gpu_type)
    e = roofline_for(spec.backend).efficiency(gpu)
    halves, tiles = (e.attention_seq_half,), (e.attention_causal_tile,)
    return fit_attention_cases(spec.gpu_type, cases, halves=halves, tiles=tiles, base=e)


@dataclass(frozen=True)
class PublishedResidual:
    """One published row against the catalog's constants: model / published - 1 (percent)."""

    row: PublishedRow
    fwd_pct: float
    bwd_pct: float


def published_residuals(rows: Sequence[PublishedRow] | None = None) -> list[PublishedResidual]:
    """Every published row timed with the catalog's constants for its back end (``sustained`` applied, as in the
    fits)."""
    rows = load_published() if rows is None else rows
    out = []
    for r in rows:
        gpu, t, rf = get_gpu(r.gpu_type), r.timed(), roofline_for(r.backend, r.software)
        fwd, bwd = rf.time(t.fwd, gpu)[2], rf.time(t.bwd, gpu)[2]
        out.append(PublishedResidual(r, 100 * (fwd / t.fwd_s - 1), 100 * (bwd / t.bwd_s - 1)))
    return out
