"""Measure a GPU's kernel efficiency curves for the roofline (GEMM, attention, element-wise, Adam, layers).

Runs on a machine with one NVIDIA GPU and PyTorch (no hetero_ns3 import: the GPU machine need not have
the project installed). Writes CSV tables into ``--out`` that ``scripts/check_measured_kernels.py``
compares with the roofline (``docs/compute.md``, "Measured on H200"):

* ``gemm.csv``: BF16 and FP8 (``torch._scaled_mm``) GEMMs: square shapes, and the forward / dgrad /
  wgrad products of transformer linear layers (QKV, projection, FC1, FC2) over hidden sizes, tensor
  parallel degrees and token counts, in the operand layouts a training framework uses;
* ``attention.csv``: fused attention (PyTorch SDPA, flash and cuDNN back ends; ``--attention-backends``)
  forward and backward over sequence length, head dimension (``--head-dims``, default 64 and 128) and causal
  masking;
* ``memory.csv``: element-wise kernels (copy, add, GELU, SwiGLU, LayerNorm, RMSNorm, softmax) and the
  fused Adam step, bytes moved over time;
* ``layers.csv``: whole transformer layers (one tensor-parallel rank's kernels, no communication),
  forward and forward + backward through autograd, to check that a layer is the sum of its kernels
  (``--layers`` picks some of :data:`LAYERS`);
* ``sustained.csv``: back-to-back 8192^3 BF16 GEMMs for ``--sustain`` seconds, TFLOP/s, SM clock and
  power per second (does the rate of a short benchmark hold under continuous load?);
* ``burst.csv``: the same GEMMs (BF16, then FP8) from an idle GPU, per group of five, for 3 s: how fast a
  benchmark's rate decays to the power-limited steady state;
* ``attention_occupancy.csv``: cuDNN attention, batch 1, 1-256 heads, seq 1024-8192, head dim 128: grids that
  fill the SMs only partly (tensor-parallel shards);
* ``gemm_settled.csv``: the 8192^3 product and five linear-layer GEMMs, each back to back for 4 s, rate, SM clock
  and power every ~50 ms (the power-limited rate per shape);
* ``layer_sustained.csv``: layers' forward + backward repeated for 10 s each (steady state of a layer;
  Llama 2 7B and the GPT-3 175B shard unless ``--layers`` names others);
* ``env.json``: GPU, driver, PyTorch and CUDA versions.

Timing: CUDA events around a back-to-back loop of at least ``--min-ms`` milliseconds after warm-up,
median of three such loops (GEMMs: replays of a CUDA graph of 20 calls, so that small GEMMs are not
timed at the host's per-call launch cost); operands are allocated once (no allocator time), no L2 flush (operands of
the timed sizes exceed or fill the 50-60 MB L2 except the smallest GEMMs). Times are per kernel call.

Usage: ``python3 scripts/measure_gpu_kernels.py --out DIR [--quick] [--sustain 20] [--only SECTIONS]
[--head-dims 64,128] [--attention-backends flash,cudnn] [--layers NAMES]``.
"""

from __future__ import annotations

import argparse
import csv
import json
import math
import os
import platform
import statistics
import subprocess
import sys
import time
import traceback
from collections.abc import Callable
from pathlib import Path

import torch
import torch.nn.functional as F

DEV = torch.device("cuda")
BF16 = torch.bfloat16


