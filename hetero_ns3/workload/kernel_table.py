"""What the roofline charges, kernel by kernel: one row per kernel (and per collective call) of a plan's layer,
embedding and output-layer programs, per GPU type.

The compiled workload merges consecutive kernels into one compute op (:mod:`hetero_ns3.workload.compiler`), so its
ops say how long a stretch of compute takes but not what it is made of. This table is the view a profiler's kernel
summary gives: for one micro-batch of each distinct layer kind (dense or MoE, a hybrid model's blocks, and its
attention window), the forward and backward programs' kernels with their FLOPs, HBM bytes, modelled seconds and the rates those imply;
collectives are listed with their NCCL size and group, their time being the network's (``seconds`` is NaN).
``hetero-ns3 plan --kernels`` prints it and writes ``kernels.csv`` (docs/workload.md "Kernel table").

Units: FLOPs, bytes, seconds; rates in TFLOP/s and GB/s (10^9 bytes per second).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass, fields

from hetero_ns3.workload.compiler import StepPrograms
from hetero_ns3.workload.steps import Comm, Compute

#: Program names of :meth:`StepPrograms.program` and what they hold.
PROGRAMS = {
    "layer_f": "layer forward",
    "layer_b": "layer backward",
    "emb_f": "embedding forward (first stage)",
    "emb_b": "embedding backward (first stage)",
    "head_f": "output layer and loss forward (last stage)",
    "head_b": "output layer and loss backward (last stage)",
}


@dataclass(frozen=True)
class KernelRow:
    """One kernel or collective call of one program on one GPU type (one micro-batch).

    Attributes:
        gpu_type: the GPU type the kernel is timed on.
        program: ``layer_f``, ``layer_b``, ``emb_f``, ``emb_b``, ``head_f`` or ``head_b`` (:data:`PROGRAMS`).
        layer: the first layer of its kind (0-based; -1 for the embedding and output-layer programs).
        layer_kind: ``dense`` or ``moe`` (a hybrid model's ``mamba``, ``attention``, ``mlp`` or ``moe mlp``), with
            ``window N`` for a sliding-window layer; ``-`` otherwise.
        step: the program step the kernel belongs to (``attn``, ``moe.experts``, ...).
        kernel: the kernel's name (``qkv``, ``fc1.wgrad``, ``act.clamp``, ...) or the collective's step name.
        op: ``gemm``, ``memory``, ``attention_fwd`` / ``attention_bwd``, ``ssd`` (Mamba-2's scan), or for a collective its
            kind
            (``all_to_all``, ...).
        group: the collective's group (``tp``, ``ep``, ``cp``); empty for kernels.
        flops: floating-point operations as model FLOPs count them (a causal or windowed attention kernel its whole
            square or band).
        executed_flops: the part the GPU executes (:meth:`hetero_ns3.compute.roofline.Roofline.work_fraction`:
            the tiles inside the causal mask or window, the head dimension padded to the kernel's tile).
        bytes: HBM bytes the kernel moves; for a collective its NCCL size.
        seconds: modelled kernel time; NaN for a collective (the network's time, not the roofline's).
    """

    gpu_type: str
    program: str
    layer: int
    layer_kind: str
    step: str
    kernel: str
    op: str
    group: str
    flops: float
    executed_flops: float
    bytes: float
    seconds: float

    @property
    def tflops_per_s(self) -> float:
        """Achieved TFLOP/s of the kernel, executed FLOPs over its time (0 for memory-bound kernels and collectives)."""
        return self.executed_flops / self.seconds / 1e12 if self.executed_flops and self.seconds > 0 else 0.0

    @property
    def gbytes_per_s(self) -> float:
        """Achieved HBM GB/s of the kernel (0 for collectives)."""
        return self.bytes / self.seconds / 1e9 if self.seconds > 0 else 0.0

    def record(self) -> dict[str, float | int | str]:
        """The row as a flat dict with the two rates (the columns of ``kernels.csv``)."""
        return {**asdict(self), "tflops_per_s": self.tflops_per_s, "gbytes_per_s": self.gbytes_per_s}


COLUMNS = (*(f.name for f in fields(KernelRow)), "tflops_per_s", "gbytes_per_s")
"""Columns of ``kernels.csv``, in order."""


def _kind_label(block: str, window: int) -> str:
    return block + (f" window {window}" if window else "")


def _layer_kinds(progs: StepPrograms) -> list[tuple[int, str]]:
    """(first layer, label) of each distinct layer kind, in layer order."""
    return [(first, _kind_label(*kind)) for kind, (first, _) in progs.spec.model.layer_kinds().items()]


def kernel_rows(
    progs: StepPrograms, gpu_types: Iterable[str], programs: Sequence[str] = tuple(PROGRAMS)
) -> list[KernelRow]:
    """Every kernel and collective of ``programs`` for each of ``gpu_types``: the layer programs once per distinct
    layer kind (its first layer), the embedding and output-layer programs once. Each kernel is timed alone
    (:meth:`StepPrograms.cost` of a one-kernel tuple), so a step's rows sum to the step's modelled time."""
    unknown = sorted(set(programs) - set(PROGRAMS))
    if unknown:
        raise ValueError(f"programs {unknown} are not among {sorted(PROGRAMS)}")
    rows: list[KernelRow] = []
    kinds = _layer_kinds(progs)
    roofline = progs.spec.roofline
    for gpu_type in gpu_types:
        gpu = progs.spec.gpu_of(gpu_type)
        for what in programs:
            layered = what.startswith("layer")
            for layer, label in kinds if layered else [(-1, "-")]:
                for st in progs.program(what, max(layer, 0)):
                    if isinstance(st, Compute):
                        for k in st.kernels:
                            f, b, t = progs.cost(gpu_type, (k,))
                            done = f * roofline.work_fraction(k, gpu) if k.op != "memory" else 0.0
                            row = KernelRow(gpu_type, what, layer, label, st.name, k.name, k.op, "", f, done, b, t)
                            rows.append(row)
                    elif isinstance(st, Comm):
                        rows.append(
                            KernelRow(
                                gpu_type, what, layer, label, st.name, st.name, st.collective, st.dim, 0.0, 0.0,
                                float(st.bytes), math.nan,
                            )
                        )  # fmt: skip
    return rows


def format_rows(rows: Sequence[KernelRow]) -> str:
    """A text table of ``rows``: one block per GPU type and program, with each program's compute total and the
    shares of it in GEMMs, attention kernels, memory-bound kernels and (hybrid models) the SSD scan's kernels."""
    lines: list[str] = []
    key: tuple[str, str, int] | None = None
    total = 0.0
    by_kind: dict[str, float] = {}

    def close() -> None:
        if key is not None:
            shares = ", ".join(f"{k} {100 * v / total:.0f}%" for k, v in sorted(by_kind.items()) if total > 0)
            lines.append(f"{'':<24} {'total compute':<18} {'':<14} {total * 1e3:>10.3f} ms  ({shares})")

    for r in rows:
        if (r.gpu_type, r.program, r.layer) != key:
            close()
            key, total, by_kind = (r.gpu_type, r.program, r.layer), 0.0, {}
            where = f"layer {r.layer} ({r.layer_kind})" if r.layer >= 0 else ""
            lines.append(f"{r.gpu_type}  {PROGRAMS[r.program]} {where}".rstrip())
            lines.append(f"{'step':<24} {'kernel':<18} {'op':<14} {'time':>13} {'TFLOP/s':>9} {'GB/s':>8} {'MB':>9}")
        if math.isnan(r.seconds):
            lines.append(f"{r.step:<24} {'':<18} {r.op + ' (' + r.group + ')':<14} {'network':>13} {'':>9} {'':>8} "
                         f"{r.bytes / 1e6:>9.1f}")  # fmt: skip
            continue
        total += r.seconds
        kind = "attention" if r.op.startswith("attention") else r.op
        by_kind[kind] = by_kind.get(kind, 0.0) + r.seconds
        lines.append(
            f"{r.step:<24} {r.kernel:<18} {r.op:<14} {r.seconds * 1e6:>10.1f} us {r.tflops_per_s:>9.1f} "
            f"{r.gbytes_per_s:>8.0f} {r.bytes / 1e6:>9.1f}"
        )
    close()
    return "\n".join(lines)
