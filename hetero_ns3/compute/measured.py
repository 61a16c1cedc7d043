"""The roofline against kernel times measured on a real GPU (``hetero_ns3/data/measured/<gpu>/``).

``scripts/measure_gpu_kernels.py`` writes the tables on a machine with the GPU; this module reads them and
times the same work with :class:`~hetero_ns3.compute.roofline.Roofline` and the layer programs of
:mod:`hetero_ns3.workload.layers`, so every comparison uses the simulator's own kernels:

* ``gemm``: one product (m x k) @ (k x n), BF16 or FP8 (an FP8 linear GEMM without its input cast:
  the benchmark times ``torch._scaled_mm`` on operands already in FP8);
* ``attention``: one fused attention forward or backward (PyTorch SDPA, cuDNN or flash back end; the
  backward with its pre-pass and dQ conversion kernels, which the measurement times with it);
  ``attention_hd`` the same over head dimensions 64-256 (cuDNN, a later run);
* ``memory``: one element-wise kernel, or the fused Adam step, as bytes over bandwidth;
* ``layer``: one tensor-parallel rank's transformer layer, forward and forward + backward, without
  communication; ``layer_steady`` the same after 10 s of back-to-back layers;
* ``sustained``: the rate of back-to-back 8192^3 GEMMs once the power limit holds, over their rate in
  the first 80 ms from idle, next to the roofline's fitted ``sustained`` factor;
* ``gemm_settled``: six BF16 GEMMs (8192^3 and five linear-layer shapes), each run back to back for 4 s, their
  time per call from 1 s on.

Times are seconds; an error is ``model / measured - 1``. Measurements run the GPU continuously (each
case >= 45 ms after warm-up, the sections back to back), so they sit at the power-limited clock, the
state the roofline's ``sustained`` factor stands for: the model is compared with ``sustained`` applied.
"""

from __future__ import annotations

import csv
import math
import statistics
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path

from hetero_ns3.compute.attention_fit import AttentionFit, TimedAttention, fit_attention_cases
from hetero_ns3.compute.gpus import GpuSpec, get_gpu
from hetero_ns3.compute.roofline import Kernel, Roofline, default_efficiency
from hetero_ns3.paths import PACKAGE_DATA
from hetero_ns3.workload.compiler import CompileSpec, StepPrograms
from hetero_ns3.workload.layers import flash_attention_kernels, gemm
from hetero_ns3.workload.models import ModelSpec
from hetero_ns3.workload.parallel import ParallelismSpec
from hetero_ns3.workload.planner import program_time
from hetero_ns3.workload.steps import benchmark_gemm

MEASURED_DIR = PACKAGE_DATA / "measured"
FUSED_MEMORY_KERNELS = ("copy", "add", "gelu", "layernorm", "rmsnorm", "adam_fused_fp32")
"""Element-wise kernels PyTorch runs as one streaming pass, as the roofline's ``memory`` kernels are modelled.
Reported apart (``memory_unfused``): SwiGLU and dropout + add, two PyTorch kernels each, and softmax, one kernel
that reaches only ~0.27 of HBM bandwidth on rows of 4096."""
BURST_WINDOW_S = 0.08
STEADY_FROM_S = 0.5
SETTLED_FROM_S = 1.0
"""Start (s) of the part of each ``gemm_settled`` shape's 4-s run taken as power-limited."""


@dataclass(frozen=True)
class Residual:
    """One measured case against the roofline (seconds, or a ratio for ``sustained``)."""

    section: str
    case: str
    measured: float
    model: float

    @property
    def error_pct(self) -> float:
        return (self.model / self.measured - 1.0) * 100.0


def read_table(gpu_dir: Path, name: str) -> list[dict[str, str]]:
    """Rows of ``<gpu_dir>/<name>.csv`` (an empty list when the file is absent)."""
    path = gpu_dir / f"{name}.csv"
    if not path.is_file():
        return []
    with open(path, newline="") as fh:
        return list(csv.DictReader(fh))


