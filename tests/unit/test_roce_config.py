"""RoCE config validation, attribute rendering and flow-table validation (pure Python, no ns-3)."""

from __future__ import annotations

import dataclasses

import pandas as pd
import pytest

from hetero_ns3.errors import ScenarioError
from hetero_ns3.network.cc_presets import DCQCN_PRESETS, DEFAULT_DCQCN_PRESET, HPCC_PRESETS
from hetero_ns3.network.config import (
    BufferConfig,
    CcConfig,
    DcqcnConfig,
    EcnConfig,
    HpccConfig,
    NetworkConfig,
    NicConfig,
    PfcConfig,
    RoutingConfig,
)
from hetero_ns3.network.flows_io import DEFAULT_PRIORITY, flow_arrays, read_flows_csv
from hetero_ns3.network.ns3.attributes import ATTRIBUTE_MAP, attribute_settings
from hetero_ns3.network.ns3.base_rtt import network_base_rtt, resolve_hpcc_base_rtt
from hetero_ns3.topology.graph import GraphLink, GraphNode, make_graph


def _star(n: int = 3):
    nodes = [GraphNode(f"h{i}", "host") for i in range(n)] + [GraphNode("sw0", "switch")]
    links = [GraphLink(f"h{i}", "sw0", 100e9, 1e-6) for i in range(n)]
    return make_graph(nodes, links)


@pytest.mark.parametrize(
    ("build", "path"),
    [
        (lambda: CcConfig(kind="bbr"), "cc.kind"),
        (lambda: DcqcnConfig(g=0.0), "cc.dcqcn.g"),
        (lambda: DcqcnConfig(rate_ai_bps=-1), "cc.dcqcn.rate_ai_bps"),
        (lambda: HpccConfig(eta=1.5), "cc.hpcc.eta"),
        (lambda: CcConfig(kind="dcqcn", preset="recommended"), "cc.preset"),
        (lambda: CcConfig(kind="none", preset="paper"), "cc.preset"),
        (lambda: HpccConfig(max_stage=-1), "cc.hpcc.max_stage"),
        (lambda: HpccConfig(base_rtt="max"), "cc.hpcc.base_rtt"),
        (lambda: HpccConfig(base_rtt=0.0), "cc.hpcc.base_rtt"),
        (lambda: PfcConfig(lossless_classes=(3, 9)), "pfc.lossless_classes[1]"),
        (lambda: PfcConfig(pause_quanta=0), "pfc.pause_quanta"),
        (lambda: EcnConfig(kmin_bytes=500, kmax_bytes=100), "ecn.kmax_bytes"),
        (lambda: EcnConfig(pmax=2.0), "ecn.pmax"),
        (lambda: NicConfig(segment_bytes={"network": 0}), "nic.segment_bytes.network"),
        (lambda: NicConfig(ack_interval=0), "nic.ack_interval"),
        (lambda: RoutingConfig(scheduler="fifo"), "routing.scheduler"),
        (lambda: RoutingConfig(wrr_weights=(1, 2)), "routing.wrr_weights"),
        (lambda: RoutingConfig(ecmp_key="qp"), "routing.ecmp_key"),
    ],
)
def test_bad_config_names_the_field(build, path):
    with pytest.raises(ScenarioError) as err:
        build()
    assert str(err.value).startswith(path)


def test_attribute_settings_cover_the_table_and_render_units():
    cfg = NetworkConfig(cc=CcConfig(kind="hpcc"), pfc=PfcConfig(lossless_classes=(3,)))
    with pytest.raises(ValueError, match="needs the topology"):  # the preset's global T is not silently per flow
        attribute_settings(cfg)
    settings = dict(attribute_settings(resolve_hpcc_base_rtt(cfg, _star())))
    assert len(settings) == len(ATTRIBUTE_MAP)
    assert settings["ns3::RdmaNic::CongestionControl"] == "ns3::RdmaHpcc"
    assert settings["ns3::RoceMmu::LosslessClasses"] == "8"
    # DCQCN and the receiver's CNP interval come from the default preset (hpcc-artifact)
    assert settings["ns3::RdmaNic::CnpInterval"] == "0ps"
    assert settings["ns3::RdmaDcqcn::RateAi"] == "5000000bps"
    assert settings["ns3::RdmaDcqcn::IncreaseReferenceRate"] == "25000000000bps"
    assert settings["ns3::RoceNetDevice::Scheduler"] == "Strict"
    assert settings["ns3::RoceNetDevice::WrrWeights"] == "1 1 1 1 1 1 1 1"
    assert len({(b.type_id, b.attribute) for b in ATTRIBUTE_MAP}) == len(ATTRIBUTE_MAP)


