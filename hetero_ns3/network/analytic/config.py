"""Configuration of the flow-level (``analytic``) network backend.

Everything is SI: bytes, seconds. A :class:`Framing` says how a link kind packs payload into packets;
it sets both the goodput of a link (``rate * payload / (payload + overhead)``) and the size of the one
packet that every store-and-forward hop serializes before forwarding.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType

from hetero_ns3.errors import field_error
from hetero_ns3.plan.dag import ECMP_KEYS

#: RoCEv2 per-packet overhead in bytes: Ethernet header 14 + FCS 4 + IPv4 20 + UDP 8 + IB BTH 12 + ICRC 4.
ROCEV2_HEADER_BYTES = 14 + 4 + 20 + 8 + 12 + 4
#: Ethernet preamble + start-of-frame delimiter (8) and minimum inter-frame gap (12), in bytes.
ETHERNET_PREAMBLE_IFG_BYTES = 8 + 12
#: Packet backend defaults (NicConfig.segment_bytes, header_bytes): same frames on every link kind.
DEFAULT_KIND_FRAMING = {"nvlink": (65536, ROCEV2_HEADER_BYTES), "pcie": (4096, ROCEV2_HEADER_BYTES)}
#: Event-loop implementations.
ENGINES = ("auto", "native", "numpy")


@dataclass(frozen=True)
class Framing:
    """How one link kind carries payload: ``payload_bytes`` per packet plus ``overhead_bytes`` on the wire."""

    payload_bytes: int = 4096
    """Maximum payload of one packet in bytes (the MTU payload; RDMA path-MTU data)."""
    overhead_bytes: int = ROCEV2_HEADER_BYTES
    """Wire bytes per packet beyond the payload: headers, trailers, preamble and inter-frame gap if modelled."""

    def __post_init__(self) -> None:
        if not isinstance(self.payload_bytes, int) or self.payload_bytes <= 0:
            raise field_error("framing.payload_bytes", self.payload_bytes, "must be a positive integer", "e.g. 1000")
        if not isinstance(self.overhead_bytes, int) or self.overhead_bytes < 0:
            raise field_error("framing.overhead_bytes", self.overhead_bytes, "must be an integer >= 0", "e.g. 62")

    @property
    def efficiency(self) -> float:
        """Goodput / line rate: ``payload / (payload + overhead)`` (dimensionless)."""
        return self.payload_bytes / (self.payload_bytes + self.overhead_bytes)


@dataclass(frozen=True)
class AnalyticConfig:
    """Settings of the flow-level backend (see docs/analytic.md)."""

    framing: Framing = Framing()
    """Framing of every link kind not named in ``kind_framing`` (default: RoCEv2, 4096-byte payload)."""
    kind_framing: Mapping[str, Framing] = field(
        default_factory=lambda: {k: Framing(*v) for k, v in DEFAULT_KIND_FRAMING.items()}
    )
    """Per link kind (``network``, ``nvlink``, ``pcie``...) framing overrides; the default matches the packet
    backend's NIC segmentation (``hetero_ns3.network.config.NicConfig``): NVLink 64 KiB segments."""
    store_and_forward: bool = True
    """Add, for every hop after the first, the serialization time of one packet to the path latency."""
    time_tolerance_s: float = 1e-12
    """Flows whose drain times lie within this many seconds of the earliest one finish together (batching)."""
    incremental: bool = True
    """Keep, when flows start or end, the rates the change provably cannot alter (exact); False recomputes
    every rate at every change (slower; for cross-checks)."""
    ecmp_hash: str = "flow"
    """How a flow picks among equal-cost next hops: ``flow`` hashes (flow id, node, seed); ``packet`` uses
    the packet backend's switch hash (``RoceNode::SelectPort``, ``seed`` = its ``routing.ecmp_seed``) with
    the UDP source port derived from the connection id (``ecmp_key = "connection"``) or from the flow's
    number in task order (``"flow"``, which reproduces the packet backend's per-flow paths when flows are
    released in task order, e.g. flows that all start together); for cross-checks."""
    ecmp_key: str = "connection"
    """What a flow's ECMP hash identifies: ``connection`` (default) hashes the flow's connection id
    (:meth:`hetero_ns3.plan.dag.ExecutionPlan.flow_connections`: one NCCL-like queue pair per source GPU,
    destination GPU, category and channel) in place of its own id, so all messages of a connection take
    one path, as their RoCEv2 UDP source port is the same; ``flow`` hashes every flow task on its own
    (each message its own path; the behaviour before connections were modelled). Flows given without
    connections (:func:`~hetero_ns3.network.analytic.simulate_flows`) are each their own connection."""
    engine: str = "auto"
    """Event loop: ``native`` (C, compiled on first use with the system compiler), ``numpy`` (pure
    Python/numpy, same algorithm, slower), or ``auto`` (native when a compiler works, else numpy)."""

    def __post_init__(self) -> None:
        if not isinstance(self.framing, Framing):
            raise field_error("analytic.framing", self.framing, "must be a Framing", "use Framing(payload, overhead)")
        if not isinstance(self.kind_framing, Mapping):
            raise field_error("analytic.kind_framing", self.kind_framing, "must be a mapping kind -> Framing")
        for kind, fr in self.kind_framing.items():
            if not isinstance(fr, Framing):
                raise field_error(f"analytic.kind_framing.{kind}", fr, "must be a Framing", "use Framing(4096, 62)")
        object.__setattr__(self, "kind_framing", MappingProxyType(dict(self.kind_framing)))
        if not isinstance(self.store_and_forward, bool):
            raise field_error("analytic.store_and_forward", self.store_and_forward, "must be true or false")
        if self.ecmp_hash not in ("flow", "packet"):
            raise field_error("analytic.ecmp_hash", self.ecmp_hash, "is not a hash", "use 'flow' or 'packet'")
        if self.ecmp_key not in ECMP_KEYS:
            raise field_error("analytic.ecmp_key", self.ecmp_key, "is not an ECMP key", f"use one of {list(ECMP_KEYS)}")
        if self.engine not in ENGINES:
            raise field_error("analytic.engine", self.engine, "is not an engine", f"use one of {list(ENGINES)}")
        if not isinstance(self.incremental, bool):
            raise field_error("analytic.incremental", self.incremental, "must be true or false")
        if not (isinstance(self.time_tolerance_s, int | float) and 0 <= self.time_tolerance_s < 1e-6):
            raise field_error(
                "analytic.time_tolerance_s", self.time_tolerance_s, "must be in [0, 1e-6) s", "e.g. 1e-12"
            )

    @classmethod
    def like_nic(cls, nic: object, **kwargs: object) -> AnalyticConfig:
        """Framing taken from a packet-backend NIC config (``segment_bytes``, ``default_segment_bytes``,
        ``header_bytes``), so that both backends see the same goodput; ``kwargs`` set the other fields."""
        hdr = int(nic.header_bytes)  # type: ignore[attr-defined]
        kinds = {k: Framing(int(v), hdr) for k, v in nic.segment_bytes.items()}  # type: ignore[attr-defined]
        return cls(framing=Framing(int(nic.default_segment_bytes), hdr), kind_framing=kinds, **kwargs)  # type: ignore[attr-defined, arg-type]

    def framing_of(self, kind: str) -> Framing:
        """The framing used on links of ``kind``."""
        return self.kind_framing.get(kind, self.framing)
