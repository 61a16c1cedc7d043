"""The ``[faults]`` section: ``[[faults.gpus]]`` compute slowdowns and ``[[faults.links]]`` degraded or failed links."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from hetero_ns3.errors import ScenarioError, field_error


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