@pytest.mark.parametrize(
    ("kind", "every", "rendered"),
    [("hpcc", None, "1"), ("dcqcn", None, "16"), ("none", None, "16"), ("hpcc", 4, "4"), ("dcqcn", 1, "1")],
)
def test_ack_interval_default_depends_on_congestion_control(kind, every, rendered):
    cfg = NetworkConfig(cc=CcConfig(kind=kind), nic=NicConfig(ack_interval=every))
    assert dict(attribute_settings(resolve_hpcc_base_rtt(cfg, _star())))["ns3::RdmaNic::AckInterval"] == rendered
    assert cfg.nic.ack_interval_for(kind) == int(rendered)


def test_segment_by_link_kind():
    nic = NicConfig()
    assert nic.segment_for("network") == 4096
    assert nic.segment_for("nvlink") == 65536
    assert nic.segment_for("unknown-kind") == nic.default_segment_bytes


def test_flow_arrays_valid_table():
    g = _star()
    df = pd.DataFrame({"src": ["h1", "h2"], "dst": ["h0", "h0"], "size_bytes": ["1000", 2e6], "start_s": [0, 1e-6]})
    arr = flow_arrays(g, df)
    assert list(arr.src) == [1, 2] and list(arr.dst) == [0, 0]
    assert list(arr.size_bytes) == [1000, 2_000_000]
    assert list(arr.priority) == [DEFAULT_PRIORITY] * 2


@pytest.mark.parametrize(
    ("column", "value", "needle"),
    [
        ("dst", "h9", "row 1 (line 3), column 'dst': unknown host 'h9'"),
        ("src", "sw0", "row 1 (line 3), column 'src': 'sw0' is a switch"),
        ("size_bytes", "-5", "row 1 (line 3), column 'size_bytes'"),
        ("size_bytes", "1.5", "positive whole number"),
        ("start_s", "-1", "row 1 (line 3), column 'start_s'"),
        ("start_s", "soon", "is not a number"),
        ("priority", "9", "row 1 (line 3), column 'priority'"),
    ],
)
def test_flow_table_errors_name_row_and_column(column, value, needle):
    g = _star()
    df = pd.DataFrame(
        {
            "src": ["h1", "h2"],
            "dst": ["h0", "h0"],
            "size_bytes": ["10", "10"],
            "start_s": ["0", "0"],
            "priority": ["3", "3"],
        }
    )
    df.loc[1, column] = value
    with pytest.raises(ScenarioError) as err:
        flow_arrays(g, df, source="flows.csv")
    assert needle in str(err.value)


def test_missing_column_and_file(tmp_path):
    p = tmp_path / "f.csv"
    p.write_text("src,dst,size_bytes\nh1,h0,10\n")
    with pytest.raises(ScenarioError, match=r"missing column\(s\) \['start_s'\]"):
        read_flows_csv(p)
    with pytest.raises(ScenarioError, match="does not exist"):
        read_flows_csv(tmp_path / "nope.csv")


def test_buffer_too_small_for_headroom_names_the_field():
    from hetero_ns3.network.ns3.roce import check_buffers

    g = _star(8)
    with pytest.raises(ScenarioError, match=r"^buffer.switch_buffer_bytes \(10000\) leaves no shared buffer"):
        check_buffers(g, NetworkConfig(buffer=BufferConfig(10_000)))
    check_buffers(g, NetworkConfig(pfc=PfcConfig(enabled=False), buffer=BufferConfig(10_000)))  # lossy: no reserve


@pytest.mark.parametrize(("kind", "presets"), [("dcqcn", DCQCN_PRESETS), ("hpcc", HPCC_PRESETS)])
def test_every_preset_is_complete_and_valid(kind, presets):
    cls = DcqcnConfig if kind == "dcqcn" else HpccConfig
    keys = {f.name for f in dataclasses.fields(cls)}
    for name, values in presets.items():
        assert keys <= set(values), f"{kind} preset {name} lacks {keys - set(values)}"
        cls(**{k: v for k, v in values.items() if k in keys})  # validates
        cc = CcConfig(kind=kind, preset=name)
        resolved = cc.dcqcn_params() if kind == "dcqcn" else cc.hpcc_params()
        assert resolved == dict(values)


