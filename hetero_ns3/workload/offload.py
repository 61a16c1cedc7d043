"""CPU activation offloading: Megatron-Core's ``cpu_offloading`` of activations (``[parallelism] cpu_offload_layers``).

Megatron-Core hands the layers to Transformer Engine's CPU offload context (default scheduling, read in TE's
``docs/features/other_optimizations/cpu_offloading``): the activations that the first ``N`` transformer layers save for
backward are copied to pinned host memory during the forward and copied back before that layer's backward, on one
offload stream, while at most ``M - N`` layers' activations (``M`` = the model's layers) are held on the GPU:

* forward: layer ``i < N``'s device-to-host copy starts when its forward is done (TE starts it a little earlier, as
  each tensor is saved; the whole layer here); the forward of layer ``j`` waits until the copy of layer
  ``j - (M - N)`` has finished, where that layer was offloaded;
* backward: the host-to-device copy of layer ``i < N`` starts when the backward of layer ``i + (M - N)`` has freed
  its activations, and the backward of layer ``i`` waits for it.

Copies of one GPU run in order on their own stream (a copy engine, no SMs), each ``bytes / rate`` long: the bytes are
the layer's saved activations of one micro-batch (:func:`hetero_ns3.workload.memory.layer_activation_bytes`, what the
memory model stops counting on the GPU), the rate that of the GPU's link to its host (:func:`host_link`). Megatron-Core
allows it only without pipeline parallelism and without recomputation; weights offloading
(``cpu_offloading_weights``) is not modelled. docs/workload.md "CPU activation offloading".
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from hetero_ns3.collectives.tuning import load_tuning
from hetero_ns3.compute.gpus import GpuSpec
from hetero_ns3.topology.loader import pcie_rate_bps
from hetero_ns3.workload.placement import GpuLike

if TYPE_CHECKING:
    from hetero_ns3.workload.compiler import _ProgramBuilder

#: The dimension (and category, stream set) of the copies: ``plan.lower`` runs them unscaled by a GPU's slowdown.
OFFLOAD_DIM = "offload"

#: NVLink-C2C copies as fractions of the link's 450 GB/s per direction: measured cudaMemcpy between a GH200's Grace
#: memory and its GPU, 375 GB/s host to device and 297 device to host (Schieffer et al., "Harnessing Integrated CPU-GPU
#: System Memory for HPC: a first look into Grace Hopper", ICPP 2024; the figures as reported by HPCwire, July 2024).
#: Carried to GB200 / GB300 (NVLink-C2C of the same rate; no measurement of theirs found).
C2C_D2H_FRACTION = 297.0 / 450.0
C2C_H2D_FRACTION = 375.0 / 450.0


@dataclass(frozen=True)
class HostLink:
    """A GPU's copy rates to and from pinned host memory, bytes/s."""

    d2h_Bps: float
    h2d_Bps: float


def host_link(gpu: GpuSpec, pcie_rate_bps: float) -> HostLink:
    """The copy rates of ``gpu``: over NVLink-C2C where the catalog gives one (``c2c_gbps_bidir``, a Grace superchip),
    else over its PCIe link (``pcie_rate_bps``, bit/s each direction) at the PCIe efficiency that the collectives use
    (``collectives/tuning.toml`` ``[links.pcie]``: fitted to published P2P copy bandwidths)."""
    if gpu.c2c_bw_Bps > 0:
        return HostLink(gpu.c2c_bw_Bps * C2C_D2H_FRACTION, gpu.c2c_bw_Bps * C2C_H2D_FRACTION)
    pcie = load_tuning().links["pcie"]
    rate = pcie_rate_bps / 8.0 * pcie.efficiency / pcie.wire_overhead
    return HostLink(rate, rate)


@dataclass(frozen=True)
class OffloadSpec:
    """What the compiler needs to emit the copies.

    Attributes:
        layers: offloaded layers ``N`` (the first ``N`` of the model).
        model_layers: the model's layers ``M``.
        layer_bytes: saved activation bytes of one micro-batch, per layer of the model.
        links: copy rates per GPU type.
    """

    layers: int
    model_layers: int
    layer_bytes: tuple[float, ...]
    links: Mapping[str, HostLink]


def offload_spec(
    layers: int, layer_bytes: Sequence[float], gpus: Sequence[GpuLike], gpu_of: Callable[[str], GpuSpec]
) -> OffloadSpec:
    """The copies of ``layers`` offloaded layers: ``layer_bytes``, each layer's saved activations of one micro-batch as
    the memory model counts them (:func:`hetero_ns3.workload.memory_plan.saved_activations`), and each GPU type's host
    link (the slowest PCIe link among its GPUs; a GPU without a PCIe rate, as a bare :class:`GpuLike`, counts as Gen5
    x16)."""
    pcie: dict[str, float] = {}
    for g in gpus:
        rate = float(getattr(g, "pcie_rate_bps", 0.0)) or pcie_rate_bps(5, 16)
        pcie[g.gpu_type] = min(rate, pcie.get(g.gpu_type, rate))
    links = {t: host_link(gpu_of(t), r) for t, r in pcie.items()}
    return OffloadSpec(layers, len(layer_bytes), tuple(layer_bytes), links)


class ActivationOffload:
    """Emits one worker's copies and the waits on them, unit by unit (``L<i>`` units; others, and every unit when
    ``spec`` is None, pass through)."""

    def __init__(self, spec: OffloadSpec | None) -> None:
        self.spec = spec if spec is not None and spec.layers > 0 else None
        self.resident = spec.model_layers - spec.layers if spec is not None else 0  # activation sets the GPU may hold
        self.copies: dict[tuple[str, int, int], int] = {}  # (direction, layer, micro-batch) -> copy op

    def _copy(
        self, spec: OffloadSpec, w: _ProgramBuilder, way: str, layer: int, name: str, phase: str, mb: int, chunk: int
    ) -> None:
        link = spec.links[w.gpu_type]
        nbytes = spec.layer_bytes[layer]
        rate = link.d2h_Bps if way == "d2h" else link.h2d_Bps
        after = w.flush()  # the unit's compute op
        deps = [] if after is None else [after]
        self.copies[(way, layer, mb)] = w.side(
            "compute", f"{name}.{way}", deps, phase, mb, chunk, bytes=nbytes, duration=nbytes / rate, dim=OFFLOAD_DIM
        )

    def _wait(self, w: _ProgramBuilder, way: str, layer: int, mb: int) -> None:
        op = self.copies.pop((way, layer, mb), None)
        if op is not None:
            w.flush()
            w.pending_join.append(op)

    def before(self, w: _ProgramBuilder, unit: str, phase: str, mb: int) -> None:
        """Before ``unit``'s forward: wait for the copy that frees a slot; before its backward: for its reload."""
        if self.spec is None or unit[0] != "L":
            return
        i = int(unit[1:])
        if phase == "F":
            self._wait(w, "d2h", i - self.resident, mb)
        else:
            self._wait(w, "h2d", i, mb)

    def after(self, w: _ProgramBuilder, unit: str, phase: str, name: str, mb: int, chunk: int) -> None:
        """After ``unit``'s forward: copy its activations out; after its backward: reload the layer it made room for."""
        spec = self.spec
        if spec is None or unit[0] != "L":
            return
        i = int(unit[1:])
        back = i - self.resident
        if phase == "F" and i < spec.layers:
            self._copy(spec, w, "d2h", i, name, phase, mb, chunk)
        elif phase == "B" and 0 <= back < spec.layers:
            self._copy(spec, w, "h2d", back, name.replace(f".L{i}", f".L{back}"), phase, mb, chunk)
