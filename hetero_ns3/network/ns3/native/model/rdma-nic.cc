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

uint32_t
RdmaNic::GetCnpsSent(uint32_t flowId) const
{
    auto it = m_rx.find(flowId);
    return it == m_rx.end() ? 0 : it->second.cnps;
}

uint32_t
RdmaNic::GetAcksSent(uint32_t flowId) const
{
    auto it = m_rx.find(flowId);
    return it == m_rx.end() ? 0 : it->second.acks;
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

void
RdmaNic::Receive(Ptr<RocePacket> p, uint32_t port)
{
    if (p->dst != m_nodeIndex)
    {
        // Hosts never forward transit traffic.
        m_ports[port]->RecordDrop(*p, DROP_NO_ROUTE);
        return;
    }
    switch (p->type)
    {
        case RocePacketType::DATA:
            OnData(p, port);
            break;
        case RocePacketType::ACK:
            OnAckOrNack(*p, false);
            break;
        case RocePacketType::NACK:
            OnAckOrNack(*p, true);
            break;
        case RocePacketType::CNP: {
            auto it = m_tx.find(p->flowId);
            if (it != m_tx.end() && !it->second->finished)
            {
                m_cnpReceivedTrace(p->flowId);
                it->second->cc->OnCnp();
            }
            break;
        }
        default:
            break;
    }
}

void
RdmaNic::OnData(Ptr<RocePacket> p, uint32_t port)
{
    RxState& rx = m_rx[p->flowId];
    Time now = Simulator::Now();
    if (m_sendCnp && p->ce && now - rx.lastCnp >= m_cnpInterval)
    {
        rx.lastCnp = now;
        ++rx.cnps;
        NS_LOG_LOGIC("host " << m_nodeIndex << ": CNP sent for flow " << p->flowId);
        m_cnpSentTrace(p->flowId);
        SendControl(RocePacketType::CNP, *p, rx.expected, false);
    }
    if (p->seq == rx.expected)
    {
        rx.expected += p->payload;
        while (rx.held && !rx.held->empty() && rx.held->begin()->first <= rx.expected)
        {
            rx.expected = std::max(rx.expected, rx.held->begin()->second);
            rx.held->erase(rx.held->begin());
        }
        bool complete = rx.expected >= p->flowBytes;
        if (++rx.sinceAck >= m_ackInterval || complete || p->ackReq)
        {
            rx.sinceAck = 0;
            ++rx.acks;
            SendControl(RocePacketType::ACK, *p, rx.expected, true);
        }
        if (complete && !rx.done)
        {
            rx.done = true;
            NS_LOG_INFO("host " << m_nodeIndex << ": flow " << p->flowId << " received in full");
            if (!m_rxComplete.IsNull())
            {
                m_rxComplete(p->flowId);
            }
        }
    }
    else if (p->seq > rx.expected && m_reorderTolerant)
    {
        if (!rx.held)
        {
            rx.held = std::make_unique<std::map<uint64_t, uint64_t>>();
        }
        uint64_t& end = (*rx.held)[p->seq];
        end = std::max(end, p->seq + p->payload);
        if (++rx.sinceAck >= m_ackInterval || p->ackReq)
        {
            rx.sinceAck = 0;
            SendControl(RocePacketType::ACK, *p, rx.expected, true);
        }
    }
    else if (p->seq > rx.expected)
    {
        if (rx.lastNackSeq != rx.expected || now - rx.lastNack >= m_nackInterval)
        {
            rx.lastNackSeq = rx.expected;
            rx.lastNack = now;
            SendControl(RocePacketType::NACK, *p, rx.expected, false);
        }
    }
    else
    {
        // duplicate after a spurious rewind: re-acknowledge what we have
        SendControl(RocePacketType::ACK, *p, rx.expected, false);
    }
}

void
RdmaNic::SendControl(RocePacketType type, const RocePacket& data, uint64_t seq, bool copyInt)
{
    Ptr<RocePacket> c = Create<RocePacket>();
    c->type = type;
    c->priority = static_cast<uint8_t>(m_ackPriority);
    c->ecnCapable = false;
    c->flowId = data.flowId;
    c->src = m_nodeIndex;
    c->dst = data.src;
    c->sport = data.sport;
    c->seq = seq;
    c->size = m_ackBytes;
    // ECN echo (DCTCP): an ACK carries the CE bit of the frame that triggered it (ACKs are not ECT,
    // so no switch marks them).
    c->ce = type == RocePacketType::ACK && data.ce;
    if (copyInt && data.nHops > 0)
    {
        c->nHops = data.nHops;
        std::copy(data.hops, data.hops + data.nHops, c->hops);
    }
    uint32_t port = SelectPort(*c);
    if (port == UINT32_MAX)
    {
        return;
    }
    m_ports[port]->Enqueue(c);
}

void
RdmaNic::OnAckOrNack(const RocePacket& p, bool nack)
{
    auto it = m_tx.find(p.flowId);
    if (it == m_tx.end() || it->second->finished)
    {
        return;
    }
    RdmaQueuePair* qp = PeekPointer(it->second);
    uint64_t newly = 0;
    if (p.seq > qp->sndUna)
    {
        newly = p.seq - qp->sndUna;
        qp->sndUna = p.seq;
        qp->lastProgress = Simulator::Now();
        if (qp->sndNxt < qp->sndUna)
        {
            qp->sndNxt = qp->sndUna;
        }
    }
    if (nack && qp->sndNxt > p.seq)
    {
        qp->sndNxt = p.seq;
        ++qp->retransmits;
    }
    if (!nack)
    {
        qp->cc->OnAck(p, newly);
    }
    if (qp->sndUna >= qp->size)
    {
        FinishQp(qp);
        return;
    }
    m_ports[qp->port]->TryTransmit();
}

void
RdmaNic::FinishQp(RdmaQueuePair* qp)
{
    NS_LOG_INFO("host " << m_nodeIndex << ": QP of flow " << qp->flowId << " finished, "
                        << qp->retransmits << " retransmissions");
    qp->finished = true;
    Simulator::Remove(qp->rtoEvent);
    qp->cc->Stop();
    if (qp->port < m_active.size())
    {
        auto& list = m_active[qp->port];
        auto pos = std::find_if(list.begin(), list.end(), [qp](const Ptr<RdmaQueuePair>& x) {
            return PeekPointer(x) == qp;
        });
        if (pos != list.end())
        {
            list.erase(pos);
        }
    }
    if (!m_txComplete.IsNull())
    {
        m_txComplete(qp->flowId);
    }
    // Last use of qp: this may free it (callers return right after). Later ACKs, NACKs and CNPs
    // of the flow find no entry and are ignored, as they were for a finished queue pair.
    m_tx.erase(qp->flowId);
}

} // namespace ns3
