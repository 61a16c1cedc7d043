"""Per-flow sender state lives only while a flow sends; its results outlive it (issue 15 item 5).

A finished queue pair (with its congestion-control object and timers) is released once its last
byte is acknowledged, so a run's memory follows the flows in flight rather than every flow of the
run. What the flow table reports for a finished flow (base RTT, first hop, retransmits) must not
change because of that; the link-down case with retransmissions is in test_roce_mechanisms.
"""

from __future__ import annotations

import pytest

from hetero_ns3.network.config import CcConfig, NetworkConfig
from hetero_ns3.network.ns3.roce import open_network
from hetero_ns3.topology import resolve_topology

pytestmark = pytest.mark.ns3

RATE = 100e9
DELAY = 1e-6


@pytest.mark.parametrize("cc", ["none", "dcqcn", "hpcc"])
def test_queue_pair_released_when_acknowledged_results_kept(native, cc):
    graph = resolve_topology("star:3", RATE, DELAY)
    with open_network(graph, NetworkConfig(cc=CcConfig(kind=cc))) as (ns, net):
        short = net.CreateFlow(0, 1, 100_000, 3)  # ~8 us at 100 Gbps
        long = net.CreateFlow(0, 2, 20_000_000, 3)  # ~1.6 ms
        net.ScheduleFlow(short, ns.Seconds(0.0))
        net.ScheduleFlow(long, ns.Seconds(0.0))
        assert not net.GetQueuePair(short)  # not started yet: no sender state
        net.Run(ns.MicroSeconds(200))
        ack = list(net.GetFlowAckTimes())
        assert 0 < ack[short] < 200e-6 and ack[long] < 0
        assert not net.GetQueuePair(short)  # acknowledged in full: released
        qp = net.GetQueuePair(long)
        assert qp and not qp.finished and qp.sndUna > 0  # still sending: kept
        rtt_mid = list(net.GetFlowBaseRtts())
        hops_mid = list(net.GetFlowFirstHops())
        net.Run(ns.Seconds(0.0))
        assert net.GetNFlowsCompleted() == 2
        assert not net.GetQueuePair(long)
        rtt = list(net.GetFlowBaseRtts())
        hops = list(net.GetFlowFirstHops())
        retx = list(net.GetFlowRetransmits())
    # The base RTT of a star path: 2 links each way, plus serialization of a frame and its ACK.
    assert rtt[short] == rtt_mid[short] == rtt[long] > 4 * DELAY
    assert hops == hops_mid and all(h < 2 * len(graph.links) for h in hops)
    assert retx == [0, 0]


def test_zero_byte_flow_keeps_no_queue_pair(native):
    graph = resolve_topology("star:2", RATE, DELAY)
    with open_network(graph, NetworkConfig(cc=CcConfig(kind="none"))) as (ns, net):
        fid = net.CreateFlow(0, 1, 0, 3)
        net.ScheduleFlow(fid, ns.MicroSeconds(5))
        net.Run(ns.Seconds(0.0))
        assert net.GetNFlowsCompleted() == 1
        assert not net.GetQueuePair(fid)
        assert list(net.GetFlowFinishTimes()) == pytest.approx([5e-6])
        assert list(net.GetFlowBaseRtts())[0] > 4 * DELAY
