"""Compare the roofline with the kernel times measured on an H200 and write the residual table.

    PYTHONPATH=. python scripts/check_measured_kernels.py            # print, write the table
    PYTHONPATH=. python scripts/check_measured_kernels.py --check    # recompute the shipped table, exit 1 if it differs
    PYTHONPATH=. python scripts/check_measured_kernels.py --cases    # every case, not only the groups
    PYTHONPATH=. python scripts/check_measured_kernels.py --plot h200.png   # also draw measured against model
    PYTHONPATH=. python scripts/check_measured_kernels.py --fit-attention   # refit Hopper's attention constants
    PYTHONPATH=. python scripts/check_measured_kernels.py --fit-head-dims   # refit its head-dimension factors
    PYTHONPATH=. python scripts/check_measured_kernels.py --fit-occupancy   # compare attention block sizes
    PYTHONPATH=. python scripts/check_measured_kernels.py --measured DIR --gpu-type H100-SXM [--out FILE]
        # your own GPU's tables (scripts/measure_gpu_kernels.py --out DIR) against that catalog GPU type

Measurements: ``hetero_ns3/data/measured/h200/`` (``scripts/measure_gpu_kernels.py`` on one H200,
2026-12-04; see the README there). Comparison: :mod:`hetero_ns3.compute.measured`. Table:
``hetero_ns3/data/validation/h200_kernels_fit.csv`` (one row per group: cases, median, 10th / 90th
percentile and worst error of model over measured time, in percent); docs/compute.md, "Measured on H200".
"""

from __future__ import annotations

import argparse
import csv
import io
import statistics
import sys
from pathlib import Path

from hetero_ns3.compute.measured import (
    MEASURED_DIR,
    fit_attention,
    fit_block_rows,
    fit_head_dims,
    residuals,
    summarise,
)
from hetero_ns3.errors import ScenarioError
from hetero_ns3.results.atomic import write_text

TABLE = Path(__file__).resolve().parents[1] / "hetero_ns3" / "data" / "validation" / "h200_kernels_fit.csv"
FIELDS = ["group", "cases", "median_pct", "p10_pct", "p90_pct", "worst_pct"]


DEFAULT_DIR = MEASURED_DIR / "h200"
DEFAULT_GPU = "H200-SXM"


def table(gpu_dir: Path = DEFAULT_DIR, gpu_type: str = DEFAULT_GPU) -> str:
    buf = io.StringIO()
    buf.write(
        f"# Roofline ({gpu_type} catalog constants, sustained applied) against kernels measured in {gpu_dir.name}/.\n"
    )
    buf.write("# error = model / measured - 1; written by scripts/check_measured_kernels.py\n")
    w = csv.DictWriter(buf, fieldnames=FIELDS, lineterminator="\n")
    w.writeheader()
    for g in summarise(residuals(gpu_type, gpu_dir)):
        w.writerow(
            {
                "group": g.name,
                "cases": g.n,
                "median_pct": f"{g.median:+.1f}",
                "p10_pct": f"{g.p10:+.1f}",
                "p90_pct": f"{g.p90:+.1f}",
                "worst_pct": f"{g.worst:+.1f}",
            }
        )
    return buf.getvalue()


