"""Per-GPU metadata the results layer needs: GPU type (for aggregation) and node (intra vs inter)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from hetero_ns3.errors import PlanningError


@dataclass(frozen=True)
class GpuMeta:
    """What the breakdown needs to know about one GPU."""

    gpu_type: str
    """GPU model name, e.g. ``H100``; the breakdown is aggregated per type."""
    node: int | str
    """Node (server) the GPU sits in: a flow between two GPUs of one node is intra-node."""
    slowdown: float = 1.0
    """Compute time of this GPU for a given piece of work relative to the fastest GPU of the run
    (its GPU type's time per layer over the fastest type's, times any injected ``faults.gpus``
    factor); 1 = as fast as the fastest. Only a slower peer's compute is straggler wait."""

    def __post_init__(self) -> None:
        if not self.slowdown > 0:
            raise PlanningError(f"GpuMeta.slowdown ({self.slowdown!r}) must be > 0 (1 = the fastest GPU of the run)")


GpuMetaLike = GpuMeta | tuple[str, int | str] | Mapping[str, Any]


def _one(name: str, value: GpuMetaLike) -> GpuMeta:
    if isinstance(value, GpuMeta):
        return value
    if isinstance(value, Mapping):
        try:
            return GpuMeta(str(value["gpu_type"]), value["node"], float(value.get("slowdown", 1.0)))
        except KeyError as err:
            raise PlanningError(f"gpu_meta[{name!r}] lacks key {err}; give gpu_type and node") from None
    if isinstance(value, tuple | list) and len(value) == 2:
        return GpuMeta(str(value[0]), value[1])
    raise PlanningError(f"gpu_meta[{name!r}] ({value!r}) is not a GpuMeta, (gpu_type, node) or mapping")


ENDPOINT_TYPE = "nvls"
"""``gpu_type`` of a plan endpoint that is not a GPU (an NVSwitch's NVLS endpoint ``n3.nvls``, which
the collective planner adds to plans): summaries leave such entries out of the per-GPU breakdown."""


def is_endpoint(name: str) -> bool:
    """Whether plan endpoint ``name`` is an NVSwitch's NVLS endpoint (``n<i>.nvls``, topology/fabric.py)."""
    return name.endswith(".nvls")


def resolve_gpu_meta(gpus: Sequence[str], gpu_meta: Mapping[str, GpuMetaLike] | None) -> tuple[GpuMeta, ...]:
    """One :class:`GpuMeta` per entry of ``gpus``.

    With ``gpu_meta=None`` the node is the part of the name before the first dot (``n3.g5`` ->
    ``n3``) and the type is ``"gpu"``. NVLS endpoints (:func:`is_endpoint`) not in ``gpu_meta``
    get type :data:`ENDPOINT_TYPE` and the node of the GPUs of their server (``n3.*``).
    """
    if gpu_meta is None:
        return tuple(GpuMeta(ENDPOINT_TYPE if is_endpoint(g) else "gpu", g.split(".", 1)[0]) for g in gpus)
    out = []
    node_of: dict[str, int | str] = {}  # server prefix (``n3``) -> node as the GPUs' metadata gives it
    for g in gpus:
        if g not in gpu_meta and is_endpoint(g):
            pre = g.split(".", 1)[0]
            if not node_of:
                for name, value in gpu_meta.items():
                    node_of.setdefault(str(name).split(".", 1)[0], _one(name, value).node)
            out.append(GpuMeta(ENDPOINT_TYPE, node_of.get(pre, pre)))
            continue
        if g not in gpu_meta:
            raise PlanningError(f"gpu_meta has no entry for GPU {g!r}; give (gpu_type, node) for every plan GPU")
        out.append(_one(g, gpu_meta[g]))
    return tuple(out)
