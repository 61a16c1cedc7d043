"""Events by kind (``run_plan(profile=True)``): the counters add up and match what the run did."""

from __future__ import annotations

import math

import pandas as pd
import pytest

from hetero_ns3.collectives import CollectiveCall, CollectiveEnv, plan_collective
from hetero_ns3.network.config import CcConfig, NetworkConfig, NicConfig
from hetero_ns3.network.ns3.profile import KINDS, event_profile, format_profile
from hetero_ns3.plan.builder import PlanBuilder
from hetero_ns3.topology import resolve_topology

pytestmark = pytest.mark.ns3


def _send(graph, size: int):
    env = CollectiveEnv.from_graph(graph)
    b = PlanBuilder(env.gpus)
    plan_collective(b, CollectiveCall("send_recv", env.gpus[:2], size, channels=1), env)
    return b.build()


@pytest.mark.parametrize("ack_interval", [1, 16])
def test_profile_counts_frames_hops_and_acks_of_one_flow(capi, ack_interval):
    """star:2 (host - switch - host), run until no event is left: every DATA frame and every ACK makes two hops."""
    from hetero_ns3.network.ns3.roce import make_engine, make_network

    graph = resolve_topology("star:2", 100e9, 1e-6)
    size = 1_000_000
    cfg = NetworkConfig(cc=CcConfig(kind="none"), nic=NicConfig(ack_interval=ack_interval))
    eng = make_engine("capi")
    net = make_network(eng, graph, cfg)
    try:
        net.add_flows([0], [1], [size], [3], [0.0])
        net.run(0.0)
        total = eng.event_count()
        prof = event_profile(eng.profile(), total)
        assert net.read("flow_finish")[0] > 0
    finally:
        eng.destroy()
        net.free()
    frames = math.ceil(size / cfg.nic.segment_for(graph.links[0].kind))
    assert prof["data_frames"] == frames
    assert prof["data_hop"] == 2 * frames
    # one ACK per ack_interval frames, and one for the last frame (AckReq)
    acks = frames // ack_interval + (1 if frames % ack_interval else 0)
    assert prof["ack_hop"] == 2 * acks
    assert prof["nack_hop"] == prof["cnp_hop"] == prof["pfc_hop"] == 0
    assert prof["flow_start"] == 1
    assert sum(prof[k] for k in KINDS) + prof["other"] == prof["total"] == total
    text = format_profile(prof, cpu_s=0.5)
    assert "data_hop" in text and "per DATA frame" in text


def test_profile_is_the_same_with_it_off_except_for_the_table(capi):
    """Counting does not change the run (the counters are always on; profile=True only reads them)."""
    from hetero_ns3.network.ns3.replay import run_plan

    graph = resolve_topology("star:4", 100e9, 1e-6)
    plan = _send(graph, 300_000)
    a = run_plan(graph, plan, NetworkConfig(), profile=True)
    b = run_plan(graph, plan, NetworkConfig())
    assert b.profile is None and a.profile is not None
    assert (a.times.finish_s == b.times.finish_s).all()
    pd.testing.assert_frame_equal(a.flows, b.flows, check_exact=True)


def test_python_kinds_are_the_native_counter_names_in_order(capi):
    """KINDS (for formatting) restates RoceProfile::Name: the two must not drift apart."""
    from hetero_ns3.network.ns3.roce import make_engine

    eng = make_engine("capi")
    assert [k for k in eng.profile() if k != "data_frames"] == list(KINDS)


def test_event_profile_puts_the_rest_in_other():
    prof = event_profile({"data_hop": 10, "ack_hop": 2, "data_frames": 5}, 15)
    assert prof["other"] == 3 and prof["total"] == 15 and prof["data_frames"] == 5


def test_flows_cli_prints_the_profile(capi, tmp_path, capsys):
    from hetero_ns3.cli.main import main

    csv = tmp_path / "f.csv"
    csv.write_text("src,dst,size_bytes,start_s\nh1,h0,200000,0\nh2,h0,200000,0\n")
    rc = main(["flows", str(csv), "--topology", "star:3", "--out", str(tmp_path / "out"), "--profile"])
    assert rc == 0
    text = capsys.readouterr().out
    assert "data_hop" in text and "DATA frames made by NICs: 98" in text  # 2 x ceil(200000 / 4096)


def test_ns3_backend_reports_events_by_kind(capi):
    from hetero_ns3.network.backend import get_backend

    graph = resolve_topology("star:2", 100e9, 1e-6)
    out = get_backend("ns3").run(_send(graph, 100_000), graph, NetworkConfig(), seed=1)
    prof = out.stats["events_by_kind"]
    assert prof["data_frames"] >= math.ceil(100_000 / 4096)  # the planner may slice the message
    assert prof["data_hop"] == 2 * prof["data_frames"]  # host - switch - host, every frame delivered
    assert prof["total"] == out.stats["events"]
