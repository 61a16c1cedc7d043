// RdmaNic, set-up and the send side: attributes, queue-pair start, the per-port round robin over
// ready queue pairs with pacing (PullData / NextPullTime), AckReq, and the retransmit timer.
// Receiving (DATA -> ACK/NACK/CNP) and the sender's ACK/NACK/CNP handling are in
// rdma-nic-receive.cc.
#include "rdma-nic.h"

#include "ns3/abort.h"
#include "ns3/boolean.h"
#include "ns3/log.h"
#include "ns3/simulator.h"
#include "ns3/uinteger.h"
#include "rdma-congestion-ops.h"
#include "roce-net-device.h"
#include "roce-profile.h"

#include <algorithm>

namespace ns3
{

NS_LOG_COMPONENT_DEFINE("RdmaNic");

NS_OBJECT_ENSURE_REGISTERED(RdmaNic);

TypeId
RdmaNic::GetTypeId()
{
    static TypeId tid =
        TypeId("ns3::RdmaNic")
            .SetParent<RoceNode>()
            .SetGroupName("HeteroNs3")
            .AddConstructor<RdmaNic>()
            .AddAttribute("CongestionControl",
                          "TypeId of the congestion-control strategy (ns3::RdmaCcNone, "
                          "ns3::RdmaDcqcn, ns3::RdmaHpcc, "
                          "ns3::RdmaDctcp)",
                          TypeIdValue(RdmaCcNone::GetTypeId()),
                          MakeTypeIdAccessor(&RdmaNic::m_ccTypeId),
                          MakeTypeIdChecker())
            .AddAttribute(
                "AckInterval",
                "Send one ACK per this many in-order DATA frames (ACK coalescing); frames with "
                "AckReq set (last frame, window full) are acknowledged at once",
                UintegerValue(1),
                MakeUintegerAccessor(&RdmaNic::m_ackInterval),
                MakeUintegerChecker<uint32_t>(1))
            .AddAttribute("CnpInterval",
                          "At most one CNP per queue pair per interval",
                          TimeValue(MicroSeconds(50)),
                          MakeTimeAccessor(&RdmaNic::m_cnpInterval),
                          MakeTimeChecker(Time(0)))
            .AddAttribute(
                "SendCnp",
                "As a receiver (notification point), send CNPs for ECN-marked frames (only "
                "DCQCN reacts to them; a CNP is a frame on the reverse path)",
                BooleanValue(true),
                MakeBooleanAccessor(&RdmaNic::m_sendCnp),
                MakeBooleanChecker())
            .AddAttribute("NackInterval",
                          "Minimum time between two NACKs for the same expected byte",
                          TimeValue(MicroSeconds(10)),
                          MakeTimeAccessor(&RdmaNic::m_nackInterval),
                          MakeTimeChecker(Time(0)))
            .AddAttribute(
                "RetransmitTimeout",
                "Go back to the first unacknowledged byte after this long without progress",
                TimeValue(MilliSeconds(1)),
                MakeTimeAccessor(&RdmaNic::m_rto),
                MakeTimeChecker(NanoSeconds(1)))
            .AddAttribute("AckPriority",
                          "Traffic class of ACK, NACK and CNP frames",
                          UintegerValue(7),
                          MakeUintegerAccessor(&RdmaNic::m_ackPriority),
                          MakeUintegerChecker<uint32_t>(0, 7))
            .AddAttribute("HeaderBytes",
                          "Per-frame overhead of DATA frames: Ethernet 14 + IPv4 20 + UDP 8 + BTH "
                          "12 + ICRC 4 + FCS 4",
                          UintegerValue(62),
                          MakeUintegerAccessor(&RdmaNic::m_headerBytes),
                          MakeUintegerChecker<uint32_t>())
            .AddAttribute("AckBytes",
                          "Wire bytes of ACK, NACK and CNP frames",
                          UintegerValue(64),
                          MakeUintegerAccessor(&RdmaNic::m_ackBytes),
                          MakeUintegerChecker<uint32_t>(1))
            .AddAttribute("IntHeaderBytes",
                          "Extra bytes per DATA frame when the strategy uses INT (HPCC)",
                          UintegerValue(42),
                          MakeUintegerAccessor(&RdmaNic::m_intBytes),
                          MakeUintegerChecker<uint32_t>())
            .AddAttribute(
                "ReorderTolerant",
                "Keep out-of-order DATA (no NACK); recover losses by RetransmitTimeout only",
                BooleanValue(false),
                MakeBooleanAccessor(&RdmaNic::m_reorderTolerant),
                MakeBooleanChecker())
            .AddAttribute(
                "PacingRule",
                "What a pacing-rate change does to the gap before a queue pair's next frame: "
                "0 the part still owed scales by old / new rate (a token bucket); "
                "1 one whole gap of the new rate after the last frame (the HPCC artifact's "
                "RdmaHw::ChangeRate); 2 nothing: the gap set when the frame left stands (the "
                "artifact's DCQCN)",
                UintegerValue(0),
                MakeUintegerAccessor(&RdmaNic::m_pacingRule),
                MakeUintegerChecker<uint8_t>(0, 2))
            .AddAttribute("UseWindow",
                          "Limit inflight bytes to one BDP (line rate x base RTT) for strategies "
                          "without a window",
                          BooleanValue(false),
                          MakeBooleanAccessor(&RdmaNic::m_useWindow),
                          MakeBooleanChecker())
            .AddTraceSource("CongestionControlCreated",
                            "A queue pair's congestion-control strategy was created (before Init): "
                            "connect to its trace sources (Rate, TargetRate, Alpha, Window) here",
                            MakeTraceSourceAccessor(&RdmaNic::m_ccCreatedTrace),
                            "ns3::RdmaNic::CcCreatedTracedCallback")
            .AddTraceSource("CnpSent",
                            "This host, as a flow's receiver, sent a CNP for the flow (flow id)",
                            MakeTraceSourceAccessor(&RdmaNic::m_cnpSentTrace),
                            "ns3::TracedCallback::Uint32")
            .AddTraceSource("CnpReceived",
                            "This host, as a flow's sender, received a CNP for the flow (flow id)",
                            MakeTraceSourceAccessor(&RdmaNic::m_cnpReceivedTrace),
                            "ns3::TracedCallback::Uint32");
    return tid;
}

RdmaNic::RdmaNic() = default;
RdmaNic::~RdmaNic() = default;

void
RdmaNic::DoDispose()
{
    for (auto& kv : m_tx)
    {
        kv.second->rtoEvent.Cancel();
        if (kv.second->cc)
        {
            kv.second->cc->Dispose();
            kv.second->cc = nullptr;
        }
    }
    m_tx.clear();
    m_rx.clear();
    m_active.clear();
    m_rxComplete = Callback<void, uint32_t>();
    m_txComplete = Callback<void, uint32_t>();
    RoceNode::DoDispose();
}

bool
RdmaNic::IsHost() const
{
    return true;
}

TypeId
RdmaNic::GetCongestionControl() const
{
    return m_ccTypeId;
}

void
RdmaNic::SetReceiveCompleteCallback(Callback<void, uint32_t> cb)
{
    m_rxComplete = cb;
}

void
RdmaNic::SetSendCompleteCallback(Callback<void, uint32_t> cb)
{
    m_txComplete = cb;
}

uint32_t
RdmaNic::DataFrameBytes(uint32_t payload) const
{
    return payload + m_headerBytes + (m_ccNeedsInt ? m_intBytes : 0);
}

uint32_t
RdmaNic::AckFrameBytes() const
{
    return m_ackBytes;
}

void
RdmaNic::Prepare()
{
    if (m_factoryReady)
    {
        return;
    }
    NS_ABORT_MSG_IF(!m_ccTypeId.IsChildOf(RdmaCongestionOps::GetTypeId()) &&
                        m_ccTypeId != RdmaCongestionOps::GetTypeId(),
                    "RdmaNic::CongestionControl " << m_ccTypeId.GetName()
                                                  << " is not an RdmaCongestionOps");
    m_ccFactory.SetTypeId(m_ccTypeId);
    m_ccNeedsInt = m_ccFactory.Create<RdmaCongestionOps>()->NeedsInt();
    m_factoryReady = true;
    m_active.resize(m_ports.size());
    m_rr.assign(m_ports.size(), 0);
}

bool
RdmaNic::NeedsInt() const
{
    return m_ccNeedsInt;
}

void
RdmaNic::StartQueuePair(Ptr<RdmaQueuePair> qp)
{
    Prepare();
    RocePacket probe;
    probe.src = qp->src;
    probe.dst = qp->dst;
    probe.sport = qp->sport;
    uint32_t port = SelectPort(probe);
    NS_ABORT_MSG_IF(port == UINT32_MAX,
                    "RdmaNic: host " << m_nodeIndex << " has no route to host " << qp->dst
                                     << " (flow " << qp->flowId << ")");
    Ptr<RoceNetDevice> dev = m_ports[port];
    qp->port = port;
    qp->segment = dev->GetSegmentBytes();
    qp->lineRateBps = dev->GetRateBps();
    qp->ctrlLead = dev->GetDelay() + Seconds(m_ackBytes * 8.0 / qp->lineRateBps);
    qp->nextAvail = Simulator::Now();
    qp->pacingRule = m_pacingRule;
    qp->wakePort = MakeCallback(&RoceNetDevice::TryTransmit, PeekPointer(dev));
    qp->cc = m_ccFactory.Create<RdmaCongestionOps>();
    m_ccCreatedTrace(qp->flowId, qp->cc);
    qp->cc->Init(PeekPointer(qp));
    if (m_useWindow && qp->windowBytes == 0)
    {
        qp->windowBytes = std::max<uint64_t>(
            static_cast<uint64_t>(qp->lineRateBps * qp->baseRtt.GetSeconds() / 8.0), qp->segment);
    }
    m_tx[qp->flowId] = qp;
    NS_LOG_INFO("host " << m_nodeIndex << ": QP of flow " << qp->flowId << " starts, " << qp->size
                        << " B to host " << qp->dst << " on port " << port << ", "
                        << qp->cc->GetName());
    if (qp->size == 0)
    {
        FinishQp(PeekPointer(qp));
        return;
    }
    m_active[port].push_back(qp);
    dev->TryTransmit();
}

Ptr<RocePacket>
RdmaNic::PullData(uint32_t port, uint8_t pausedMask, Time* wake)
{
    if (port >= m_active.size())
    {
        return nullptr;
    }
    std::vector<Ptr<RdmaQueuePair>>& list = m_active[port];
    uint32_t n = list.size();
    if (n == 0)
    {
        return nullptr;
    }
    Time now = Simulator::Now();
    Time earliest = Time::Max();
    uint32_t start = m_rr[port] % n;
    for (uint32_t k = 0; k < n; ++k)
    {
        uint32_t idx = (start + k) % n;
        RdmaQueuePair* qp = PeekPointer(list[idx]);
        if (qp->sndNxt >= qp->size || ((pausedMask >> (qp->priority & 7)) & 1u))
        {
            continue;
        }
        if (qp->windowBytes > 0 && qp->Inflight() >= qp->windowBytes)
        {
            continue;
        }
        if (qp->nextAvail > now)
        {
            earliest = std::min(earliest, qp->nextAvail);
            continue;
        }
        m_rr[port] = idx + 1;
        Ptr<RocePacket> p = Create<RocePacket>();
        p->type = RocePacketType::DATA;
        p->priority = qp->priority;
        p->flowId = qp->flowId;
        p->src = qp->src;
        p->dst = qp->dst;
        p->sport = qp->sport;
        p->seq = qp->sndNxt;
        p->flowBytes = qp->size;
        p->payload = static_cast<uint32_t>(std::min<uint64_t>(qp->segment, qp->size - qp->sndNxt));
        p->size = DataFrameBytes(p->payload);
        qp->sndNxt += p->payload;
        qp->lastSent = now;
        qp->lastFrameBytes = p->size;
        RoceProfile::CountDataFrame();
        p->ackReq = NeedsAckRequest(*qp, p->seq);
        if (qp->rateBps < qp->lineRateBps * (1 - 1e-9))
        {
            qp->nextAvail =
                now + NanoSeconds(static_cast<int64_t>(p->size * 8.0 * 1e9 / qp->rateBps));
        }
        else
        {
            qp->nextAvail = now;
        }
        qp->cc->OnSent(p->size);
        if (!qp->rtoEvent.IsPending())
        {
            qp->lastProgress = now;
            qp->rtoEvent = Simulator::Schedule(m_rto, &RdmaNic::Rto, this, qp);
        }
        return p;
    }
    if (earliest != Time::Max())
    {
        *wake = earliest;
    }
    return nullptr;
}

Time
RdmaNic::NextPullTime(uint32_t port, uint8_t pausedMask) const
{
    if (port >= m_active.size())
    {
        return Time::Max();
    }
    Time earliest = Time::Max();
    for (const Ptr<RdmaQueuePair>& q : m_active[port])
    {
        const RdmaQueuePair* qp = PeekPointer(q);
        if (qp->sndNxt >= qp->size || ((pausedMask >> (qp->priority & 7)) & 1u))
        {
            continue;
        }
        if (qp->windowBytes > 0 && qp->Inflight() >= qp->windowBytes)
        {
            continue;
        }
        earliest = std::min(earliest, qp->nextAvail);
    }
    return earliest;
}

bool
RdmaNic::NeedsAckRequest(const RdmaQueuePair& qp, uint64_t seq) const
{
    // BTH AckReq: the last frame of the flow is always acknowledged at once.
    if (qp.sndNxt >= qp.size)
    {
        return true;
    }
    if (qp.windowBytes == 0 || m_ackInterval <= 1)
    {
        return false;
    }
    // A window-limited sender asks for an ACK when the window has no room for another frame, and
    // every quarter window, so that coalesced ACKs keep the window sliding instead of
    // stop-and-wait.
    if (qp.Inflight() + qp.segment > qp.windowBytes)
    {
        return true;
    }
    uint64_t quarter = std::max<uint64_t>(qp.windowBytes / 4, qp.segment);
    return (qp.sndNxt - 1) / quarter != seq / quarter;
}

void
RdmaNic::Rto(RdmaQueuePair* qp)
{
    RoceProfile::Count(EV_RTO);
    if (qp->finished || qp->Inflight() == 0)
    {
        return;
    }
    Time now = Simulator::Now();
    Time due = qp->lastProgress + m_rto;
    if (due > now)
    {
        qp->rtoEvent = Simulator::Schedule(due - now, &RdmaNic::Rto, this, qp);
        return;
    }
    NS_LOG_DEBUG("host " << m_nodeIndex << ": RTO of flow " << qp->flowId << ", go back to "
                         << qp->sndUna);
    qp->sndNxt = qp->sndUna;
    ++qp->retransmits;
    qp->lastProgress = now;
    m_ports[qp->port]->TryTransmit();
}

} // namespace ns3