def gemm_residuals(rows: Iterable[dict[str, str]], gpu: GpuSpec) -> list[Residual]:
    bf16, fp8 = Roofline("bf16"), Roofline("fp8")
    out = []
    for r in rows:
        m, n, k = int(r["m"]), int(r["n"]), int(r["k"])
        if r["dtype"] not in ("bf16", "fp8"):
            continue
        # FP8: no input cast, what _scaled_mm on FP8 operands times
        t = (fp8 if r["dtype"] == "fp8" else bf16).kernel_time(benchmark_gemm(m, n, k, r["dtype"]), gpu)
        label = r["kind"] if r["kind"] == "square" else f"{r['layer']}.{r['pass']} h{r['hidden']} tp{r['tp']}"
        out.append(Residual("gemm", f"{r['dtype']} {label} {r['layout']} {m}x{n}x{k}", float(r["time_s"]), t))
    return out


def attention_kernels(
    b: int, heads: int, s: int, hd: int, causal: bool
) -> tuple[tuple[Kernel, ...], tuple[Kernel, ...]]:
    """Forward and backward fused-attention kernels of the layer programs for [b, heads, s, hd]."""
    return (
        flash_attention_kernels(b, s, heads, heads, hd, causal, backward=False),
        flash_attention_kernels(b, s, heads, heads, hd, causal, backward=True),
    )


def attention_residuals(
    rows: Iterable[dict[str, str]], gpu: GpuSpec, section: str = "attention", rf: Roofline | None = None
) -> list[Residual]:
    rf = rf or Roofline("bf16")
    out = []
    for r in rows:
        b, heads, s, hd, causal = (int(r[c]) for c in ("batch", "heads", "seq", "head_dim", "causal"))
        fwd, bwd = attention_kernels(b, heads, s, hd, bool(causal))
        label = f"{r['backend']} hd{hd} {'causal' if causal else 'full'} b{b} h{heads} s{s}"
        out.append(Residual(section, f"fwd {label}", float(r["fwd_s"]), rf.time(fwd, gpu)[2]))
        out.append(Residual(section, f"bwd {label}", float(r["bwd_s"]), rf.time(bwd, gpu)[2]))
    return out


def memory_residuals(rows: Iterable[dict[str, str]], gpu: GpuSpec) -> list[Residual]:
    rf = Roofline("bf16")
    out = []
    for r in rows:
        section = "memory" if r["kernel"] in FUSED_MEMORY_KERNELS else "memory_unfused"
        t = rf.kernel_time(Kernel(r["kernel"], "memory", 0.0, float(r["bytes"])), gpu)
        out.append(Residual(section, f"{r['kernel']} {int(r['elements']) >> 20}Mi", float(r["time_s"]), t))
    return out


def layer_model(r: dict[str, str]) -> ModelSpec:
    """One layer of the shape in a row of ``layers.csv`` (no biases, dropout or rotary embedding: the measured
    layer applies no position embedding, which ``learned_pos_emb`` expresses, since that table is outside it)."""
    return ModelSpec(
        name=r["layer"],
        layers=1,
        hidden=int(r["hidden"]),
        heads=int(r["heads"]),
        kv_heads=int(r["kv_heads"]),
        ffn_hidden=int(r["ffn"]),
        vocab=32000,
        seq_len=int(r["seq"]),
        gated_mlp=r["gated"] == "1",
        norm="rmsnorm" if r["norm"] == "rmsnorm" else "layernorm",
        learned_pos_emb=True,
    )


def layer_times(r: dict[str, str], gpu_type: str, rf: Roofline | None = None) -> tuple[float, float]:
    """(forward, forward + backward) seconds of one rank's layer for a row of ``layers.csv``, timed as the
    planner times a layer: the compiler's step programs (TP from the row, no sequence parallelism or
    recomputation) through :func:`~hetero_ns3.workload.planner.program_time`."""
    b = int(r["micro_batch"])
    plan = ParallelismSpec(tp=int(r["tp"]), pp=1, global_batch=b, micro_batch=b, recompute="none")
    progs = StepPrograms(CompileSpec(layer_model(r), plan, (1,), (1,), rf or Roofline("bf16"), get_gpu))
    return program_time(progs, gpu_type, ("layer_f",)), program_time(progs, gpu_type, ("layer_f", "layer_b"))


