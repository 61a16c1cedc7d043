"""GPU catalog: datasheet figures per GPU type, loaded from ``hetero_ns3/data/gpus.toml``.

All fields are SI: FLOP/s figures are stored in TFLOP/s as the datasheets print them (dense, no
sparsity) and converted by :meth:`GpuSpec.peak_flops`; bytes and bytes/s elsewhere.
"""

from __future__ import annotations

import functools
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from types import MappingProxyType
from typing import Any

from hetero_ns3.errors import PlanningError, ScenarioError, field_error
from hetero_ns3.paths import PACKAGE_DATA

CATALOG_PATH = PACKAGE_DATA / "gpus.toml"
PRECISIONS = ("bf16", "fp16", "fp8", "fp4")


@dataclass(frozen=True)
class GpuSpec:
    """One GPU type.

    Attributes:
        name: catalog name, e.g. ``"H100-SXM"``.
        vendor: ``"NVIDIA"`` or ``"AMD"``.
        architecture: e.g. ``"Hopper"``; selects the roofline efficiency table.
        bf16_tflops: dense BF16 tensor peak, TFLOP/s (None: no BF16 tensor cores, e.g. V100).
        fp16_tflops: dense FP16 tensor peak, TFLOP/s.
        fp8_tflops: dense FP8 tensor peak, TFLOP/s (None if not supported).
        fp4_tflops: dense FP4 (E2M1, block-scaled: NVFP4 / MXFP4) tensor peak, TFLOP/s (None if not supported).
        hbm_bytes: device memory capacity, bytes (datasheet GB read as GiB).
        hbm_bw_Bps: device memory bandwidth, bytes/s.
        nvlink_bw_Bps: per-GPU unidirectional bandwidth into a switched scale-up fabric
            (NVLink / Infinity Fabric), bytes/s; 0 when the GPU has none (PCIe only).
        nvlink_bridge_bw_Bps: unidirectional bandwidth of the NVLink bridge that joins a PCIe card to
            one paired card, bytes/s; 0 when the card takes no bridge. Used by ``nvlink_bridge`` fabrics.
        mesh_link_bw_Bps: unidirectional bandwidth of one direct GPU-to-GPU link of a fully connected
            scale-up fabric (AMD Infinity Fabric / xGMI), bytes/s; 0 when the GPU has none. Used by
            ``mesh`` fabrics.
        tdp_w: board power, W.
        sm_count: streaming multiprocessors (compute units on AMD), for GEMM wave quantization.
        source: datasheet URL (or citation) of the figures.
        note: free-text caveat.
        nvls: whether the GPU's NVSwitch fabric reduces and multicasts in the switch (NVLink SHARP,
            NCCL's NVLS algorithms): Hopper/Blackwell HGX, not A100.
        mamf_bf16: measured maximum achievable matmul throughput with BF16 inputs (best shape, mean
            of 100 back-to-back runs), as a fraction of the dense BF16 peak; None = not measured (the
            architecture's ``gemm`` efficiency applies). Scales the GEMM efficiency across
            generations relative to A100 (docs/compute.md, "Cross-generation rule").
        mamf_fp8: the same with FP8 (E4M3) inputs, as a fraction of the dense FP8 peak.
        mamf_source: where the two fractions were published.
        c2c_bw_Bps: per-direction bandwidth of the NVLink-C2C link to the CPU of a Grace superchip, bytes/s; 0 when
            the host is reached over PCIe (CPU activation offloading, :mod:`hetero_ns3.workload.offload`).
    """

    name: str
    vendor: str
    architecture: str
    bf16_tflops: float | None
    fp16_tflops: float
    fp8_tflops: float | None
    hbm_bytes: int
    hbm_bw_Bps: float
    nvlink_bw_Bps: float
    tdp_w: float
    sm_count: int
    source: str
    note: str = ""
    nvls: bool = False
    mamf_bf16: float | None = None
    mamf_fp8: float | None = None
    mamf_source: str = ""
    nvlink_bridge_bw_Bps: float = 0.0
    mesh_link_bw_Bps: float = 0.0
    fp4_tflops: float | None = None
    c2c_bw_Bps: float = 0.0

    def peak_flops(self, precision: str = "bf16") -> float:
        """Dense tensor-core peak in FLOP/s for ``precision`` (bf16, fp16, fp8 or fp4).

        Raises PlanningError when the GPU lacks that precision (e.g. BF16 on V100).
        """
        if precision not in PRECISIONS:
            raise ScenarioError(f"precision ({precision!r}) is not one of {list(PRECISIONS)}")
        tflops = getattr(self, f"{precision}_tflops")
        if tflops is None:
            have = [p for p in PRECISIONS if getattr(self, f"{p}_tflops") is not None]
            raise PlanningError(
                f"GPU {self.name} has no {precision.upper()} tensor cores; set compute.precision to one of {have}"
            )
        return float(tflops) * 1e12


