"""Validated configuration of the native RoCE network (PFC, ECN, buffers, NIC, congestion control).

Every field is an SI number (bytes, seconds, bit/s). The table from these fields to the native module's
ns-3 attributes, and their rendering, live with the packet backend (:mod:`hetero_ns3.network.ns3.attributes`);
this module is plain data and validation, used by both backends, and does not import ns-3.

Defaults and their sources are listed in ``docs/roce.md``.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from types import MappingProxyType
from typing import Any, Literal

from hetero_ns3.errors import field_error
from hetero_ns3.network.cc_presets import DEFAULT_PRESETS, PRESETS
from hetero_ns3.plan.dag import ECMP_KEYS

CC_KINDS: dict[str, str] = {
    "none": "ns3::RdmaCcNone",
    "dcqcn": "ns3::RdmaDcqcn",
    "hpcc": "ns3::RdmaHpcc",
    "dctcp": "ns3::RdmaDctcp",
    "timely": "ns3::RdmaTimely",
}
"""Congestion-control kinds and the ns-3 TypeId implementing each."""

SCHEDULERS: dict[str, str] = {"strict": "Strict", "wrr": "Wrr"}
"""Port schedulers between traffic classes and their ns-3 enum names."""


HPCC_BASE_RTT_MODES = ("global", "per_flow")
"""Named values of ``cc.hpcc.base_rtt`` (else seconds)."""


def _positive(path: str, value: float, fix: str = "") -> None:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value <= 0:
        raise field_error(path, value, "must be a positive number", fix)


def _non_negative(path: str, value: float, fix: str = "") -> None:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value < 0:
        raise field_error(path, value, "must be a non-negative number", fix)


def _int_range(path: str, value: int, lo: int, hi: int) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or not lo <= value <= hi:
        raise field_error(path, value, f"must be an integer in [{lo}, {hi}]")


def _fraction(path: str, value: float, lo_open: bool = True) -> None:
    ok = (
        isinstance(value, (int, float))
        and not isinstance(value, bool)
        and (0 < value <= 1 if lo_open else 0 <= value <= 1)
    )
    if not ok:
        raise field_error(path, value, "must be in (0, 1]" if lo_open else "must be in [0, 1]")


def _given(obj: Any) -> dict[str, Any]:
    """Fields of a preset-backed config that were set explicitly (not None)."""
    return {f.name: getattr(obj, f.name) for f in fields(obj) if getattr(obj, f.name) is not None}


@dataclass(frozen=True)
class DcqcnConfig:
    """DCQCN reaction-point parameters (Zhu et al., SIGCOMM 2015).

    Every field defaults to None: its value then comes from the preset (``cc.preset``, see
    :mod:`hetero_ns3.network.cc_presets`); a value set here overrides the preset.
    """

    g: float | None = None
    """Gain of the alpha moving average, applied once per alpha update interval (paper: 1/256)."""
    alpha_update_interval_s: float | None = None
    """Alpha update period, seconds: alpha = (1-g) alpha + g if a CNP arrived in it, else (1-g) alpha."""
    rate_increase_interval_s: float | None = None
    """Rate increase timer T, seconds (paper: 55 us)."""
    byte_counter_bytes: int | None = None
    """Rate increase byte counter B, bytes (paper: 10 MB); 0 disables it (timer-only stages)."""
    fast_recovery_steps: int | None = None
    """Fast recovery steps F (paper: 5)."""
    rate_ai_bps: float | None = None
    """Additive increase step R_AI, bit/s (paper: 40 Mbps)."""
    rate_hai_bps: float | None = None
    """Hyper increase step R_HAI, bit/s."""
    increase_reference_rate_bps: float | None = None
    """When > 0, R_AI and R_HAI are given at this line rate and scale with each queue pair's line rate."""
    min_rate_bps: float | None = None
    """Lower bound of the sending rate, bit/s."""
    rate_decrease_interval_s: float | None = None
    """At most one rate decrease per interval, seconds; later CNPs are served at its end."""
    clamp_target_rate: bool | None = None
    """Set Rt = Rc on every cut (the paper's pseudocode); False (NICs' clamp_tgt_rate = 0): only when the
    rate increased since the last cut."""
    decrease_on_period: bool | None = None
    """NIC style (HPCC artifact, ConnectX rate_reduce_monitor_period): a CNP only flags the flow; a periodic
    check every ``rate_decrease_interval_s`` from its first CNP cuts once if flagged, so the first CNP cuts
    nothing by itself. False (the paper's reaction point): a CNP cuts at once."""

    def __post_init__(self) -> None:
        if self.g is not None:
            _fraction("cc.dcqcn.g", self.g)
        for name in ("alpha_update_interval_s", "rate_increase_interval_s", "rate_ai_bps", "rate_hai_bps"):
            if getattr(self, name) is not None:
                _positive(f"cc.dcqcn.{name}", getattr(self, name))
        if self.min_rate_bps is not None:
            _positive("cc.dcqcn.min_rate_bps", self.min_rate_bps)
        for name in ("rate_decrease_interval_s", "increase_reference_rate_bps"):
            if getattr(self, name) is not None:
                _non_negative(f"cc.dcqcn.{name}", getattr(self, name))
        if self.byte_counter_bytes is not None:
            _int_range("cc.dcqcn.byte_counter_bytes", self.byte_counter_bytes, 0, 2**62)
        if self.fast_recovery_steps is not None:
            _int_range("cc.dcqcn.fast_recovery_steps", self.fast_recovery_steps, 1, 1000)