def layer_residuals(rows: Iterable[dict[str, str]], steady: Iterable[dict[str, str]], gpu: GpuSpec) -> list[Residual]:
    out = []
    by_name: dict[str, tuple[float, float]] = {}
    for r in rows:
        fwd, both = layer_times(r, gpu.name)
        by_name[r["layer"]] = (fwd, both)
        out.append(Residual("layer", f"{r['layer']} fwd", float(r["fwd_s"]), fwd))
        out.append(Residual("layer", f"{r['layer']} fwd+bwd", float(r["fwd_bwd_s"]), both))
    runs: dict[str, list[float]] = {}
    for r in steady:
        runs.setdefault(r["layer"], []).append(float(r["fwd_bwd_s"]))
    for name, times in runs.items():
        if name in by_name:
            out.append(Residual("layer_steady", f"{name} fwd+bwd", statistics.median(times), by_name[name][1]))
    return out


def gemm_settled_residuals(rows: Iterable[dict[str, str]], gpu: GpuSpec) -> list[Residual]:
    """Each shape's median time per call from ``SETTLED_FROM_S`` on (back-to-back BF16 GEMMs at the power
    limit) against the roofline's time for that GEMM."""
    rf = Roofline("bf16")
    rates: dict[tuple[str, int, int, int], list[float]] = {}
    for r in rows:
        if float(r["t_s"]) >= SETTLED_FROM_S:
            key = (r["label"], int(r["m"]), int(r["n"]), int(r["k"]))
            rates.setdefault(key, []).append(float(r["tflops"]))
    out = []
    for (label, m, n, k), tf in rates.items():
        measured = 2.0 * m * n * k / (statistics.median(tf) * 1e12)
        out.append(
            Residual("gemm_settled", f"bf16 {label} {m}x{n}x{k}", measured, rf.kernel_time(gemm("gemm", m, n, k), gpu))
        )
    return out


def sustained_residuals(rows: Iterable[dict[str, str]], gpu: GpuSpec) -> list[Residual]:
    """Measured steady / burst GEMM rate per precision against the roofline's ``sustained``."""
    series: dict[str, list[tuple[float, float]]] = {}
    for r in rows:
        series.setdefault(r["dtype"], []).append((float(r["t_s"]), float(r["tflops"])))
    factor = default_efficiency(gpu).sustained
    out = []
    for dtype, pts in series.items():
        burst = [v for t, v in pts if t <= BURST_WINDOW_S]
        steady = [v for t, v in pts if t >= STEADY_FROM_S]
        if burst and steady:
            ratio = statistics.mean(steady) / statistics.mean(burst)
            out.append(Residual("sustained", f"{dtype} 8192^3 steady/burst", ratio, factor))
    return out


def residuals(gpu_type: str = "H200-SXM", gpu_dir: Path | None = None) -> list[Residual]:
    """Every measured case of ``gpu_dir`` (default ``measured/h200``) against the roofline of ``gpu_type``."""
    d = gpu_dir or MEASURED_DIR / "h200"
    gpu = get_gpu(gpu_type)
    return [
        *gemm_residuals(read_table(d, "gemm"), gpu),
        *attention_residuals(read_table(d, "attention"), gpu),
        *attention_residuals(read_table(d, "attention_head_dim"), gpu, section="attention_hd"),
        *attention_residuals(read_table(d, "attention_occupancy"), gpu, section="attention_occ"),
        *memory_residuals(read_table(d, "memory"), gpu),
        *layer_residuals(read_table(d, "layers"), read_table(d, "layer_sustained"), gpu),
        *sustained_residuals(read_table(d, "burst"), gpu),
        *gemm_settled_residuals(read_table(d, "gemm_settled"), gpu),
    ]


def fit_attention(
    gpu_type: str = "H200-SXM",
    gpu_dir: Path | None = None,
    backend: str = "cudnn",
    head_dim: int = 128,
) -> AttentionFit:
    """:func:`~hetero_ns3.compute.attention_fit.fit_attention_cases` (``attention_seq_half`` 0 .. 600 tokens by
    25) on the measured attention of one back end and head dimension, the backward's pre-pass and dQ kernels
    included as the layer programs run them."""
    d = gpu_dir or MEASURED_DIR / "h200"
    rows = [r for r in read_table(d, "attention") if r["backend"] == backend and int(r["head_dim"]) == head_dim]
    cases = []
    for r in rows:
        fwd, bwd = attention_kernels(int(r["batch"]), int(r["heads"]), int(r["seq"]), head_dim, r["causal"] == "1")
        cases.append(TimedAttention(fwd, float(r["fwd_s"]), bwd, float(r["bwd_s"])))
    return fit_attention_cases(gpu_type, cases)


