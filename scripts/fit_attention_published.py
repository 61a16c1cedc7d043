"""Fit fused-attention constants on NVIDIA's published cuDNN SDPA benchmarks and print the residual table.

    PYTHONPATH=. python scripts/fit_attention_published.py            # fit every table, print the residuals
    PYTHONPATH=. python scripts/fit_attention_published.py --check    # exit 1 if gpus.toml does not hold the fits

The data and the fit are :mod:`hetero_ns3.compute.attention_fit` (``hetero_ns3/data/validation/
attention_published.csv``); the fitted constants are ``[efficiency.Blackwell]`` (GB200's cuDNN 9.18 / 9.19 tables),
``[cudnn_era.Blackwell]`` (B200's cuDNN 9.10 / 9.13 tables: Blackwell before cuDNN 9.18.1), ``[efficiency."GB300"]`` and ``[efficiency.Hopper]``'s ``flash2_attention_fwd`` / ``_bwd`` (H200, PyTorch's
FlashAttention-2) of ``hetero_ns3/data/gpus.toml``, which this script prints but does not edit. H200's cuDNN rows
check the Hopper constants fitted to our own H200 measurements. docs/compute.md ("Blackwell attention", "GB300")
shows the tables.
"""

from __future__ import annotations

import argparse

from hetero_ns3.compute.attention_fit import (
    CHECK_ONLY,
    FITS,
    fit_published,
    load_published,
    published_residuals,
    shipped_constants,
)

KEYS = ("attention_fwd", "attention_bwd", "attention_seq_half", "attention_causal_tile")


def _table_name(table: str) -> str:
    """A fit's catalog table as written in gpus.toml."""
    return table if table.startswith("cudnn_era.") else f"efficiency.{table}"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--check", action="store_true", help="compare the shipped constants with the fits")
    args = ap.parse_args(argv)
    rows = load_published()
    stale = []
    for spec in FITS:
        fit = fit_published(spec, rows)
        shipped = shipped_constants(spec)
        keys = KEYS if spec.laws else KEYS[:2]
        got = {spec.prefix + k: getattr(fit, k) for k in keys}
        print(
            f"{spec.gpu_type} {spec.backend} -> [{_table_name(spec.table)}]: "
            + ", ".join(f"{k} {v:g} (shipped {shipped.get(k)})" for k, v in got.items())
            + f"; {fit.cases} cases, RMS {fit.rms_fwd_pct:.1f}% fwd / {fit.rms_bwd_pct:.1f}% bwd"
        )
        if any(float(shipped.get(k, float("nan"))) != v for k, v in got.items()):
            stale.append(spec.table)
    print("\n| GPU | software | timing | head dim | mask | tokens | fwd ms | model | bwd ms | model | fitted |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for res in published_residuals(rows):
        r = res.row
        role = "check" if (r.gpu_type, r.backend) in CHECK_ONLY else ("yes" if r.fitted else "no")
        mask = f"window {r.window}" if r.window else ("causal" if r.causal else "none")
        print(
            f"| {r.gpu_type} | {r.software} | {r.timing} | {r.head_dim} | {mask} | {r.seq} "
            f"| {r.fwd_s * 1e3:.3f} | {res.fwd_pct:+.1f}% | {r.bwd_s * 1e3:.3f} | {res.bwd_pct:+.1f}% | {role} |"
        )
    if args.check and stale:
        names = ", ".join(f"[{_table_name(t)}]" for t in stale)
        print(f"gpus.toml does not hold the fit of {names}: edit hetero_ns3/data/gpus.toml")
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
