"""Scenario sections of the co-simulation: ``[network]``, ``[run]``, ``[faults]``, ``[collectives]``.

Registered with :mod:`hetero_ns3.scenario.registry` at import (the registry imports this module).

``[network]`` is :class:`hetero_ns3.network.config.NetworkConfig` (congestion control, PFC, ECN,
buffers, NIC segmentation, routing). Its byte, second and bit/s fields (names ending in ``_bytes``,
``_s``, ``_bps``) also take unit strings such as ``"1MiB"``, ``"50us"``, ``"40Mbps"``.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

from hetero_ns3.cosim.lower import CollectiveOverride
from hetero_ns3.errors import ScenarioError, field_error
from hetero_ns3.network.config import NetworkConfig
from hetero_ns3.scenario.fields import load_dataclass
from hetero_ns3.scenario.registry import register_section
from hetero_ns3.units import parse_rate, parse_size, parse_time


# -- [network] ----------------------------------------------------------------------------------
def _with_units(table: Any, where: str) -> Any:
    """Convert unit strings in keys ending with ``_bytes`` / ``_s`` / ``_bps`` to SI numbers."""
    if not isinstance(table, Mapping):
        return table
    out: dict[str, Any] = {}
    for key, value in table.items():
        path = f"{where}.{key}"
        if isinstance(value, Mapping):
            out[key] = _with_units(value, path)
        elif isinstance(value, str) and key.endswith("_bytes"):
            out[key] = parse_size(value, path, allow_zero=True)
        elif isinstance(value, str) and key.endswith("_s"):
            out[key] = parse_time(value, path)
        elif isinstance(value, str) and key.endswith("_bps"):
            out[key] = parse_rate(value, path)
        else:
            out[key] = value
    return out


def load_network_section(table: Mapping[str, Any], where: str = "network") -> NetworkConfig:
    """``[network]`` -> NetworkConfig; errors carry the full dotted path (``network.cc.kind``)."""
    try:
        return load_dataclass(NetworkConfig, _with_units(table, where), where)
    except ScenarioError as err:
        msg = str(err)
        raise ScenarioError(msg if msg.startswith(where) else f"{where}.{msg}") from None


# -- [run] --------------------------------------------------------------------------------------
@dataclass(frozen=True)
class RunSection:
    """How to run the scenario."""

    backend: Literal["ns3", "analytic"] = "ns3"
    """``ns3``: packet level (the native RoCE module); ``analytic``: flow level (max-min fair sharing)."""
    seed: int = 1
    """Seed of every random choice (ECMP hashing, ECN marking); same seed, same results."""
    stall_limit: float = dataclasses.field(default=60.0, metadata={"unit": "time"})
    """Packet level: stop (and report a failed run) after this much simulated time without progress."""
    iterations: int = 1
    """Training iterations to simulate back to back (>= 1). With N >= 2 the reported iteration time
    and breakdown are the mean over iterations 2..N (steady state); see docs/cosim.md."""

    def validate(self, where: str = "run") -> None:
        if self.iterations < 1:
            raise field_error(
                f"{where}.iterations", self.iterations, "must be an integer >= 1", "e.g. --set run.iterations=3"
            )
        if not 1 <= self.seed < 2**32:
            raise field_error(f"{where}.seed", self.seed, "must be an integer in [1, 2**32)")
        if not self.stall_limit > 0:
            raise field_error(f"{where}.stall_limit", self.stall_limit, "must be a positive time", "e.g. '60s'")


# -- [faults] -----------------------------------------------------------------------------------
@dataclass(frozen=True)
class GpuSlowdown:
    """Compute on the selected GPUs takes ``factor`` times longer (a straggler what-if)."""

    factor: float
    """Duration multiplier, > 0 (2.0 = half speed)."""
    gpu: str | None = None
    """One GPU by name (e.g. ``n3.g5``)."""
    gpu_type: str | None = None
    """Every GPU of a type (e.g. ``A100-SXM-80GB``)."""
    node: int | None = None
    """Every GPU of a node index."""

    def validate(self, where: str) -> None:
        if not self.factor > 0:
            raise field_error(f"{where}.factor", self.factor, "must be > 0", "e.g. 1.5 for 50% slower")
        if sum(x is not None for x in (self.gpu, self.gpu_type, self.node)) != 1:
            raise ScenarioError(f"{where} needs exactly one of gpu, gpu_type or node to select GPUs")


@dataclass(frozen=True)
class LinkFaultSpec:
    """Link between nodes ``a`` and ``b`` runs at ``rate_factor`` x its rate (0 = down) from ``at`` on."""

    a: str
    b: str
    rate_factor: float = 0.0
    at: float = dataclasses.field(default=0.0, metadata={"unit": "time"})

    def validate(self, where: str) -> None:
        if not 0.0 <= self.rate_factor <= 1.0:
            raise field_error(f"{where}.rate_factor", self.rate_factor, "must be in [0, 1]", "0 takes the link down")


@dataclass(frozen=True)
class FaultsSection:
    """Injected faults: ``[[faults.gpus]]`` slowdowns and ``[[faults.links]]`` degraded or failed links."""

    gpus: tuple[GpuSlowdown, ...] = ()
    links: tuple[LinkFaultSpec, ...] = ()

    def validate(self, where: str = "faults") -> None:
        for i, g in enumerate(self.gpus):
            g.validate(f"{where}.gpus[{i}]")
        for i, lf in enumerate(self.links):
            lf.validate(f"{where}.links[{i}]")


# -- [collectives] ------------------------------------------------------------------------------
@dataclass(frozen=True)
class DimCollectives:
    """Fixed choices for one parallel dimension's collectives; unset fields are left to the selector."""

    algo: str | None = None
    protocol: str | None = None
    channels: int | None = None
    priority: int | None = None
    """Traffic class (0..7) of this dimension's flows."""

    def validate(self, where: str) -> None:
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

    def validate(self, where: str = "collectives") -> None:
        for dim in ("tp", "pp", "dp", "ep"):
            getattr(self, dim).validate(f"{where}.{dim}")
        for name in ("max_channels", "max_slices", "slice_bytes", "max_flows_per_call"):
            value = getattr(self, name)
            if value is not None and value < 1:
                raise field_error(f"{where}.{name}", value, "must be >= 1")

    def tuning_overrides(self) -> dict[str, int]:
        names = ("max_channels", "max_slices", "slice_bytes", "max_flows_per_call")
        return {n: int(getattr(self, n)) for n in names if getattr(self, n) is not None}

    def overrides(self) -> dict[str, CollectiveOverride]:
        out = {}
        for dim in ("tp", "pp", "dp", "ep"):
            ov = getattr(self, dim).override()
            if ov is not None:
                out[dim] = ov
        return out

    def priorities(self) -> dict[str, int]:
        return {d: p for d in ("tp", "pp", "dp", "ep") if (p := getattr(self, d).priority) is not None}


register_section(
    "network", NetworkConfig, loader=load_network_section, doc="congestion control, PFC, ECN, buffers, NIC"
)
register_section("run", RunSection, doc="backend (ns3 | analytic), seed, stall_limit, iterations")
register_section("faults", FaultsSection, doc="[[faults.gpus]] slowdowns and [[faults.links]] degraded links")
register_section("collectives", CollectivesSection, doc="[collectives.tp|pp|dp|ep] algo / protocol / channels")