@dataclass(frozen=True)
class HpccConfig:
    """HPCC sender parameters (Li et al., SIGCOMM 2019); None fields come from the preset."""

    eta: float | None = None
    """Target utilization (paper: 0.95)."""
    max_stage: int | None = None
    """Additive-increase stages before a multiplicative update (paper: maxStage = 5)."""
    rate_ai_bps: float | None = None
    """Additive increase as a rate, bit/s: W_AI = rate_ai x base RTT."""
    min_rate_bps: float | None = None
    """Lower bound of the sending rate, bit/s."""
    base_rtt: Literal["global", "per_flow"] | float | None = field(default=None, metadata={"unit": "time"})
    """T of Algorithm 1 (window = rate x T, INT queue term q / (B T), W_AI = rate_ai x T): ``"global"`` one
    network-wide T, the largest base RTT over host pairs (paper's parameter section; artifact ``GLOBAL_T 1``),
    ``"per_flow"`` each flow's own path base RTT, or a time (``"12us"``, seconds) for every flow."""

    def __post_init__(self) -> None:
        if self.base_rtt is not None and self.base_rtt not in HPCC_BASE_RTT_MODES:
            _positive("cc.hpcc.base_rtt", self.base_rtt, 'use "global", "per_flow" or seconds, e.g. 12e-6')  # type: ignore[arg-type]
        if self.eta is not None and not (isinstance(self.eta, (int, float)) and 0.01 <= self.eta <= 1.0):
            raise field_error("cc.hpcc.eta", self.eta, "must be in [0.01, 1]", "the paper uses 0.95")
        if self.max_stage is not None:
            _int_range("cc.hpcc.max_stage", self.max_stage, 0, 1000)
        for name in ("rate_ai_bps", "min_rate_bps"):
            if getattr(self, name) is not None:
                _positive(f"cc.hpcc.{name}", getattr(self, name))


@dataclass(frozen=True)
class DctcpConfig:
    """DCTCP sender parameters (Alizadeh et al., SIGCOMM 2010), window-based with ECN echo per ACK."""

    g: float = 1.0 / 16
    """Gain of the marked-fraction moving average alpha (paper: 1/16)."""
    min_rate_bps: float = 100e6
    """Lower bound of the sending rate, bit/s (window >= min_rate x base RTT)."""

    def __post_init__(self) -> None:
        _fraction("cc.dctcp.g", self.g)
        _positive("cc.dctcp.min_rate_bps", self.min_rate_bps)