def test_explicit_fields_override_the_preset():
    cc = CcConfig(kind="dcqcn", preset="paper", dcqcn=DcqcnConfig(rate_ai_bps=1e9))
    params = cc.dcqcn_params()
    assert params["rate_ai_bps"] == 1e9 and params["g"] == DCQCN_PRESETS["paper"]["g"]
    settings = dict(attribute_settings(NetworkConfig(cc=cc, nic=NicConfig(cnp_interval_s=7e-6))))
    assert settings["ns3::RdmaDcqcn::RateAi"] == "1000000000bps"
    assert settings["ns3::RdmaDcqcn::FastRecoverySteps"] == "5"
    assert settings["ns3::RdmaNic::CnpInterval"] == "7000000ps"  # explicit nic field beats the preset's 50 us
    assert dict(attribute_settings(NetworkConfig(cc=cc)))["ns3::RdmaNic::CnpInterval"] == "50000000ps"
    hpcc = CcConfig(kind="hpcc", preset="recommended", hpcc=HpccConfig(base_rtt="per_flow"))
    hp = dict(attribute_settings(NetworkConfig(cc=hpcc)))
    assert (hp["ns3::RdmaHpcc::Eta"], hp["ns3::RdmaHpcc::MaxStage"]) == ("0.99", "0")
    assert hp["ns3::RdmaHpcc::BaseRtt"] == "0ps"  # per flow
    hp = dict(attribute_settings(NetworkConfig(cc=CcConfig(kind="hpcc", hpcc=HpccConfig(base_rtt=12e-6)))))
    assert hp["ns3::RdmaHpcc::BaseRtt"] == "12000000ps"
    assert CcConfig().dcqcn_params()["g"] == DCQCN_PRESETS[DEFAULT_DCQCN_PRESET]["g"]


def _hop(delay: float, rate: float, nic: NicConfig, int_bytes: int = 42) -> float:
    """One hop of a base RTT: out and back, one DATA frame (4096 + headers + INT) and one ACK serialized."""
    return 2 * delay + (4096 + nic.header_bytes + int_bytes + nic.ack_bytes) * 8 / rate


def test_global_base_rtt_is_the_longest_routed_host_pair():
    """Two leaves under one spine, a slow far leaf: T is the h-to-far-host path (4 hops, the 10 us link)."""
    nodes = [GraphNode(n, "host") for n in ("a0", "a1", "b0", "c0")]
    nodes += [GraphNode(n, "switch") for n in ("la", "lb", "sp")]
    links = [
        GraphLink("a0", "la", 100e9, 1e-6),
        GraphLink("a1", "la", 100e9, 1e-6),
        GraphLink("b0", "lb", 100e9, 1e-6),
        GraphLink("la", "sp", 400e9, 2e-6),
        GraphLink("lb", "sp", 400e9, 10e-6),
        GraphLink("c0", "sp", 25e9, 1e-6),  # a host on the spine: 3 hops to a*, shorter than a*-b0
    ]
    g = make_graph(nodes, links)
    cfg = NetworkConfig(cc=CcConfig(kind="hpcc"))
    nic = cfg.nic
    want = 2 * _hop(1e-6, 100e9, nic) + _hop(2e-6, 400e9, nic) + _hop(10e-6, 400e9, nic)  # a* <-> b0
    assert network_base_rtt(g, cfg) == pytest.approx(want, rel=1e-12)
    resolved = resolve_hpcc_base_rtt(cfg, g)
    assert resolved.cc.hpcc.base_rtt == pytest.approx(want, rel=1e-12)
    assert dict(attribute_settings(resolved))["ns3::RdmaHpcc::BaseRtt"] == f"{round(want * 1e12)}ps"
    # per-flow T, another kind, an explicit T: the config is left alone
    for cc in (
        CcConfig(kind="hpcc", hpcc=HpccConfig(base_rtt="per_flow")),
        CcConfig(kind="dcqcn"),
        CcConfig(kind="hpcc", hpcc=HpccConfig(base_rtt=5e-6)),
    ):
        assert resolve_hpcc_base_rtt(NetworkConfig(cc=cc), g).cc == cc
    # a star: every pair has the same two-hop path, so the global T is each flow's own base RTT
    assert network_base_rtt(_star(), cfg) == pytest.approx(2 * _hop(1e-6, 100e9, nic), rel=1e-12)


def test_base_rtt_reads_a_mode_or_a_time_from_toml():
    from hetero_ns3.scenario.fields import load_dataclass

    read = lambda v: load_dataclass(HpccConfig, {"base_rtt": v}, "network.cc.hpcc").base_rtt  # noqa: E731
    assert (read("global"), read("per_flow"), read("12us"), read(3e-6)) == ("global", "per_flow", 12e-6, 3e-6)
    with pytest.raises(ScenarioError, match=r"^network.cc.hpcc.base_rtt \('max'\).*global"):
        read("max")


