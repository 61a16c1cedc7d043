"""Held-out FP8 training rows under variants of the roofline, to separate the effects (docs/compute.md).

    PYTHONPATH=. python scripts/compute_fp8_variants.py VARIANT

VARIANT: ``old`` (every GEMM and attention at the FP8 peak, no casts, architecture GEMM efficiency: the
model before Transformer Engine semantics and measured matmul ceilings), ``te_only`` (TE FP8 semantics,
no ceilings), ``mamf_only`` (ceilings, old FP8 semantics), ``no_cast`` (both, casts left out) or ``new``
(the shipped model). Variants patch the roofline in this process only; nothing is written.
"""

from __future__ import annotations

import sys
from dataclasses import replace
from pathlib import Path

import hetero_ns3.compute.roofline as R
from hetero_ns3.validation import simulate_scenario

CASES = {"llama2-7b-h100x8": 3.8704, "llama2-13b-h100x16": 3.7597, "llama3-8b-b200x8": 5.0401}
VARIANTS = ("old", "te_only", "mamf_only", "no_cast", "new")


def patch(variant: str) -> None:
    default_efficiency = R.default_efficiency
    if variant in ("old", "te_only"):
        R.default_efficiency = lambda gpu: default_efficiency(replace(gpu, mamf_bf16=None, mamf_fp8=None))
    if variant in ("old", "mamf_only"):
        R.Roofline.kernel_precision = lambda self, k: self.precision  # type: ignore[method-assign]
    if variant in ("old", "mamf_only", "no_cast"):
        R.cast_elements = lambda k: 0


def main(argv: list[str]) -> int:
    if len(argv) != 1 or argv[0] not in VARIANTS:
        print(f"usage: compute_fp8_variants.py {{{','.join(VARIANTS)}}}", file=sys.stderr)
        return 2
    patch(argv[0])
    base = Path(__file__).resolve().parent.parent / "hetero_ns3" / "data" / "validation" / "heldout"
    for name, published in CASES.items():
        t = simulate_scenario(base / f"{name}.toml")["step_time_s"]
        print(
            f"{argv[0]:9s} {name:20s} {t:.3f} s  published {published:.3f} s  error {100 * (t / published - 1):+.1f}%"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