@dataclass(frozen=True)
class TimelyConfig:
    """TIMELY sender parameters (Mittal et al., SIGCOMM 2015, Algorithm 1), rate-based on RTT samples.

    None: the preset's value (:data:`~hetero_ns3.network.cc_presets.TIMELY_PRESETS`; default ``paper``)."""

    alpha: float | None = None
    """EWMA weight of the newest RTT difference."""
    beta: float | None = None
    """Multiplicative decrease factor."""
    t_low_s: float | None = None
    """Below this RTT the rate only grows additively, seconds."""
    t_high_s: float | None = None
    """Above this RTT the rate is cut by beta (1 - T_high / RTT), seconds."""
    min_rtt_s: float | None = None
    """Normalizer of the RTT gradient, seconds."""
    rate_ai_bps: float | None = None
    """Additive increment delta per update, bit/s."""
    hai_count: int | None = None
    """Consecutive non-positive gradients after which the increment is ``hai_factor`` x delta."""
    hai_factor: int | None = None
    """Increment multiple N in hyper-active increase."""
    min_rate_bps: float | None = None
    """Lower bound of the sending rate, bit/s."""

    def __post_init__(self) -> None:
        for name in ("alpha", "beta"):
            if getattr(self, name) is not None:
                _fraction(f"cc.timely.{name}", getattr(self, name))
        for name in ("t_low_s", "t_high_s", "min_rtt_s", "rate_ai_bps", "min_rate_bps"):
            if getattr(self, name) is not None:
                _positive(f"cc.timely.{name}", getattr(self, name))
        for name in ("hai_count", "hai_factor"):
            if getattr(self, name) is not None:
                _int_range(f"cc.timely.{name}", getattr(self, name), 1, 1_000_000)


@dataclass(frozen=True)
class CcConfig:
    """Congestion control: which strategy, its preset and explicit parameter overrides."""

    kind: str = "dcqcn"
    """``none`` (line rate), ``dcqcn``, ``hpcc``, ``dctcp`` or ``timely``."""
    preset: str | None = None
    """Named parameter set of ``kind`` (:data:`~hetero_ns3.network.cc_presets.PRESETS`); None: the
    kind's default (DCQCN ``hpcc-artifact``, HPCC ``paper``). Fields set in ``dcqcn`` / ``hpcc`` override it."""
    dcqcn: DcqcnConfig = field(default_factory=DcqcnConfig)
    hpcc: HpccConfig = field(default_factory=HpccConfig)
    dctcp: DctcpConfig = field(default_factory=DctcpConfig)
    timely: TimelyConfig = field(default_factory=TimelyConfig)
    lazy_alpha: bool = True
    """Simulation shortcut, not a DCQCN parameter: apply DCQCN's per-period alpha updates when alpha is next
    used (a CNP, a cut, the return to line rate) instead of one timer event per ``alpha_update_interval_s``
    per rate-limited flow; same arithmetic, same results (docs/roce.md, "DCQCN"). False: the timer events."""
    lazy_decrease: bool = True
    """Simulation shortcut, not a DCQCN parameter: with ``dcqcn.decrease_on_period``, schedule a periodic rate
    decrease check only when a CNP has set its flag (a check without it does nothing), ordered among same-time
    events as the periodic one; same results (docs/roce.md, "DCQCN"). False: one event per
    ``rate_decrease_interval_s`` per rate-limited flow. Needs the default event scheduler (else periodic)."""

    def __post_init__(self) -> None:
        if self.kind not in CC_KINDS:
            raise field_error("cc.kind", self.kind, "is not a known congestion control", f"use one of {list(CC_KINDS)}")
        if self.preset is not None:
            names = PRESETS.get(self.kind, {})
            if self.preset not in names:
                fix = f"use one of {list(names)}" if names else f"cc.kind = {self.kind!r} has no presets; remove it"
                raise field_error("cc.preset", self.preset, f"is not a preset of {self.kind}", fix)
        if self.kind == "timely":
            p = self.timely_params()
            if p["t_high_s"] <= p["t_low_s"]:
                fix = f"set cc.timely.t_high_s above t_low_s = {p['t_low_s']}"
                raise field_error("cc.timely.t_high_s", p["t_high_s"], "must exceed cc.timely.t_low_s", fix)

    def _preset_of(self, kind: str) -> Mapping[str, Any]:
        name = self.preset if self.kind == kind and self.preset is not None else DEFAULT_PRESETS[kind]
        return PRESETS[kind][name]

    def dcqcn_params(self) -> dict[str, Any]:
        """Resolved DCQCN parameters: the preset's values, overridden by the fields set in ``dcqcn``."""
        values = dict(self._preset_of("dcqcn"))
        values.update(_given(self.dcqcn))
        return values

    def timely_params(self) -> dict[str, Any]:
        """Resolved TIMELY parameters: the preset's values, overridden by the fields set in ``timely``."""
        values = dict(self._preset_of("timely"))
        values.update(_given(self.timely))
        return values

    def hpcc_params(self) -> dict[str, Any]:
        """Resolved HPCC parameters: the preset's values, overridden by the fields set in ``hpcc``."""
        values = dict(self._preset_of("hpcc"))
        values.update(_given(self.hpcc))
        return values