_REQUIRED = ("fp16_tflops", "hbm_gib", "hbm_tbps", "tdp_w", "sm_count", "source", "architecture")
_KNOWN = set(_REQUIRED) | {
    "vendor",
    "bf16_tflops",
    "fp8_tflops",
    "fp4_tflops",
    "nvlink_gbps_bidir",
    "nvlink_bridge_gbps_bidir",
    "mesh_link_gbps_bidir",
    "note",
    "memory_type",
    "nvls",
    "mamf_bf16",
    "mamf_fp8",
    "mamf_source",
    "c2c_gbps_bidir",
}


def gpu_spec_from_table(name: str, table: Mapping[str, Any], where: str) -> GpuSpec:
    """Build a GpuSpec from one catalog table (units as in gpus.toml); ``where`` prefixes error paths."""
    unknown = sorted(set(table) - _KNOWN)
    if unknown:
        raise field_error(f"{where}.{unknown[0]}", table[unknown[0]], "is not a GPU field", f"valid: {sorted(_KNOWN)}")
    for key in _REQUIRED:
        if key not in table:
            raise ScenarioError(f"{where}.{key} is missing; a GPU entry needs {list(_REQUIRED)}")

    def num(key: str) -> float:
        v = table.get(key, 0.0)
        if isinstance(v, bool) or not isinstance(v, (int, float)) or v < 0:
            raise field_error(f"{where}.{key}", v, "must be a non-negative number")
        return float(v)

    def opt(key: str) -> float | None:
        return None if table.get(key) is None else num(key)

    def frac(key: str) -> float | None:
        v = opt(key)
        if v is not None and not 0 < v <= 1:
            raise field_error(f"{where}.{key}", v, "must be a fraction of the dense peak in (0, 1]", "e.g. 0.80")
        return v

    return GpuSpec(
        name=name,
        vendor=str(table.get("vendor", "NVIDIA")),
        architecture=str(table["architecture"]),
        bf16_tflops=opt("bf16_tflops"),
        fp16_tflops=num("fp16_tflops"),
        fp8_tflops=opt("fp8_tflops"),
        hbm_bytes=int(num("hbm_gib") * 2**30),
        hbm_bw_Bps=num("hbm_tbps") * 1e12,
        nvlink_bw_Bps=num("nvlink_gbps_bidir") * 1e9 / 2,
        tdp_w=num("tdp_w"),
        sm_count=int(num("sm_count")),
        source=str(table["source"]),
        note=str(table.get("note", "")),
        nvls=_flag(table, "nvls", where),
        mamf_bf16=frac("mamf_bf16"),
        mamf_fp8=frac("mamf_fp8"),
        mamf_source=str(table.get("mamf_source", "")),
        nvlink_bridge_bw_Bps=num("nvlink_bridge_gbps_bidir") * 1e9 / 2,
        mesh_link_bw_Bps=num("mesh_link_gbps_bidir") * 1e9 / 2,
        fp4_tflops=opt("fp4_tflops"),
        c2c_bw_Bps=num("c2c_gbps_bidir") * 1e9 / 2,
    )


def _flag(table: Mapping[str, Any], key: str, where: str) -> bool:
    v = table.get(key, False)
    if not isinstance(v, bool):
        raise field_error(f"{where}.{key}", v, "must be true or false")
    return v


def load_gpu_table(path: Path) -> dict[str, GpuSpec]:
    """Read the ``[gpu.NAME]`` tables of a catalog file into GpuSpecs."""
    with open(path, "rb") as fh:
        data = tomllib.load(fh)
    return {
        name: gpu_spec_from_table(name, tbl, f"{path.name}:gpu.{name}") for name, tbl in data.get("gpu", {}).items()
    }


@functools.cache
def _catalog() -> Mapping[str, GpuSpec]:
    return MappingProxyType(load_gpu_table(CATALOG_PATH))


def gpu_catalog() -> Mapping[str, GpuSpec]:
    """All GPU types shipped with hetero_ns3, by name (read-only mapping)."""
    return _catalog()


def get_gpu(name: str, extra: Mapping[str, GpuSpec] | None = None) -> GpuSpec:
    """The GpuSpec called ``name``; ``extra`` (user-defined types) is searched first.

    Raises ScenarioError listing the valid names when ``name`` is unknown.
    """
    if extra and name in extra:
        return extra[name]
    cat = gpu_catalog()
    if name in cat:
        return cat[name]
    valid = sorted(set(cat) | set(extra or {}))
    raise ScenarioError(f"GPU type {name!r} is not in the catalog; valid names: {valid}")
