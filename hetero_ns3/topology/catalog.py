"""Access to the GPU catalog (``hetero_ns3.compute.gpus``), imported lazily."""

from __future__ import annotations

from hetero_ns3.errors import ScenarioError


def gpu_names() -> list[str]:
    """Names of the GPU types in the catalog."""
    from hetero_ns3.compute.gpus import gpu_catalog

    return sorted(gpu_catalog())


def _rate_bps(name: str, attribute: str) -> float:
    """A ``GpuSpec`` bandwidth attribute of ``name`` (bytes/s, each direction) in bit/s; 0 when it has none."""
    from hetero_ns3.compute.gpus import get_gpu

    return float(getattr(get_gpu(name), attribute, 0.0) or 0.0) * 8.0


def nvlink_rate_bps(name: str) -> float:
    """Per-GPU NVLink bandwidth of ``name`` in bit/s, each direction (0 when it has none)."""
    return _rate_bps(name, "nvlink_bw_Bps")


def nvlink_bridge_rate_bps(name: str) -> float:
    """NVLink-bridge bandwidth of ``name`` to its paired card in bit/s, each direction (0 when it has none)."""
    return _rate_bps(name, "nvlink_bridge_bw_Bps")


def mesh_link_rate_bps(name: str) -> float:
    """Bandwidth of one direct GPU-to-GPU link of ``name``'s mesh fabric in bit/s, each direction (0: none)."""
    return _rate_bps(name, "mesh_link_bw_Bps")


def nvls_capable(name: str) -> bool:
    """Whether ``name``'s NVSwitch fabric supports NVLink SHARP (catalog flag ``nvls``)."""
    from hetero_ns3.compute.gpus import get_gpu

    return bool(getattr(get_gpu(name), "nvls", False))


def check_gpu(name: object, path: str) -> str:
    """Return ``name`` if it is a catalog GPU type, else raise a ScenarioError naming ``path``."""
    names = gpu_names()
    if not isinstance(name, str) or name not in names:
        raise ScenarioError(f"{path} ({name!r}) is not a GPU type in the catalog; use one of {names}")
    return name