def log(msg: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", flush=True)


def bench(fn: Callable[[], object], min_ms: float, warmup: int = 3) -> float:
    """Seconds per call of ``fn``: median of three back-to-back loops of >= ``min_ms`` each."""
    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    fn()
    end.record()
    torch.cuda.synchronize()
    one = max(start.elapsed_time(end), 1e-3)
    n = int(min(500, max(3, math.ceil(min_ms / one))))
    times = []
    for _ in range(3):
        start.record()
        for _ in range(n):
            fn()
        end.record()
        torch.cuda.synchronize()
        times.append(start.elapsed_time(end) / n * 1e-3)
    return statistics.median(times)


def bench_graph(fn: Callable[[], object], min_ms: float, floor_ms: float = 0.3) -> float:
    """Seconds per call of ``fn``; a call shorter than ``floor_ms`` is timed from replays of a CUDA graph
    of enough calls to fill it (at most 20), so that kernels shorter than the host's ~20 us per-call
    overhead are timed on the GPU alone."""
    one = bench(fn, 1.0, warmup=2)
    inner = min(20, math.ceil(floor_ms * 1e-3 / max(one, 1e-7)))
    if inner <= 1:
        return bench(fn, min_ms, warmup=0)
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        fn()
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        for _ in range(inner):
            fn()
    return bench(graph.replay, min_ms) / inner


class Table:
    """CSV written row by row (flushed), so a run cut short keeps what it measured."""

    def __init__(self, path: Path, fields: list[str]) -> None:
        self.fh = open(path, "w", newline="")  # noqa: SIM115 - kept open, flushed per row
        self.w = csv.DictWriter(self.fh, fieldnames=fields)
        self.w.writeheader()
        self.fh.flush()

    def add(self, **row: object) -> None:
        self.w.writerow(row)
        self.fh.flush()


def randn(*shape: int, dtype: torch.dtype = BF16) -> torch.Tensor:
    return (torch.randn(*shape, device=DEV, dtype=torch.float32) * 0.02).to(dtype)


# ---------------------------------------------------------------------------------------------- GEMM
def linear_shapes(quick: bool) -> list[tuple[str, int, int, int, int, int]]:
    """(layer, hidden, tp, tokens, n_out, k_in) of the forward GEMM of each linear layer."""
    hiddens = [(2048, 8192), (4096, 16384), (8192, 28672), (12288, 49152)]  # (h, ffn)
    tps = [1, 2, 4, 8]
    tokens = [4096, 16384]
    if quick:
        hiddens, tps, tokens = hiddens[1:2], [1, 8], [4096]
    out = []
    for h, f in hiddens:
        for tp in tps:
            for t in tokens:
                out += [
                    ("qkv", h, tp, t, 3 * h // tp, h),
                    ("proj", h, tp, t, h, h // tp),
                    ("fc1", h, tp, t, f // tp, h),
                    ("fc2", h, tp, t, h, f // tp),
                ]
    return out


def run_gemms(out: Path, quick: bool, min_ms: float) -> None:
    fields = ["dtype", "kind", "layer", "hidden", "tp", "pass", "layout", "m", "n", "k", "time_s", "tflops"]
    tab = Table(out / "gemm.csv", fields)
    fp8 = hasattr(torch, "_scaled_mm") and hasattr(torch, "float8_e4m3fn")

    def one_bf16(m: int, n: int, k: int, layout: str) -> float:
        # layout names the stored operands as a framework holds them: NT = X[m,k] @ W[n,k]^T (forward),
        # NN = dY[m,k] @ W[k,n] (dgrad), TN = dY[k,m]^T @ X[k,n] (wgrad)
        if layout == "NT":
            a, b = randn(m, k), randn(n, k).t()
        elif layout == "NN":
            a, b = randn(m, k), randn(k, n)
        else:
            a, b = randn(k, m).t(), randn(k, n)
        c = torch.empty(m, n, device=DEV, dtype=BF16)
        return bench_graph(lambda: torch.mm(a, b, out=c), min_ms)

    def one_fp8(m: int, n: int, k: int, fast: bool) -> float:
        a = randn(m, k).to(torch.float8_e4m3fn)
        b = randn(n, k).to(torch.float8_e4m3fn).t()  # column-major, as _scaled_mm requires
        one = torch.ones((), device=DEV, dtype=torch.float32)
        return bench_graph(lambda: torch._scaled_mm(a, b, one, one, out_dtype=BF16, use_fast_accum=fast), min_ms)

    def row(dtype: str, layout: str, m: int, n: int, k: int, t: float, **linear: object) -> None:
        tab.add(dtype=dtype, layout=layout, m=m, n=n, k=k, time_s=t, tflops=2 * m * n * k / t / 1e12, **linear)

    sq = [256, 512, 1024, 2048, 3072, 4096, 6144, 8192, 12288, 16384]
    if quick:
        sq = [1024, 8192]
    for d in sq:
        for layout in ("NT", "NN", "TN"):
            row("bf16", layout, d, d, d, one_bf16(d, d, d, layout), kind="square")
        if fp8:
            for fast in (False, True):
                try:
                    t = one_fp8(d, d, d, fast)
                except Exception as exc:  # noqa: BLE001 - record and go on
                    log(f"fp8 {d}: {exc!r}")
                    fp8 = False
                    break
                row("fp8_fastacc" if fast else "fp8", "TN", d, d, d, t, kind="square")
        log(f"square {d}")
    for layer, h, tp, tok, n_out, k_in in linear_shapes(quick):
        passes = [("fwd", "NT", tok, n_out, k_in), ("dgrad", "NN", tok, k_in, n_out), ("wgrad", "TN", n_out, k_in, tok)]
        for pname, layout, m, n, k in passes:
            linear = {"kind": "linear", "layer": layer, "hidden": h, "tp": tp, "pass": pname}
            row("bf16", layout, m, n, k, one_bf16(m, n, k, layout), **linear)
            if fp8:
                try:
                    t = one_fp8(m, n, k, pname == "fwd")
                except Exception as exc:  # noqa: BLE001
                    log(f"fp8 {m}x{n}x{k}: {exc!r}")
                    continue
                row("fp8", "TN", m, n, k, t, **linear)
        torch.cuda.empty_cache()
    log("linear GEMMs done")


# ----------------------------------------------------------------------------------------- attention
def _attention_case(
    backend: object, b: int, heads: int, s: int, hd: int, causal: bool, min_ms: float
) -> tuple[float, float]:
    """(forward, backward) seconds of SDPA on [b, heads, s, hd] bf16 with one back end."""
    from torch.nn.attention import sdpa_kernel

    q, k, v = (randn(b, heads, s, hd).requires_grad_(True) for _ in range(3))
    with sdpa_kernel([backend]):
        fwd = bench(lambda: F.scaled_dot_product_attention(q, k, v, is_causal=causal), min_ms)
        g = torch.randn_like(F.scaled_dot_product_attention(q, k, v, is_causal=causal))

        def both() -> None:
            y = F.scaled_dot_product_attention(q, k, v, is_causal=causal)
            torch.autograd.grad(y, (q, k, v), g)

        tot = bench(both, min_ms)
    return fwd, tot - fwd


ATTENTION_BACKENDS = ("flash", "cudnn")
"""SDPA back ends of ``--attention-backends``: PyTorch's FlashAttention-2 and cuDNN's fused attention."""


ATTENTION_FIELDS = [
    "backend",
    "batch",
    "heads",
    "seq",
    "head_dim",
    "causal",
    "fwd_s",
    "bwd_s",
    "fwd_flops",
    "bwd_flops",
]


def _attention_row(tab: Table, name: str, backend: object, b: int, heads: int, s: int, hd: int, causal: bool,
                   min_ms: float) -> None:  # fmt: skip
    """Time one SDPA case and write its row (model FLOPs of the full square); a case the back end refuses is
    logged and skipped."""
    try:
        fwd, bwd = _attention_case(backend, b, heads, s, hd, causal, min_ms)
    except Exception as exc:  # noqa: BLE001
        log(f"attention {name} b {b} heads {heads} hd {hd} s {s}: {exc!r}")
        return
    flops = 4.0 * b * heads * s * s * hd  # forward; the backward is 2.5x (its recomputed forward included)
    tab.add(backend=name, batch=b, heads=heads, seq=s, head_dim=hd, causal=int(causal),
            fwd_s=fwd, bwd_s=bwd, fwd_flops=flops, bwd_flops=2.5 * flops)  # fmt: skip


def run_attention(
    out: Path, quick: bool, min_ms: float, head_dims: tuple[int, ...], backend_names: tuple[str, ...]
) -> None:
    from torch.nn.attention import SDPBackend

    tab = Table(out / "attention.csv", ATTENTION_FIELDS)
    known = {"flash": SDPBackend.FLASH_ATTENTION, "cudnn": SDPBackend.CUDNN_ATTENTION}
    backends = [(name, known[name]) for name in backend_names]
    seqs = [512, 1024, 2048, 4096, 8192, 16384] if not quick else [2048]
    tokens = 32768
    for name, backend in backends:
        for hd in head_dims:
            heads = max(1, 2048 // hd)  # about 2048 channels of heads per rank (e.g. h 8192 at TP 4)
            for s in seqs:
                for causal in (True, False):
                    _attention_row(tab, name, backend, max(1, tokens // s), heads, s, hd, causal, min_ms)
            log(f"attention {name} hd {hd}")
        torch.cuda.empty_cache()


OCCUPANCY_HEADS = (1, 2, 4, 8, 12, 16, 24, 32, 48, 64, 96, 128, 192, 256)
"""Heads of the ``attention_occupancy`` section (batch 1): from far fewer thread blocks than SMs to many waves."""


def run_attention_occupancy(out: Path, min_ms: float, head_dim: int = 128) -> None:
    """cuDNN attention with batch 1 and 1-256 heads at seq 1024-8192 (causal and full): how the rate falls when
    the kernel's grid (batch x heads x query tiles) fills the SMs only partly, as in tensor-parallel shards."""
    from torch.nn.attention import SDPBackend

    tab = Table(out / "attention_occupancy.csv", ATTENTION_FIELDS)
    for s in (1024, 2048, 4096, 8192):
        for heads in OCCUPANCY_HEADS:
            for causal in (True, False):
                _attention_row(tab, "cudnn", SDPBackend.CUDNN_ATTENTION, 1, heads, s, head_dim, causal, min_ms)
        log(f"attention occupancy s {s}")
        torch.cuda.empty_cache()


# ------------------------------------------------------------------------------------ element-wise
def _memory_cases(n: int) -> list[tuple[str, Callable[[], object], float]]:
    """(name, call, HBM bytes) of element-wise kernels over ``n`` bf16 elements in rows of 4096."""
    h = 4096
    rows = n // h
    x, y, x2 = randn(rows, h), randn(rows, h), randn(rows, 2 * h)
    z = torch.empty_like(x)
    w, bias = randn(h), randn(h)
    return [
        ("copy", lambda: z.copy_(x), 4.0 * n),
        ("add", lambda: torch.add(x, y, out=z), 6.0 * n),
        ("gelu", lambda: F.gelu(x, approximate="tanh"), 4.0 * n),
        ("layernorm", lambda: F.layer_norm(x, (h,), w, bias), 4.0 * n),
        ("rmsnorm", lambda: F.rms_norm(x, (h,), w), 4.0 * n),
        ("softmax", lambda: torch.softmax(x, dim=-1), 4.0 * n),
        ("dropout_add", lambda: F.dropout(x, 0.1, training=True) + y, 7.0 * n),
        ("swiglu", lambda: F.silu(x2[:, :h]) * x2[:, h:], 6.0 * n),
    ]


def run_memory(out: Path, quick: bool, min_ms: float) -> None:
    fields = ["kernel", "elements", "bytes", "time_s", "gbps"]
    tab = Table(out / "memory.csv", fields)
    sizes = [1 << 24, 1 << 26, 1 << 28] if not quick else [1 << 26]
    for n in sizes:
        for name, fn, nbytes in _memory_cases(n):
            try:
                t = bench(fn, min_ms)
            except Exception as exc:  # noqa: BLE001
                log(f"memory {name}: {exc!r}")
                continue
            tab.add(kernel=name, elements=n, bytes=nbytes, time_s=t, gbps=nbytes / t / 1e9)
        torch.cuda.empty_cache()
    # fused Adam over fp32 parameters: reads param, grad, m, v and writes param, m, v (28 B / parameter)
    for n in [1 << 26, 1 << 28] if not quick else [1 << 26]:
        p = torch.zeros(n, device=DEV, dtype=torch.float32, requires_grad=True)
        p.grad = torch.randn_like(p) * 1e-3
        opt = torch.optim.Adam([p], lr=1e-4, fused=True)
        t = bench(opt.step, min_ms)
        tab.add(kernel="adam_fused_fp32", elements=n, bytes=28.0 * n, time_s=t, gbps=28.0 * n / t / 1e9)
        del p, opt
        torch.cuda.empty_cache()
    log("memory done")


# -------------------------------------------------------------------------------------------- layers
LAYERS = [
    # name, hidden, heads, kv_heads, ffn, tp, seq, micro_batch, gated, norm
    ("gpt3-1.3b-tp4", 2048, 16, 16, 8192, 4, 2048, 4, False, "layernorm"),
    ("gpt3-1.3b-tp1", 2048, 16, 16, 8192, 1, 2048, 4, False, "layernorm"),
    ("llama2-7b-tp1", 4096, 32, 32, 11008, 1, 4096, 1, True, "rmsnorm"),
    ("llama3-8b-tp1", 4096, 32, 8, 14336, 1, 8192, 1, True, "rmsnorm"),
    ("gpt3-175b-tp8", 12288, 96, 96, 49152, 8, 2048, 1, False, "layernorm"),
    ("llama2-70b-tp4", 8192, 64, 8, 28672, 4, 4096, 1, True, "rmsnorm"),
    # head dims other than 128: 64 (GPT-3 350M) and 80 (GPT-3 2.7B)
    ("gpt3-350m-tp1", 1024, 16, 16, 4096, 1, 2048, 8, False, "layernorm"),
    ("gpt3-2.7b-tp1", 2560, 32, 32, 10240, 1, 2048, 4, False, "layernorm"),
]
LAYER_NAMES = tuple(cfg[0] for cfg in LAYERS)
STEADY_LAYERS = ("llama2-7b-tp1", "gpt3-175b-tp8")
"""Layers of the ``layer_sustained`` section unless ``--layers`` names others."""


def _layer_case(cfg: tuple, min_ms: float, profile: bool = True) -> tuple[float, float, str]:
    """(forward s, forward + backward s, profiler table) of one TP rank's transformer layer (no comm)."""
    name, h, nh, nkv, f, tp, s, b, gated, norm = cfg
    hl, kl, hd = nh // tp, max(1, nkv // tp), h // nh
    fl = f // tp
    T = b * s
    w_qkv, w_proj = randn((hl + 2 * kl) * hd, h), randn(h, hl * hd)
    w_fc1, w_fc2 = randn(fl * (2 if gated else 1), h), randn(h, fl)
    n1, n2, x = randn(h), randn(h), randn(T, h)
    params = (x, w_qkv, w_proj, w_fc1, w_fc2, n1, n2)
    for p in params:
        p.requires_grad_(True)

    def normf(t: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
        return F.rms_norm(t, (h,), w) if norm == "rmsnorm" else F.layer_norm(t, (h,), w)

    def layer() -> torch.Tensor:
        a = F.linear(normf(x, n1), w_qkv)
        q, k, v = a.split([hl * hd, kl * hd, kl * hd], dim=-1)
        q = q.view(b, s, hl, hd).transpose(1, 2)
        k = k.view(b, s, kl, hd).transpose(1, 2)
        v = v.view(b, s, kl, hd).transpose(1, 2)
        o = F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=kl != hl)
        r = x + F.linear(o.transpose(1, 2).reshape(T, hl * hd), w_proj)
        u = F.linear(normf(r, n2), w_fc1)
        act = F.silu(u[:, :fl]) * u[:, fl:] if gated else F.gelu(u, approximate="tanh")
        return r + F.linear(act, w_fc2)

    g = randn(T, h)
    fwd = bench(layer, min_ms)
    tot = bench(lambda: torch.autograd.grad(layer(), params, g), min_ms)
    if not profile:
        return fwd, tot, ""
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as prof:
        for _ in range(3):
            torch.autograd.grad(layer(), params, g)
        torch.cuda.synchronize()
    text = prof.key_averages().table(sort_by="cuda_time_total", row_limit=30, max_name_column_width=90)
    return fwd, tot, f"=== {name}: fwd {fwd * 1e3:.3f} ms, fwd+bwd {tot * 1e3:.3f} ms (3 iterations below)\n{text}"


def run_layers(out: Path, quick: bool, min_ms: float, names: tuple[str, ...] = LAYER_NAMES) -> None:
    fields = ["layer", "hidden", "heads", "kv_heads", "ffn", "tp", "seq", "micro_batch", "gated", "norm"]
    tab = Table(out / "layers.csv", [*fields, "fwd_s", "fwd_bwd_s"])
    prof_lines: list[str] = []
    chosen = [cfg for cfg in LAYERS if cfg[0] in names]
    for cfg in chosen if not quick else chosen[:1]:
        try:
            fwd, tot, text = _layer_case(cfg, min_ms)
        except Exception as exc:  # noqa: BLE001
            log(f"layer {cfg[0]}: {exc!r}")
            prof_lines.append(f"=== {cfg[0]}: failed {exc!r}")
            continue
        row = dict(zip(fields, cfg, strict=True))
        row["gated"] = int(bool(row["gated"]))
        tab.add(**row, fwd_s=fwd, fwd_bwd_s=tot)
        prof_lines.append(text)
        torch.cuda.empty_cache()
        log(f"layer {cfg[0]}")
        (out / "profile.txt").write_text("\n".join(prof_lines))


# ---------------------------------------------------------------------------------------- sustained
def _nvml() -> object | None:
    """NVML handle of GPU 0 (clocks, power), or None where NVML is missing."""
    try:
        import pynvml

        pynvml.nvmlInit()
        return pynvml.nvmlDeviceGetHandleByIndex(0)
    except Exception as exc:  # noqa: BLE001
        log(f"no NVML: {exc!r}")
        return None


def _clocks(hnd: object | None, temperature: bool = False) -> dict[str, object]:
    """SM clock (MHz), board power (W) and optionally temperature (C) now; empty without NVML."""
    if hnd is None:
        return {}
    import pynvml

    row: dict[str, object] = {
        "sm_mhz": pynvml.nvmlDeviceGetClockInfo(hnd, pynvml.NVML_CLOCK_SM),
        "power_w": pynvml.nvmlDeviceGetPowerUsage(hnd) / 1000,
    }
    if temperature:
        row["temp_c"] = pynvml.nvmlDeviceGetTemperature(hnd, pynvml.NVML_TEMPERATURE_GPU)
    return row


def _mm_rate(a: torch.Tensor, b: torch.Tensor, c: torch.Tensor, calls: int) -> float:
    """TFLOP/s of ``calls`` back-to-back ``a @ b`` into ``c`` (CUDA events around the loop)."""
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(calls):
        torch.mm(a, b, out=c)
    end.record()
    torch.cuda.synchronize()
    return calls * 2.0 * a.shape[0] * b.shape[1] * a.shape[1] / (start.elapsed_time(end) * 1e-3) / 1e12


def run_sustained(out: Path, seconds: float) -> None:
    tab = Table(out / "sustained.csv", ["second", "tflops", "sm_mhz", "power_w", "temp_c"])
    hnd = _nvml()
    d = 8192
    a, b = randn(d, d), randn(d, d).t()
    c = torch.empty(d, d, device=DEV, dtype=BF16)
    t0 = time.time()
    while time.time() - t0 < seconds:
        rate = _mm_rate(a, b, c, 100)
        tab.add(second=round(time.time() - t0, 2), tflops=rate, **_clocks(hnd, True))
    log(f"sustained {seconds} s done")


SETTLED_SHAPES = (
    # (label, m, n, k): the 8192^3 product behind `sustained`, then forward linear-layer GEMMs of gemm.csv
    ("square 8192", 8192, 8192, 8192),
    ("fc1 h4096 tp1", 16384, 16384, 4096),
    ("qkv h4096 tp1", 16384, 12288, 4096),
    ("fc2 h8192 tp8", 16384, 8192, 3584),
    ("proj h12288 tp8", 4096, 12288, 1536),
    ("qkv h2048 tp4", 4096, 1536, 2048),
)


def run_gemm_settled(out: Path, seconds: float) -> None:
    """Each of :data:`SETTLED_SHAPES` back to back for ``seconds`` (BF16), rate with SM clock and power every
    ~50 ms: does a linear-layer GEMM settle at the clock and fraction of its burst rate that 8192^3 does?"""
    tab = Table(out / "gemm_settled.csv", ["label", "m", "n", "k", "t_s", "tflops", "sm_mhz", "power_w"])
    hnd = _nvml()
    for label, m, n, k in SETTLED_SHAPES:
        a, b = randn(m, k), randn(n, k).t()
        c = torch.empty(m, n, device=DEV, dtype=BF16)
        per = max(1, int(0.05 / (2.0 * m * n * k / 700e12)))
        t0 = time.time()
        while time.time() - t0 < seconds:
            rate = _mm_rate(a, b, c, per)
            tab.add(label=label, m=m, n=n, k=k, t_s=round(time.time() - t0, 3), tflops=rate, **_clocks(hnd))
        del a, b, c
        log(f"gemm settled {label}")


def run_burst(out: Path, seconds: float) -> None:
    """Rate of back-to-back 8192^3 GEMMs (BF16, then FP8) from an idle GPU, per group of 5, with clocks:
    how fast a short benchmark's rate decays to the power-limited steady state."""
    tab = Table(out / "burst.csv", ["dtype", "t_s", "tflops", "sm_mhz", "power_w"])
    hnd = _nvml()
    d = 8192
    one = torch.ones((), device=DEV, dtype=torch.float32)
    a, b = randn(d, d), randn(d, d).t()
    a8, b8 = a.to(torch.float8_e4m3fn), b.t().contiguous().to(torch.float8_e4m3fn).t()
    c = torch.empty(d, d, device=DEV, dtype=BF16)
    calls: dict[str, Callable[[], object]] = {
        "bf16": lambda: torch.mm(a, b, out=c),
        "fp8": lambda: torch._scaled_mm(a8, b8, one, one, out_dtype=BF16),
    }
    for dtype, fn in calls.items():
        fn()
        torch.cuda.synchronize()
        time.sleep(8.0)  # idle: clocks and power back to rest
        t0 = time.time()
        while time.time() - t0 < seconds:
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            for _ in range(5):
                fn()
            end.record()
            torch.cuda.synchronize()
            flops = 2 * d**3 * 5
            rate = flops / (start.elapsed_time(end) * 1e-3) / 1e12
            tab.add(dtype=dtype, t_s=round(time.time() - t0, 4), tflops=rate, **_clocks(hnd))
        log(f"burst {dtype} done")


def run_layer_sustained(out: Path, seconds: float, names: tuple[str, ...] = STEADY_LAYERS) -> None:
    """Each named layer forward + backward back to back for ``seconds``: the short-loop layer time of
    ``layers.csv`` against its steady state under continuous load."""
    tab = Table(out / "layer_sustained.csv", ["layer", "t_s", "fwd_bwd_s"])
    for cfg in (cfg for cfg in LAYERS if cfg[0] in names):
        t0 = time.time()
        while time.time() - t0 < seconds:
            _, tot, _ = _layer_case(cfg, 200.0, profile=False)
            tab.add(layer=cfg[0], t_s=round(time.time() - t0, 3), fwd_bwd_s=tot)
        log(f"layer sustained {cfg[0]} done")


SECTIONS = (
    "burst",
    "attention",
    "memory",
    "layers",
    "gemm",
    "sustained",
    "layer_sustained",
    "gemm_settled",
    "attention_occupancy",
)
"""Sections of ``--only``, in the default order (burst first: it needs a GPU at rest)."""


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", required=True, type=Path)
    ap.add_argument("--quick", action="store_true", help="a few shapes per section (a smoke run)")
    ap.add_argument("--min-ms", type=float, default=15.0, help="length of one timed loop, ms")
    ap.add_argument("--sustain", type=float, default=20.0, help="seconds of back-to-back GEMMs (0 = skip)")
    ap.add_argument("--only", default=",".join(SECTIONS), help=f"comma-separated sections, in order: {SECTIONS}")
    ap.add_argument("--head-dims", default="64,128", help="attention head dimensions, comma-separated")
    ap.add_argument(
        "--attention-backends", default=",".join(ATTENTION_BACKENDS), help=f"some of {','.join(ATTENTION_BACKENDS)}"
    )
    ap.add_argument("--layers", help=f"layers of the layers and layer_sustained sections, some of {LAYER_NAMES}")
    args = ap.parse_args()
    unknown = [key for key in args.only.split(",") if key not in SECTIONS]
    if unknown:
        ap.error(f"--only: {unknown} not a section; use some of {','.join(SECTIONS)}")  # exits 2
    try:
        head_dims = tuple(int(x) for x in args.head_dims.split(","))
    except ValueError:
        ap.error(f"--head-dims: {args.head_dims!r} is not a list of integers; e.g. 64,128")
    if any(hd < 8 or hd % 8 for hd in head_dims):
        ap.error(f"--head-dims: {args.head_dims!r}: each must be a multiple of 8 (SDPA's fused kernels); e.g. 64,128")
    layer_names = tuple(args.layers.split(",")) if args.layers else None
    if layer_names and (bad := [n for n in layer_names if n not in LAYER_NAMES]):
        ap.error(f"--layers: {bad} unknown; use some of {','.join(LAYER_NAMES)}")
    backend_names = tuple(args.attention_backends.split(","))
    bad = [b for b in backend_names if b not in ATTENTION_BACKENDS]
    if bad:
        ap.error(f"--attention-backends: {bad} unknown; use some of {','.join(ATTENTION_BACKENDS)}")
    args.out.mkdir(parents=True, exist_ok=True)
    props = torch.cuda.get_device_properties(0)
    env = {
        "gpu": props.name,
        "sm_count": props.multi_processor_count,
        "memory_gib": props.total_memory / 2**30,
        "torch": torch.__version__,
        "cuda": torch.version.cuda,
        "cudnn": torch.backends.cudnn.version(),
        "python": platform.python_version(),
        "date": time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime()),
        "min_ms": args.min_ms,
    }
    try:
        env["nvidia_smi"] = subprocess.run(
            [
                "nvidia-smi",
                "--query-gpu=driver_version,clocks.max.sm,clocks.max.mem,power.limit",
                "--format=csv,noheader",
            ],
            capture_output=True,
            text=True,
            timeout=30,
        ).stdout.strip()
    except Exception as exc:  # noqa: BLE001
        env["nvidia_smi"] = repr(exc)
    (args.out / "env.json").write_text(json.dumps(env, indent=1))
    log(json.dumps(env))
    torch.backends.cuda.matmul.allow_tf32 = False
    rc = 0
    steps = {
        "gemm": lambda: run_gemms(args.out, args.quick, args.min_ms),
        "attention": lambda: run_attention(args.out, args.quick, args.min_ms, head_dims, backend_names),
        "memory": lambda: run_memory(args.out, args.quick, args.min_ms),
        "layers": lambda: run_layers(args.out, args.quick, args.min_ms, layer_names or LAYER_NAMES),
        "sustained": lambda: run_sustained(args.out, args.sustain),
        "burst": lambda: run_burst(args.out, 3.0),
        "gemm_settled": lambda: run_gemm_settled(args.out, 4.0),
        "attention_occupancy": lambda: run_attention_occupancy(args.out, args.min_ms),
        "layer_sustained": lambda: run_layer_sustained(args.out, 10.0, layer_names or STEADY_LAYERS),
    }
    for key in args.only.split(","):
        if key == "sustained" and args.sustain <= 0:
            continue
        t0 = time.time()
        try:
            steps[key]()
        except Exception:  # noqa: BLE001 - keep the other sections
            traceback.print_exc()
            rc = 1
        log(f"{key}: {time.time() - t0:.1f} s")
    return rc


if __name__ == "__main__":
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    sys.exit(main())
