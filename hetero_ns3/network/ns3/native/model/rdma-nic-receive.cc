// RdmaNic, frames arriving at the host: the receiver's side of DATA (in-order delivery, cumulative
// ACKs, NACK for go-back-N, out-of-order frames kept with ReorderTolerant, CNPs for ECN-marked
// frames) and the sender's side of ACK, NACK and CNP (progress, rewind, congestion control, end of
// a queue pair). Set-up and the send side are in rdma-nic.cc.
#include "ns3/log.h"
#include "ns3/simulator.h"
#include "rdma-congestion-ops.h"
#include "rdma-nic.h"
#include "roce-net-device.h"

#include <algorithm>

namespace ns3
{

NS_LOG_COMPONENT_DEFINE("RdmaNicReceive");

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
