"""TIMELY configuration: presets, attribute rendering and input errors (no simulator)."""

from __future__ import annotations

import dataclasses

import pytest

from hetero_ns3.errors import ScenarioError
from hetero_ns3.network.cc_presets import TIMELY_PRESETS
from hetero_ns3.network.config import COALESCED_ACK_INTERVAL, CcConfig, NetworkConfig, TimelyConfig
from hetero_ns3.network.ns3.attributes import attribute_settings


@pytest.mark.parametrize("name", sorted(TIMELY_PRESETS))
def test_every_timely_preset_is_complete_and_valid(name):
    values = TIMELY_PRESETS[name]
    assert {f.name for f in dataclasses.fields(TimelyConfig)} == set(values)
    TimelyConfig(**values)  # validates
    assert CcConfig(kind="timely", preset=name).timely_params() == dict(values)


def test_timely_renders_the_paper_constants_as_unit_bearing_attributes():
    s = dict(attribute_settings(NetworkConfig(cc=CcConfig(kind="timely", preset="paper"))))
    assert s["ns3::RdmaNic::CongestionControl"] == "ns3::RdmaTimely"
    assert (s["ns3::RdmaTimely::Alpha"], s["ns3::RdmaTimely::Beta"]) == ("0.875", "0.8")
    assert s["ns3::RdmaTimely::TLow"] == "50000000ps" and s["ns3::RdmaTimely::THigh"] == "500000000ps"
    assert s["ns3::RdmaTimely::MinRtt"] == "20000000ps" and s["ns3::RdmaTimely::RateAi"] == "10000000bps"
    assert s["ns3::RdmaNic::AckInterval"] == str(COALESCED_ACK_INTERVAL)
    cc = CcConfig(kind="timely", preset="hpcc-artifact", timely=TimelyConfig(beta=0.5))
    s = dict(attribute_settings(NetworkConfig(cc=cc)))
    assert (s["ns3::RdmaTimely::Beta"], s["ns3::RdmaTimely::MinRate"]) == ("0.5", "1000000000bps")
    # The default preset is the HPCC artifact's (as for DCQCN): its 100 Mb/s step at 100 Gb/s.
    s = dict(attribute_settings(NetworkConfig(cc=CcConfig(kind="timely"))))
    assert s["ns3::RdmaTimely::RateAi"] == "100000000bps"


@pytest.mark.parametrize(
    ("kwargs", "path"),
    [
        ({"beta": 1.5}, "cc.timely.beta"),
        ({"t_low_s": -1.0}, "cc.timely.t_low_s"),
        ({"hai_count": 0}, "cc.timely.hai_count"),
    ],
)
def test_bad_timely_fields_name_the_field(kwargs, path):
    with pytest.raises(ScenarioError, match=path.replace(".", r"\.")):
        TimelyConfig(**kwargs)


def test_t_high_must_exceed_t_low_after_the_preset_is_applied():
    with pytest.raises(ScenarioError, match=r"cc\.timely\.t_high_s"):
        CcConfig(kind="timely", timely=TimelyConfig(t_low_s=600e-6))  # paper T_high is 500 us