HEAD_TILES = (0, 32, 64)
"""Head-dimension padding granularities :func:`fit_head_dims` compares (elements; 0 = no padding)."""


@dataclass(frozen=True)
class HeadDimFit:
    """Attention factors per padded head dimension fitted to measured kernels, and how well a padding rule
    predicts the head dimensions that are not a multiple of the padding (never fitted to).

    Attributes:
        tile: head-dimension padding granularity the factors were fitted with (elements).
        rows: ``(head dimension, forward factor, backward factor, cases)`` per fitted head dimension (the
            multiples of ``tile`` measured); the factors multiply the catalog's ``attention_fwd`` / ``_bwd``.
        rms_fit: RMS log error (percent) over the fitted cases, forward and backward together.
        rms_padded: ``{tile: RMS log error (percent)}`` over the other head dimensions with the fitted rows,
            for each padding rule of :data:`HEAD_TILES`.
        padded_cases: number of cases behind ``rms_padded``.
    """

    tile: int
    rows: tuple[tuple[int, float, float, int], ...]
    rms_fit: float
    rms_padded: dict[int, float]
    padded_cases: int


def _rms(errs: Sequence[float]) -> float:
    return 100 * math.sqrt(statistics.fmean(x * x for x in errs)) if errs else 0.0


def fit_head_dims(gpu_type: str = "H200-SXM", gpu_dir: Path | None = None, tile: int = 64) -> HeadDimFit:
    """Fit the forward and backward factor of each measured head dimension that is a multiple of ``tile``
    (grid 0.30 .. 1.50 by 0.01, least squares on log time over its cases; the catalog's other attention
    constants held), from ``attention_head_dim.csv`` (cuDNN, head dimensions 64-256); then time the other
    head dimensions with those rows under each padding rule of :data:`HEAD_TILES` (their out-of-fit error)."""
    if tile <= 0:
        raise ValueError(f"tile = {tile}: the head-dimension padding must be a positive number of elements")
    d = gpu_dir or MEASURED_DIR / "h200"
    gpu = get_gpu(gpu_type)
    base = default_efficiency(gpu)
    by_hd: dict[int, list[dict[str, str]]] = {}
    for r in read_table(d, "attention_head_dim"):
        by_hd.setdefault(int(r["head_dim"]), []).append(r)
    grid = [round(0.30 + 0.01 * i, 2) for i in range(121)]

    def errs(
        rows: list[dict[str, str]], t: int, table: tuple[tuple[int, float, float], ...], direction: str = ""
    ) -> list[float]:
        """Log errors of ``rows`` (forward and backward, or only ``direction``) with padding ``t`` and ``table``."""
        eff = replace(base, attention_head_tile=t, attention_head_factors=table)
        res = attention_residuals(rows, gpu, rf=Roofline("bf16", efficiency={gpu.name: eff}))
        return [math.log(x.model / x.measured) for x in res if x.case.startswith(direction)]

    fitted: list[tuple[int, float, float, int]] = []
    fit_errs: list[float] = []
    for hd in sorted(h for h in by_hd if h % tile == 0):
        cases = by_hd[hd]
        # forward and backward are separate kernels: each factor moves only its own direction's times
        f = min(grid, key=lambda v: sum(x * x for x in errs(cases, tile, ((hd, v, 1.0),), "fwd")))
        b = min(grid, key=lambda v: sum(x * x for x in errs(cases, tile, ((hd, f, v),), "bwd")))
        fitted.append((hd, f, b, len(cases)))
        fit_errs += errs(cases, tile, ((hd, f, b),))
    table = tuple((hd, f, b) for hd, f, b, _n in fitted)
    other = [r for hd, rows in by_hd.items() if hd % tile for r in rows]
    return HeadDimFit(
        tile,
        tuple(fitted),
        _rms(fit_errs),
        {t: _rms(errs(other, t, table)) for t in HEAD_TILES},
        len(other),
    )


