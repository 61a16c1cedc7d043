"""The ``[collectives]`` section: per-dimension algorithm / protocol / channel choices and plan granularity."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from hetero_ns3.collectives.types import PROTOCOLS, CollectiveOverride
from hetero_ns3.errors import field_error


@dataclass(frozen=True)
class DimCollectives:
    """Fixed choices for one parallel dimension's collectives; unset fields are left to the selector."""

    algo: str | None = None
    protocol: str | None = None
    channels: int | None = None
    priority: int | None = None
    """Traffic class (0..7) of this dimension's flows."""

    def validate(self, where: str) -> None:
        if self.algo is not None:
            from hetero_ns3.collectives.registry import algorithms, load_schedule_dir

            load_schedule_dir()  # user schedules in collectives/schedules are algorithms too
            known = sorted(algorithms())
            if self.algo not in known:
                raise field_error(f"{where}.algo", self.algo, "is not a known algorithm", f"use one of {known}")
        if self.protocol is not None and self.protocol not in PROTOCOLS:
            raise field_error(f"{where}.protocol", self.protocol, "is not a protocol", f"use one of {list(PROTOCOLS)}")
        if self.channels is not None and not 1 <= self.channels <= 64:
            raise field_error(f"{where}.channels", self.channels, "must be in 1..64")
        if self.priority is not None and not 0 <= self.priority <= 7:
            raise field_error(f"{where}.priority", self.priority, "must be a traffic class 0..7")

    def override(self) -> CollectiveOverride | None:
        if self.algo is None and self.protocol is None and self.channels is None:
            return None
        return CollectiveOverride(self.algo, self.protocol, self.channels)


@dataclass(frozen=True)
class CollectivesSection:
    """Per-dimension collective overrides (``[collectives.dp] algo = "ring"``) and plan granularity.

    ``tuning`` replaces ``collectives/tuning.toml``; the granularity fields override single values of
    it. Fewer channels and slices give smaller plans (faster, less memory) at the cost of
    chunk-level pipelining detail: use them for large clusters (see docs/cosim.md).
    """

    tp: DimCollectives = DimCollectives()
    pp: DimCollectives = DimCollectives()
    dp: DimCollectives = DimCollectives()
    ep: DimCollectives = DimCollectives()
    cp: DimCollectives = DimCollectives()
    tuning: str | None = None
    """Path of a tuning TOML (same format as collectives/tuning.toml)."""
    max_channels: int | None = None
    """Upper bound on channels per call."""
    max_slices: int | None = None
    """Upper bound on pipelining slices per channel and step."""
    slice_bytes: int | None = dataclasses.field(default=None, metadata={"unit": "size"})
    """Target slice size per channel and step."""
    max_flows_per_call: int | None = None
    """Fewer slices when a call would emit more flows than this."""
    inter_node_ring_channels: int | None = None
    """Channels of calls with one rank per node (data-parallel rings across nodes), as NCCL sets them: 2
    for one NIC per GPU. Unset: the ``max_channels`` rule for every call (``Tuning.inter_node_ring_channels``)."""

    def validate(self, where: str = "collectives") -> None:
        for dim in ("tp", "pp", "dp", "ep", "cp"):
            getattr(self, dim).validate(f"{where}.{dim}")
        for name in ("max_channels", "max_slices", "slice_bytes", "max_flows_per_call", "inter_node_ring_channels"):
            value = getattr(self, name)
            if value is not None and value < 1:
                raise field_error(f"{where}.{name}", value, "must be >= 1")

    def tuning_overrides(self) -> dict[str, int]:
        names = ("max_channels", "max_slices", "slice_bytes", "max_flows_per_call", "inter_node_ring_channels")
        return {n: int(getattr(self, n)) for n in names if getattr(self, n) is not None}

    def overrides(self) -> dict[str, CollectiveOverride]:
        out = {}
        for dim in ("tp", "pp", "dp", "ep", "cp"):
            ov = getattr(self, dim).override()
            if ov is not None:
                out[dim] = ov
        return out

    def priorities(self) -> dict[str, int]:
        return {d: p for d in ("tp", "pp", "dp", "ep", "cp") if (p := getattr(self, d).priority) is not None}