def test_global_base_rtt_frames_a_path_with_its_first_link_segment():
    """A GPU with an NVLink (64 KiB segments) and a network port: the network path's frame is 4096 B + headers,
    as in C++ where the source port's segment sizes the frame; the NVLink pair is the shorter one."""
    nodes = [GraphNode(n, "host") for n in ("g0", "g1", "g2")] + [GraphNode(n, "switch") for n in ("nvsw", "sw")]
    links = [
        GraphLink("g0", "nvsw", 3.6e12, 1e-7, kind="nvlink", cost=0.5, mtu_bytes=65536),
        GraphLink("g1", "nvsw", 3.6e12, 1e-7, kind="nvlink", cost=0.5, mtu_bytes=65536),
        GraphLink("g0", "sw", 100e9, 1e-6),
        GraphLink("g2", "sw", 100e9, 1e-6),
    ]
    cfg = NetworkConfig(cc=CcConfig(kind="hpcc"))
    assert network_base_rtt(make_graph(nodes, links), cfg) == pytest.approx(2 * _hop(1e-6, 100e9, cfg.nic), rel=1e-12)


def test_global_base_rtt_serializes_the_first_hop_at_the_nic_paced_rate():
    """A GPU with a NIC of its own behind PCIe sends at min(PCIe, NIC) (``network/ns3/pacing.py``), as C++'s
    per-flow base RTT sees the capped device: T charges that hop's frame and ACK at the NIC's rate."""
    from hetero_ns3.network.ns3.pacing import port_rates
    from hetero_ns3.topology import build_graph, parse_cluster

    cluster = {
        "name": "t",
        "groups": [
            {
                "name": "a",
                "count": 2,
                "gpu": "A100-SXM-80GB",
                "gpus_per_node": 1,
                "fabric": {"kind": "nvswitch", "pcie_gen": 4, "nic_attach": "pcie"},
                "nics": {"count": 1, "rate": "100Gbps"},
            }
        ],
        "network": {"kind": "rail"},
    }
    g = build_graph(parse_cluster(cluster))
    cfg = NetworkConfig(cc=CcConfig(kind="hpcc"))
    pcie = g.links[1].rate_bps
    assert g.links[1].a == "n0.g0" and port_rates(g)[2] == 100e9 < pcie  # the GPU's side of its PCIe link
    # n0.g0 -> n0.pcie0 -> n0.nic0 -> rail0.0 -> n1.nic0 -> n1.pcie0 -> n1.g0: (delay, sending port's rate)
    path = [(1e-7, 100e9), (1e-7, pcie), (1e-6, 100e9), (1e-6, 100e9), (1e-7, pcie), (1e-7, pcie)]
    want = sum(_hop(d, r, cfg.nic) for d, r in path)
    assert network_base_rtt(g, cfg) == pytest.approx(want, rel=1e-12)
    assert want - sum(_hop(d, pcie if i == 0 else r, cfg.nic) for i, (d, r) in enumerate(path)) > 0.1e-6


def test_hpcc_artifact_preset_is_the_reference_runs_setting() -> None:
    """`hpcc-artifact` = the `paper` preset with the overrides that tests/ns3/test_hpcc_pfc_reference.py's
    `runpy` row gives it (run.py --cc hp --bw 100: maxStage 0, W_AI 40 Mb/s, floor 1 Gb/s): the row that
    matches the reference build within 0.003 (docs/roce.md)."""
    artifact = CcConfig(kind="hpcc", preset="hpcc-artifact").hpcc_params()
    runpy = CcConfig(kind="hpcc", hpcc=HpccConfig(max_stage=0, rate_ai_bps=40e6, min_rate_bps=1e9)).hpcc_params()
    assert artifact == runpy
    assert artifact["eta"] == 0.95 and artifact["base_rtt"] == "global"


def test_pacing_on_rate_change_is_checked_and_bound() -> None:
    from hetero_ns3.network.ns3.attributes import attribute_settings

    with pytest.raises(ScenarioError, match=r"nic\.pacing_on_rate_change.*frame_gap"):
        NicConfig(pacing_on_rate_change="token")  # type: ignore[arg-type]
    for rule, index in (("rescale", "0"), ("frame_gap", "1"), ("keep", "2")):
        settings = dict(attribute_settings(NetworkConfig(nic=NicConfig(pacing_on_rate_change=rule))))
        assert settings["ns3::RdmaNic::PacingRule"] == index