@dataclass(frozen=True)
class PfcConfig:
    """IEEE 802.1Qbb priority flow control at switches."""

    enabled: bool = True
    """PFC on: lossless classes are paused instead of dropped."""
    lossless_classes: tuple[int, ...] = (0, 1, 2, 3, 4, 5, 6, 7)
    """Traffic classes that are lossless when PFC is on."""
    dynamic_threshold: bool = True
    """Dynamic PAUSE threshold: alpha x free shared buffer (else static_threshold_bytes)."""
    alpha: float = 0.125
    """Alpha of the dynamic threshold."""
    static_threshold_bytes: int = 256 * 1024
    """Static PAUSE threshold per ingress (port, class), bytes."""
    resume_offset_bytes: int = 3 * 1024
    """RESUME once ingress bytes are this far below the threshold, bytes."""
    headroom_bytes: int = 0
    """Headroom reserved per ingress port, bytes; 0 = 2 x rate x delay + 3 frames (per port)."""
    pause_quanta: int = 0xFFFF
    """Quanta in PAUSE frames (1 quantum = 512 bit times); refreshed at half time while congested."""

    def __post_init__(self) -> None:
        for i, c in enumerate(self.lossless_classes):
            _int_range(f"pfc.lossless_classes[{i}]", c, 0, 7)
        _positive("pfc.alpha", self.alpha)
        _int_range("pfc.static_threshold_bytes", self.static_threshold_bytes, 0, 2**62)
        _int_range("pfc.resume_offset_bytes", self.resume_offset_bytes, 0, 2**62)
        _int_range("pfc.headroom_bytes", self.headroom_bytes, 0, 2**62)
        _int_range("pfc.pause_quanta", self.pause_quanta, 1, 0xFFFF)

    @property
    def lossless_mask(self) -> int:
        """Bit mask of lossless classes."""
        return sum(1 << c for c in set(self.lossless_classes))


@dataclass(frozen=True)
class EcnConfig:
    """RED-like ECN marking at switch egress."""

    enabled: bool = True
    kmin_bytes: int = 100_000
    """Kmin at ``reference_rate_bps`` (HPCC's published ns-3 setting: 100 KB at 25 Gbps)."""
    kmax_bytes: int = 400_000
    """Kmax at ``reference_rate_bps`` (400 KB at 25 Gbps)."""
    pmax: float = 0.2
    """Marking probability at Kmax."""
    reference_rate_bps: float = 25e9
    """Rate at which kmin/kmax apply, bit/s."""
    scale_with_rate: bool = True
    """Scale kmin/kmax linearly with each port's rate (400 KB / 1.6 MB at 100 Gbps)."""

    def __post_init__(self) -> None:
        _int_range("ecn.kmin_bytes", self.kmin_bytes, 0, 2**62)
        _int_range("ecn.kmax_bytes", self.kmax_bytes, 0, 2**62)
        if self.kmax_bytes < self.kmin_bytes:
            raise field_error("ecn.kmax_bytes", self.kmax_bytes, f"must be >= ecn.kmin_bytes ({self.kmin_bytes})")
        _fraction("ecn.pmax", self.pmax, lo_open=False)
        _positive("ecn.reference_rate_bps", self.reference_rate_bps)


@dataclass(frozen=True)
class BufferConfig:
    """Switch shared buffer."""

    switch_buffer_bytes: int = 32 * 1024 * 1024
    """Buffer of a switch whose graph node has ``buffer_bytes == 0``, bytes."""
    egress_dynamic: bool = True
    """Dynamic egress threshold for lossy classes (alpha x free shared buffer)."""
    egress_alpha: float = 1.0
    """Alpha of the dynamic egress threshold."""
    egress_static_threshold_bytes: int = 1024 * 1024
    """Static egress threshold per (port, class) for lossy classes, bytes."""

    def __post_init__(self) -> None:
        _int_range("buffer.switch_buffer_bytes", self.switch_buffer_bytes, 1, 2**62)
        _positive("buffer.egress_alpha", self.egress_alpha)
        _int_range("buffer.egress_static_threshold_bytes", self.egress_static_threshold_bytes, 0, 2**62)