def plot(path: Path, gpu_dir: Path = DEFAULT_DIR, gpu_type: str = DEFAULT_GPU) -> None:
    """Four panels: square GEMMs (TFLOP/s, measured and model), the GEMM rate from idle (with the model's
    sustained level), cuDNN attention at head dim 128 over sequence length (TFLOP/s executed, measured and
    model) and over head dimension at 16k tokens (model FLOPs per second: padding shows as lost rate)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from hetero_ns3.compute.gpus import get_gpu
    from hetero_ns3.compute.measured import attention_kernels, gemm_residuals, read_table
    from hetero_ns3.compute.roofline import Roofline, default_efficiency

    d, gpu = gpu_dir, get_gpu(gpu_type)
    fig, ax = plt.subplots(1, 4, figsize=(20, 4.2))
    rows = [r for r in read_table(d, "gemm") if r["kind"] == "square" and r["layout"] in ("NT", "TN")]
    for dtype, color in (("bf16", "C0"), ("fp8", "C1")):
        sel = [r for r in rows if r["dtype"] == dtype and (dtype == "fp8" or r["layout"] == "NT")]
        res = gemm_residuals(sel, gpu)
        size = [int(r["m"]) for r in sel]
        flops = [2.0 * s**3 for s in size]
        ax[0].plot(size, [f / x.measured / 1e12 for f, x in zip(flops, res, strict=True)], "o-", color=color,
                   label=f"{dtype} measured")  # fmt: skip
        ax[0].plot(size, [f / x.model / 1e12 for f, x in zip(flops, res, strict=True)], "--", color=color,
                   label=f"{dtype} model")  # fmt: skip
    ax[0].set(xscale="log", xlabel="M = N = K", ylabel="TFLOP/s", title=f"Square GEMMs, {gpu_type}")
    ax[0].legend()
    burst = read_table(d, "burst")
    sus = default_efficiency(gpu).sustained
    for dtype, color in (("bf16", "C0"), ("fp8", "C1")):
        pts = [(float(r["t_s"]), float(r["tflops"])) for r in burst if r["dtype"] == dtype]
        first = statistics.mean(v for t, v in pts if t <= 0.08)
        ax[1].plot([t for t, _ in pts], [v for _, v in pts], color=color, lw=0.8, label=f"{dtype} 8192^3")
        ax[1].axhline(first * sus, color=color, ls="--", lw=1, label=f"{dtype} first 80 ms x sustained")
    ax[1].set(xlabel="s since idle", ylabel="TFLOP/s", title="GEMM rate from idle (power limit 700 W)")
    ax[1].legend(fontsize=8)
    rf = Roofline("bf16")

    att = [r for r in read_table(d, "attention") if r["backend"] == "cudnn" and r["head_dim"] == "128"]
    for causal, marker in (("1", "o"), ("0", "s")):
        sel = [r for r in att if r["causal"] == causal]
        seq = [int(r["seq"]) for r in sel]
        for direction, color in (("fwd", "C2"), ("bwd", "C3")):
            meas, model = [], []
            for r in sel:
                k = attention_kernels(int(r["batch"]), int(r["heads"]), int(r["seq"]), 128, causal == "1")
                kern = k[0] if direction == "fwd" else k[1]
                work = sum(x.flops * x.work for x in kern)
                meas.append(work / float(r[f"{direction}_s"]) / 1e12)
                model.append(work / rf.time(kern, gpu)[2] / 1e12)
            kind = "causal" if causal == "1" else "full"
            ax[2].plot(seq, meas, marker + "-", color=color, label=f"{direction} {kind} measured")
            ax[2].plot(seq, model, "--", color=color, lw=0.8)
    ax[2].set(xscale="log", xlabel="sequence length", ylabel="TFLOP/s executed",
              title="cuDNN attention, head dim 128 (dashed: model)")  # fmt: skip
    ax[2].legend(fontsize=8)
    sweep = [r for r in read_table(d, "attention_head_dim") if r["seq"] == "16384"]
    for causal, marker in (("1", "o"), ("0", "s")):
        sel = sorted((r for r in sweep if r["causal"] == causal), key=lambda r: int(r["head_dim"]))
        hds = [int(r["head_dim"]) for r in sel]
        for direction, color in (("fwd", "C2"), ("bwd", "C3")):
            meas, model = [], []
            for r in sel:
                k = attention_kernels(int(r["batch"]), int(r["heads"]), 16384, int(r["head_dim"]), causal == "1")
                kern = k[0] if direction == "fwd" else k[1]
                useful = sum(x.flops for x in kern if x.op != "memory") * (0.5 if causal == "1" else 1.0)
                meas.append(useful / float(r[f"{direction}_s"]) / 1e12)
                model.append(useful / rf.time(kern, gpu)[2] / 1e12)
            kind = "causal" if causal == "1" else "full"
            ax[3].plot(hds, meas, marker + "-", color=color, label=f"{direction} {kind} measured")
            ax[3].plot(hds, model, "--", color=color, lw=0.8)
    if sweep:
        ax[3].set(xlabel="head dimension", ylabel="model TFLOP/s (causal: half the square)", xticks=[64, 96, 128, 160, 192, 256],
                  title="cuDNN attention at 16k tokens (dashed: model)")  # fmt: skip
        ax[3].legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--check", action="store_true", help="compare the shipped table with a recomputation")
    ap.add_argument("--cases", action="store_true", help="print every case")
    ap.add_argument("--plot", type=Path, help="also draw measured against model into this PNG")
    ap.add_argument(
        "--fit-attention",
        action="store_true",
        help="fit attention_fwd / _bwd / _seq_half / _causal_tile to the cuDNN head-dim-128 cases (gpus.toml Hopper)",
    )
    ap.add_argument(
        "--fit-head-dims",
        action="store_true",
        help="fit the attention factor per padded head dimension to attention_head_dim.csv (gpus.toml Hopper)",
    )
    ap.add_argument(
        "--fit-occupancy",
        action="store_true",
        help="compare the attention occupancy law's block sizes on attention_occupancy.csv (gpus.toml Hopper)",
    )
    ap.add_argument(
        "--measured", type=Path, help="folder of measure_gpu_kernels.py tables (default: the shipped H200's)"
    )
    ap.add_argument("--gpu-type", default=DEFAULT_GPU, help="catalog GPU type to time the same work on")
    ap.add_argument("--out", type=Path, help="write the residual table here (default: the shipped table, H200 only)")
    args = ap.parse_args(argv)
    gpu_dir = args.measured or DEFAULT_DIR
    try:
        if not (gpu_dir / "gemm.csv").is_file() and not (gpu_dir / "layers.csv").is_file():
            raise ScenarioError(
                f"--measured {str(gpu_dir)!r} holds no gemm.csv or layers.csv: "
                "give the --out folder of scripts/measure_gpu_kernels.py"
            )
        return _run(args, gpu_dir)
    except ScenarioError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2


def _run(args: argparse.Namespace, gpu_dir: Path) -> int:
    if args.fit_attention:
        for backend, hd in (("cudnn", 128), ("cudnn", 64), ("flash", 128)):
            f = fit_attention(args.gpu_type, gpu_dir, backend=backend, head_dim=hd)
            print(
                f"{backend:5s} hd {hd:3d}: attention_fwd = {f.attention_fwd:.2f}  attention_bwd = {f.attention_bwd:.2f}"
                f"  attention_seq_half = {f.attention_seq_half:.0f}  attention_causal_tile = {f.attention_causal_tile:.0f}"
                f"  RMS fwd {f.rms_fwd_pct:.1f}% bwd {f.rms_bwd_pct:.1f}%"
                f"  worst fwd {f.worst_fwd_pct:+.1f}% bwd {f.worst_bwd_pct:+.1f}%  ({f.cases} cases)"
            )
        if gpu_dir == DEFAULT_DIR:
            print("the catalog (gpus.toml [efficiency.Hopper]) carries the first line")
        return 0
    if args.fit_occupancy:
        if not (gpu_dir / "attention_occupancy.csv").is_file():
            raise ScenarioError(
                f"--measured {str(gpu_dir)!r} holds no attention_occupancy.csv: run the measurement "
                "with --only attention_occupancy"
            )
        fits = fit_block_rows(args.gpu_type, gpu_dir)
        for rows, (fwd, bwd) in fits.items():
            law = f"{rows} query rows per block" if rows else "no occupancy law"
            print(f"{law:26s}: RMS log error about the mean, forward {fwd:.1f}%  backward {bwd:.1f}%")
        if gpu_dir == DEFAULT_DIR:
            print("the catalog (gpus.toml [efficiency.Hopper]) carries attention_block_rows = 128")
        return 0
    if args.fit_head_dims:
        f = fit_head_dims(args.gpu_type, gpu_dir)
        if not f.rows:
            raise ScenarioError(
                f"--measured {str(gpu_dir)!r} holds no attention_head_dim.csv: run the measurement "
                "with --only attention --attention-backends cudnn --head-dims 64,80,96,128,160,192,256"
            )
        print(f"attention_head_tile = {f.tile}")
        for hd, fwd, bwd, n in f.rows:
            print(f"head dim {hd:3d}: forward x {fwd:.2f}  backward x {bwd:.2f}  ({n} cases)")
        print(f"RMS log error over the fitted cases: {f.rms_fit:.1f}%")
        for tile, rms in f.rms_padded.items():
            rule = f"padded to a multiple of {tile}" if tile else "not padded"
            print(f"other head dims ({f.padded_cases} cases, not fitted), {rule}: RMS {rms:.1f}%")
        if gpu_dir == DEFAULT_DIR:
            print("the catalog (gpus.toml [efficiency.Hopper]) carries these rows, head dim 128 set to 1")
        return 0
    text = table(gpu_dir, args.gpu_type)
    shipped = gpu_dir == DEFAULT_DIR and args.gpu_type == DEFAULT_GPU
    if args.check:
        ok = shipped and TABLE.read_text() == text
        print("residual table reproduced" if ok else "residual table differs")
        return 0 if ok else 1
    if args.cases:
        for r in residuals(args.gpu_type, gpu_dir):
            print(
                f"{r.section:14s} {r.case:48s} measured {r.measured:11.4e} model {r.model:11.4e} {r.error_pct:+7.1f}%"
            )
    print(text, end="")
    if args.plot:
        plot(args.plot, gpu_dir, args.gpu_type)
        print(f"wrote {args.plot}")
    out = args.out or (TABLE if shipped else None)
    if out is not None:
        write_text(out, text)
        print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