OCCUPANCY_BANDS = (16384, 49152)
"""Query rows (batch x heads x seq) separating the ``attention_occ`` groups: below the first a grid covers at
most ~one wave of 128-row blocks on 132 SMs (other effects than the block schedule dominate there)."""


BLOCK_ROWS = (0, 64, 128, 256)
"""Query rows per thread block :func:`fit_block_rows` compares (0 = no occupancy law)."""


def fit_block_rows(gpu_type: str = "H200-SXM", gpu_dir: Path | None = None) -> dict[int, tuple[float, float]]:
    """For each candidate of :data:`BLOCK_ROWS`, the RMS log error (percent; forward, backward) over the
    ``attention_occupancy.csv`` cases with at least ``OCCUPANCY_BANDS[0]`` query rows, after removing each
    direction's mean log error (the rate constants are fitted elsewhere; this compares the shape of the law)."""
    d = gpu_dir or MEASURED_DIR / "h200"
    gpu = get_gpu(gpu_type)
    base = default_efficiency(gpu)
    rows = [r for r in read_table(d, "attention_occupancy") if int(r["heads"]) * int(r["seq"]) >= OCCUPANCY_BANDS[0]]
    out = {}
    for cand in BLOCK_ROWS:
        rf = Roofline("bf16", efficiency={gpu.name: replace(base, attention_block_rows=cand)})
        res = attention_residuals(rows, gpu, section="attention_occ", rf=rf)
        rms = []
        for direction in ("fwd", "bwd"):
            logs = [math.log(x.model / x.measured) for x in res if x.case.startswith(direction)]
            mean = statistics.fmean(logs)
            rms.append(_rms([x - mean for x in logs]))
        out[cand] = (rms[0], rms[1])
    return out


@dataclass(frozen=True)
class Group:
    """Errors of a group of cases: count, median, 10th / 90th percentile and worst, in percent."""

    name: str
    n: int
    median: float
    p10: float
    p90: float
    worst: float


def occupancy_band(r: Residual) -> str:
    """``rows<16k``, ``rows<48k`` or ``rows>=48k`` for an ``attention_occ`` case (batch 1)."""
    words = r.case.split()
    heads, seq = int(words[-2].removeprefix("h")), int(words[-1][1:])
    rows = heads * seq
    return "rows<16k" if rows < OCCUPANCY_BANDS[0] else "rows<48k" if rows < OCCUPANCY_BANDS[1] else "rows>=48k"


def group_of(r: Residual) -> str:
    """Summary group of a case: GEMMs by precision, pass and size, attention by back end and direction, the
    head-dimension sweep by direction and head dimension."""
    words = r.case.split()
    if r.section == "gemm":
        dtype, what = words[0], words[1]
        m, n, k = (int(x) for x in words[-1].split("x"))
        size = "large" if min(m, n, k) >= 2048 else "small"
        kind = "square" if what == "square" else what.split(".")[1]
        return f"gemm {dtype} {kind} {size}"
    if r.section == "attention":
        seq = int(words[-1][1:])
        return f"attention {words[0]} {words[1]} {words[2]} {'s>=2048' if seq >= 2048 else 's<2048'}"
    if r.section == "gemm_settled":
        m, n, k = (int(x) for x in words[-1].split("x"))
        return f"gemm_settled bf16 {'large' if min(m, n, k) >= 2048 else 'small'}"
    if r.section == "attention_hd":
        return f"attention_hd {words[0]} {words[2]}"
    if r.section == "attention_occ":
        return f"attention_occ {words[0]} {words[3]} {occupancy_band(r)}"
    if r.section in ("layer", "layer_steady"):
        return f"{r.section} {words[-1]}"
    return r.section


def summarise(res: Sequence[Residual]) -> list[Group]:
    groups: dict[str, list[float]] = {}
    for r in res:
        groups.setdefault(group_of(r), []).append(r.error_pct)
    out = []
    for name, errs in groups.items():
        errs = sorted(errs)
        q = statistics.quantiles(errs, n=10, method="inclusive") if len(errs) > 1 else [errs[0]] * 9
        out.append(Group(name, len(errs), statistics.median(errs), q[0], q[-1], max(errs, key=abs)))
    return out
