"""The ``ssd`` efficiency (Mamba-2's SSD scan kernels) fitted to a published kernel benchmark.

The roofline times an ``ssd`` kernel (:mod:`hetero_ns3.workload.mamba`) in ``max(FLOPs / (BF16 peak x ssd x
sustained), bytes / (HBM x memory)) + launch``, its FLOPs counted with the intra-chunk product's causal half. The one
public timing of such a kernel at training shapes is TileLang's benchmark of the chunk scan's forward
(``hetero_ns3/data/validation/ssd_published.csv``: tile-ai/tilelang ``benchmark/mamba2/README.md``, H800 SXM, batch 8,
80 heads of 64, one group, state 128, chunks of 256, six lengths from 1k to 32k; its throughput counts exactly these
FLOPs: ``2 b L Q H P / 2 + 2 b L H P N``). :func:`fit_ssd` takes the mean of its six rates as a fraction of H800's
dense BF16 peak (989.4 TFLOP/s): a kernel benchmark, so no ``sustained`` factor in the fit, as for GEMMs and attention.

What the fit assumes, stated where it is used: the rate of one kernel of the scan (the chunk scan: the largest
products) stands for all of them; TileLang's kernel for mamba_ssm's Triton ones, which Megatron-Core runs (TileLang's
own comparison, a figure without numbers, has it ahead of Triton: so the fit is an upper bound of the Triton rate);
and the same fraction of the BF16 peak on every GPU. :func:`chunk_scan_bytes` checks that the benchmark is not
bound by its bytes (it moves about 1.5 GB/ms, under half the HBM rate): the fit measures the kernel's compute.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass
from pathlib import Path

from hetero_ns3.compute.gpus import get_gpu
from hetero_ns3.inputs import read_csv_rows
from hetero_ns3.paths import PACKAGE_DATA

PUBLISHED_CSV = PACKAGE_DATA / "validation" / "ssd_published.csv"
COLUMNS = (
    "gpu_type",
    "kernel",
    "batch",
    "seq_len",
    "heads",
    "groups",
    "chunk",
    "head_dim",
    "state",
    "latency_ms",
    "tflops",
    "source",
)


@dataclass(frozen=True)
class SsdBenchmark:
    """One published SSD kernel timing: its shape, latency (s) and the GPU it ran on."""

    gpu_type: str
    batch: int
    seq_len: int
    heads: int
    groups: int
    chunk: int
    head_dim: int
    state: int
    latency_s: float
    tflops: float
    source: str

    @property
    def flops(self) -> float:
        """FLOPs of the chunk scan as counted (the intra-chunk product's causal half and the states' output)."""
        tokens_heads = self.batch * self.seq_len * self.heads
        return tokens_heads * self.head_dim * (self.chunk + 2.0 * self.state)

    def fraction(self) -> float:
        """The measured rate as a fraction of the GPU's dense BF16 peak."""
        return self.flops / self.latency_s / get_gpu(self.gpu_type).peak_flops("bf16")


def load_published(path: str | Path = PUBLISHED_CSV) -> list[SsdBenchmark]:
    """The published table; errors name the row and the column."""
    out = []
    for r in read_csv_rows(path, "SSD kernel benchmark table", COLUMNS):
        out.append(
            SsdBenchmark(
                r["gpu_type"],
                int(r["batch"]),
                int(r["seq_len"]),
                int(r["heads"]),
                int(r["groups"]),
                int(r["chunk"]),
                int(r["head_dim"]),
                int(r["state"]),
                float(r["latency_ms"]) * 1e-3,
                float(r["tflops"]),
                r["source"],
            )
        )
    return out


def fit_ssd(rows: list[SsdBenchmark]) -> tuple[float, list[float]]:
    """(the fitted ``ssd``: the mean fraction of peak, each row's time error of the model at that value: model /
    measured - 1)."""
    fractions = [r.fraction() for r in rows]
    fit = statistics.fmean(fractions)
    return fit, [f / fit - 1.0 for f in fractions]


def chunk_scan_bytes(r: SsdBenchmark, element_bytes: float = 2.0) -> float:
    """HBM bytes the benchmarked chunk scan moves at least (FP16 tensors, each read or written once): C B^T per chunk
    and group, x, dt and its cumulative sum, C, the chunk states, and the output."""
    tokens = r.batch * r.seq_len
    cb = tokens * r.groups * r.chunk
    x = out = tokens * r.heads * r.head_dim
    dt = 2 * tokens * r.heads
    c = tokens * r.groups * r.state
    states = tokens // r.chunk * r.heads * r.head_dim * r.state
    return element_bytes * (cb + x + out + dt + c + states)