COALESCED_ACK_INTERVAL = 16
"""Default DATA frames per ACK for congestion control without ACK-clocked feedback (``none``, ``dcqcn``):
64 KiB of payload per ACK at the 4096-byte RoCE MTU. InfiniBand RC (and so RoCEv2) lets a responder
coalesce acknowledgements, one cumulative ACK covering several request packets."""

DEFAULT_SEGMENTS: Mapping[str, int] = MappingProxyType({"network": 4096, "nvlink": 65536, "pcie": 4096})


PACING_ON_RATE_CHANGE = ("rescale", "frame_gap", "keep")
"""Values of ``nic.pacing_on_rate_change``."""


@dataclass(frozen=True)
class NicConfig:
    """RDMA NIC: segmentation, headers, ACKs, CNPs, retransmission."""

    segment_bytes: Mapping[str, int] = field(default_factory=lambda: DEFAULT_SEGMENTS)
    """DATA payload bytes per frame by link kind (RoCE path MTU 4096; NVLink 64 KiB segments)."""
    default_segment_bytes: int = 4096
    """Payload bytes per frame on link kinds missing from ``segment_bytes``."""
    header_bytes: int = 62
    """DATA frame overhead: Ethernet 14 + IPv4 20 + UDP 8 + BTH 12 + ICRC 4 + FCS 4."""
    ack_bytes: int = 64
    """Wire bytes of ACK / NACK / CNP frames."""
    int_header_bytes: int = 42
    """Extra bytes per DATA frame when the strategy uses INT (HPCC)."""
    ack_interval: int | None = None
    """One ACK per this many in-order DATA frames (coalescing); the last frame of a flow and a frame that
    fills the sender's window are acknowledged at once (BTH AckReq). None: 1 with HPCC and DCTCP (per-packet
    INT feedback, per-packet ECN echo), :data:`COALESCED_ACK_INTERVAL` with ``none`` / ``dcqcn`` (rate control
    by CNPs, not ACKs) and ``timely`` (one RTT sample per 64 KiB, the paper's completion event). See ``docs/roce.md``."""
    cnp_interval_s: float | None = None
    """At most one CNP per queue pair per interval, seconds; 0: one per ECN-marked frame. None: the DCQCN
    preset's value (``paper``: N = 50 us; ``connectx``: 4 us; ``hpcc-artifact``: 0)."""
    send_cnp: bool | None = None
    """The receiver sends a CNP frame for ECN-marked DATA (the DCQCN notification point). None: only with
    ``cc.kind = "dcqcn"``, the one strategy that reacts to CNPs; HPCC, DCTCP, TIMELY and ``none`` ignore them,
    and each CNP would still take wire time on the reverse path and perturb those runs."""
    nack_interval_s: float = 10e-6
    """Minimum time between two NACKs for the same byte, seconds."""
    retransmit_timeout_s: float = 1e-3
    """Go-back-N timeout without progress, seconds."""
    ack_priority: int = 7
    """Traffic class of ACK / NACK / CNP frames."""
    use_window: bool = False
    """Limit inflight to one BDP for strategies without a window (none, dcqcn)."""
    reorder_tolerant: bool = False
    """Keep out-of-order DATA instead of go-back-N discard (for packet spraying); losses then wait for the
    retransmission timeout."""
    pacing_on_rate_change: Literal["rescale", "frame_gap", "keep"] = "rescale"
    """What a pacing-rate change does to the gap before a queue pair's next frame: ``rescale`` (a token
    bucket: the part still owed scales by old / new rate), ``frame_gap`` (one whole gap of the new rate
    after the last frame, whatever of the old gap has passed: the HPCC artifact's ``RdmaHw::ChangeRate``)
    or ``keep`` (the gap computed when the last frame left stands: the artifact's DCQCN); docs/roce.md,
    "Reference implementation"."""

    def __post_init__(self) -> None:
        for kind, size in self.segment_bytes.items():
            _int_range(f"nic.segment_bytes.{kind}", size, 1, 2**31)
        _int_range("nic.default_segment_bytes", self.default_segment_bytes, 1, 2**31)
        _int_range("nic.header_bytes", self.header_bytes, 0, 65535)
        _int_range("nic.ack_bytes", self.ack_bytes, 1, 65535)
        _int_range("nic.int_header_bytes", self.int_header_bytes, 0, 65535)
        if self.ack_interval is not None:
            _int_range("nic.ack_interval", self.ack_interval, 1, 1 << 20)
        if self.cnp_interval_s is not None:
            _non_negative("nic.cnp_interval_s", self.cnp_interval_s)
        _non_negative("nic.nack_interval_s", self.nack_interval_s)
        _positive("nic.retransmit_timeout_s", self.retransmit_timeout_s)
        if self.pacing_on_rate_change not in PACING_ON_RATE_CHANGE:
            raise field_error(
                "nic.pacing_on_rate_change",
                self.pacing_on_rate_change,
                f"must be one of {list(PACING_ON_RATE_CHANGE)}",
                '"rescale" (default, a token bucket), "frame_gap" (the HPCC artifact) or "keep" (its DCQCN)',
            )
        _int_range("nic.ack_priority", self.ack_priority, 0, 7)

    def ack_interval_for(self, cc_kind: str) -> int:
        """DATA frames per ACK under congestion control ``cc_kind`` (resolves the ``None`` default)."""
        if self.ack_interval is not None:
            return self.ack_interval
        return 1 if cc_kind in ("hpcc", "dctcp") else COALESCED_ACK_INTERVAL

    def segment_for(self, link_kind: str) -> int:
        """Payload bytes per DATA frame on a link of ``link_kind``."""
        return int(self.segment_bytes.get(link_kind, self.default_segment_bytes))


