"""The one table from ``[network]`` settings to our ns-3 module's attributes, and its rendering.

Every tunable of the native RoCE module (``network/ns3/native``) is a ``TypeId`` attribute; this table says
which config field sets which attribute and how its value is written. Both engines (the C ABI and cppyy)
apply :func:`attribute_settings` before building a network; ``tests/ns3/test_capi.py`` checks that every
mapped attribute exists on its registered TypeId, ``tests/unit/test_roce_config.py`` that each is mapped once.
Adding a setting: a field in :mod:`hetero_ns3.network.config`, its attribute in C++, one row here.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from hetero_ns3.network.config import (
    CC_KINDS,
    HPCC_BASE_RTT_MODES,
    PACING_ON_RATE_CHANGE,
    SCHEDULERS,
    NetworkConfig,
)


@dataclass(frozen=True)
class AttributeBinding:
    """One row of the mapping table: a config field and the ns-3 attribute it sets."""

    path: str
    """Dotted field path in :class:`NetworkConfig` (a few are derived, see :func:`_lookup`)."""
    type_id: str
    attribute: str
    kind: str
    """How to render the value: int, float, bool, time, rate, typeid, enum, str."""


ATTRIBUTE_MAP: tuple[AttributeBinding, ...] = (
    AttributeBinding("cc.kind", "ns3::RdmaNic", "CongestionControl", "typeid"),
    AttributeBinding("cc.dcqcn.g", "ns3::RdmaDcqcn", "G", "float"),
    AttributeBinding("cc.dcqcn.alpha_update_interval_s", "ns3::RdmaDcqcn", "AlphaUpdateInterval", "time"),
    AttributeBinding("cc.dcqcn.rate_increase_interval_s", "ns3::RdmaDcqcn", "RateIncreaseInterval", "time"),
    AttributeBinding("cc.dcqcn.byte_counter_bytes", "ns3::RdmaDcqcn", "ByteCounter", "int"),
    AttributeBinding("cc.dcqcn.fast_recovery_steps", "ns3::RdmaDcqcn", "FastRecoverySteps", "int"),
    AttributeBinding("cc.dcqcn.rate_ai_bps", "ns3::RdmaDcqcn", "RateAi", "rate"),
    AttributeBinding("cc.dcqcn.rate_hai_bps", "ns3::RdmaDcqcn", "RateHai", "rate"),
    AttributeBinding("cc.dcqcn.increase_reference_rate_bps", "ns3::RdmaDcqcn", "IncreaseReferenceRate", "rate"),
    AttributeBinding("cc.dcqcn.min_rate_bps", "ns3::RdmaDcqcn", "MinRate", "rate"),
    AttributeBinding("cc.dcqcn.rate_decrease_interval_s", "ns3::RdmaDcqcn", "RateDecreaseInterval", "time"),
    AttributeBinding("cc.dcqcn.clamp_target_rate", "ns3::RdmaDcqcn", "ClampTargetRate", "bool"),
    AttributeBinding("cc.dcqcn.decrease_on_period", "ns3::RdmaDcqcn", "DecreaseOnPeriod", "bool"),
    AttributeBinding("cc.lazy_alpha", "ns3::RdmaDcqcn", "LazyAlpha", "bool"),
    AttributeBinding("cc.lazy_decrease", "ns3::RdmaDcqcn", "LazyDecrease", "bool"),
    AttributeBinding("cc.hpcc.eta", "ns3::RdmaHpcc", "Eta", "float"),
    AttributeBinding("cc.hpcc.max_stage", "ns3::RdmaHpcc", "MaxStage", "int"),
    AttributeBinding("cc.hpcc.rate_ai_bps", "ns3::RdmaHpcc", "RateAi", "rate"),
    AttributeBinding("cc.hpcc.min_rate_bps", "ns3::RdmaHpcc", "MinRate", "rate"),
    AttributeBinding("cc.hpcc.base_rtt", "ns3::RdmaHpcc", "BaseRtt", "time"),
    AttributeBinding("cc.dctcp.g", "ns3::RdmaDctcp", "G", "float"),
    AttributeBinding("cc.dctcp.min_rate_bps", "ns3::RdmaDctcp", "MinRate", "rate"),
    AttributeBinding("cc.timely.alpha", "ns3::RdmaTimely", "Alpha", "float"),
    AttributeBinding("cc.timely.beta", "ns3::RdmaTimely", "Beta", "float"),
    AttributeBinding("cc.timely.t_low_s", "ns3::RdmaTimely", "TLow", "time"),
    AttributeBinding("cc.timely.t_high_s", "ns3::RdmaTimely", "THigh", "time"),
    AttributeBinding("cc.timely.min_rtt_s", "ns3::RdmaTimely", "MinRtt", "time"),
    AttributeBinding("cc.timely.rate_ai_bps", "ns3::RdmaTimely", "RateAi", "rate"),
    AttributeBinding("cc.timely.hai_count", "ns3::RdmaTimely", "HaiCount", "int"),
    AttributeBinding("cc.timely.hai_factor", "ns3::RdmaTimely", "HaiFactor", "int"),
    AttributeBinding("cc.timely.min_rate_bps", "ns3::RdmaTimely", "MinRate", "rate"),
    AttributeBinding("pfc.enabled", "ns3::RoceMmu", "PfcEnabled", "bool"),
    AttributeBinding("pfc.lossless_mask", "ns3::RoceMmu", "LosslessClasses", "int"),
    AttributeBinding("pfc.dynamic_threshold", "ns3::RoceMmu", "PfcDynamic", "bool"),
    AttributeBinding("pfc.alpha", "ns3::RoceMmu", "PfcAlpha", "float"),
    AttributeBinding("pfc.static_threshold_bytes", "ns3::RoceMmu", "PfcStaticThresholdBytes", "int"),
    AttributeBinding("pfc.resume_offset_bytes", "ns3::RoceMmu", "PfcResumeOffsetBytes", "int"),
    AttributeBinding("pfc.headroom_bytes", "ns3::RoceMmu", "HeadroomBytes", "int"),
    AttributeBinding("pfc.pause_quanta", "ns3::RoceMmu", "PauseQuanta", "int"),
    AttributeBinding("buffer.switch_buffer_bytes", "ns3::RoceMmu", "BufferBytes", "int"),
    AttributeBinding("buffer.egress_dynamic", "ns3::RoceMmu", "EgressDynamic", "bool"),
    AttributeBinding("buffer.egress_alpha", "ns3::RoceMmu", "EgressAlpha", "float"),
    AttributeBinding("buffer.egress_static_threshold_bytes", "ns3::RoceMmu", "EgressStaticThresholdBytes", "int"),
    AttributeBinding("ecn.enabled", "ns3::RoceSwitch", "EcnEnabled", "bool"),
    AttributeBinding("ecn.kmin_bytes", "ns3::RoceSwitch", "EcnKminBytes", "int"),
    AttributeBinding("ecn.kmax_bytes", "ns3::RoceSwitch", "EcnKmaxBytes", "int"),
    AttributeBinding("ecn.pmax", "ns3::RoceSwitch", "EcnPmax", "float"),
    AttributeBinding("ecn.reference_rate_bps", "ns3::RoceSwitch", "EcnReferenceRate", "rate"),
    AttributeBinding("ecn.scale_with_rate", "ns3::RoceSwitch", "EcnScaleWithRate", "bool"),
    AttributeBinding("nic.default_segment_bytes", "ns3::RoceNetDevice", "SegmentBytes", "int"),
    AttributeBinding("nic.header_bytes", "ns3::RdmaNic", "HeaderBytes", "int"),
    AttributeBinding("nic.ack_bytes", "ns3::RdmaNic", "AckBytes", "int"),
    AttributeBinding("nic.int_header_bytes", "ns3::RdmaNic", "IntHeaderBytes", "int"),
    AttributeBinding("nic.ack_interval", "ns3::RdmaNic", "AckInterval", "int"),
    AttributeBinding("nic.cnp_interval_s", "ns3::RdmaNic", "CnpInterval", "time"),
    AttributeBinding("nic.send_cnp", "ns3::RdmaNic", "SendCnp", "bool"),
    AttributeBinding("nic.nack_interval_s", "ns3::RdmaNic", "NackInterval", "time"),
    AttributeBinding("nic.retransmit_timeout_s", "ns3::RdmaNic", "RetransmitTimeout", "time"),
    AttributeBinding("nic.ack_priority", "ns3::RdmaNic", "AckPriority", "int"),
    AttributeBinding("nic.use_window", "ns3::RdmaNic", "UseWindow", "bool"),
    AttributeBinding("nic.reorder_tolerant", "ns3::RdmaNic", "ReorderTolerant", "bool"),
    AttributeBinding("nic.pacing_on_rate_change", "ns3::RdmaNic", "PacingRule", "int"),
    AttributeBinding("routing.ecmp_seed", "ns3::RoceNode", "EcmpSeed", "int"),
    AttributeBinding("routing.packet_spray", "ns3::RoceNode", "PacketSpray", "bool"),
    AttributeBinding("routing.scheduler", "ns3::RoceNetDevice", "Scheduler", "enum"),
    AttributeBinding("routing.wrr_weights", "ns3::RoceNetDevice", "WrrWeights", "str"),
)
"""The one table from config fields to ns-3 attributes (tested against the registered TypeIds)."""


def _lookup(config: NetworkConfig, path: str) -> Any:
    if path == "nic.pacing_on_rate_change":  # derived: the attribute is the rule's index
        return PACING_ON_RATE_CHANGE.index(config.nic.pacing_on_rate_change)
    if path == "nic.ack_interval":  # derived: the default depends on the congestion control
        return config.nic.ack_interval_for(config.cc.kind)
    if path.startswith("cc.dcqcn."):  # preset values, overridden by explicit fields
        return config.cc.dcqcn_params()[path.removeprefix("cc.dcqcn.")]
    if path == "cc.hpcc.base_rtt":  # derived: 0 = per flow; "global" must be resolved on the topology first
        value = config.cc.hpcc_params()["base_rtt"]
        if value == "global" and config.cc.kind == "hpcc":
            raise ValueError(
                'cc.hpcc.base_rtt = "global" needs the topology: pass the config through '
                "hetero_ns3.network.ns3.base_rtt.resolve_hpcc_base_rtt(config, graph) first"
            )
        return 0.0 if value in HPCC_BASE_RTT_MODES else value
    if path.startswith("cc.hpcc."):
        return config.cc.hpcc_params()[path.removeprefix("cc.hpcc.")]
    if path.startswith("cc.timely."):
        return config.cc.timely_params()[path.removeprefix("cc.timely.")]
    if path == "nic.send_cnp" and config.nic.send_cnp is None:  # derived: only DCQCN reacts to CNPs
        return config.cc.kind == "dcqcn"
    if path == "nic.cnp_interval_s" and config.nic.cnp_interval_s is None:
        return config.cc.dcqcn_params()["cnp_interval_s"]
    obj: Any = config
    for part in path.split("."):
        obj = getattr(obj, part)
    return obj


def _render(binding: AttributeBinding, value: Any) -> str:
    kind = binding.kind
    if kind == "typeid":
        return CC_KINDS[value]
    if kind == "enum":
        return SCHEDULERS[value]
    if kind == "bool":
        return "true" if value else "false"
    if kind == "int":
        return str(int(value))
    if kind == "float":
        return repr(float(value))
    if kind == "time":
        return f"{round(float(value) * 1e12)}ps"
    if kind == "rate":
        return f"{round(float(value))}bps"
    if kind == "str":
        return " ".join(str(x) for x in value) if isinstance(value, (tuple, list)) else str(value)
    raise ValueError(f"unknown binding kind {kind!r}")


def attribute_settings(config: NetworkConfig) -> list[tuple[str, str]]:
    """``(ns3::Type::Attribute, value string)`` for every row of :data:`ATTRIBUTE_MAP`."""
    return [(f"{b.type_id}::{b.attribute}", _render(b, _lookup(config, b.path))) for b in ATTRIBUTE_MAP]