@dataclass(frozen=True)
class RoutingConfig:
    """ECMP and port scheduling."""

    ecmp_seed: int = 0
    """Seed of the per-flow ECMP hash (mixed with each switch's id)."""
    packet_spray: bool = False
    """Per-packet spraying (hash includes the sequence number) instead of per-flow ECMP."""
    ecmp_key: str = "connection"
    """In plan replays (:func:`hetero_ns3.network.ns3.replay.run_plan`), what a flow's UDP source port (its
    ECMP identity) is derived from: ``connection`` (NCCL-like persistent queue pair: every message of
    one (source, destination, category, channel) connection takes the same path, see
    ``ExecutionPlan.flow_connections``) or ``flow`` (each flow task its own port). Flow tables
    (``simulate_flows``) always hash per flow. Spraying still re-hashes every packet."""
    scheduler: str = "strict"
    """Between traffic classes: ``strict`` priority (class 7 first) or ``wrr``."""
    wrr_weights: tuple[int, ...] = (1, 1, 1, 1, 1, 1, 1, 1)
    """Weights of classes 0..7 for ``wrr``."""

    def __post_init__(self) -> None:
        _int_range("routing.ecmp_seed", self.ecmp_seed, 0, 2**32 - 1)
        if self.ecmp_key not in ECMP_KEYS:
            raise field_error("routing.ecmp_key", self.ecmp_key, "is unknown", f"use one of {list(ECMP_KEYS)}")
        if self.scheduler not in SCHEDULERS:
            raise field_error("routing.scheduler", self.scheduler, "is unknown", f"use one of {list(SCHEDULERS)}")
        if len(self.wrr_weights) != 8:
            raise field_error("routing.wrr_weights", self.wrr_weights, "must have 8 entries (classes 0..7)")
        for i, w in enumerate(self.wrr_weights):
            _int_range(f"routing.wrr_weights[{i}]", w, 1, 1 << 20)


@dataclass(frozen=True)
class NetworkConfig:
    """Everything the native RoCE backend needs besides the graph and the flows."""

    cc: CcConfig = field(default_factory=CcConfig)
    pfc: PfcConfig = field(default_factory=PfcConfig)
    ecn: EcnConfig = field(default_factory=EcnConfig)
    buffer: BufferConfig = field(default_factory=BufferConfig)
    nic: NicConfig = field(default_factory=NicConfig)
    routing: RoutingConfig = field(default_factory=RoutingConfig)
