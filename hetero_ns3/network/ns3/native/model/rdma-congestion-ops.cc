#include "rdma-congestion-ops.h"

#include "ns3/log.h"
#include "ns3/simulator.h"

#include <cmath>

namespace ns3
{

NS_LOG_COMPONENT_DEFINE("RdmaCongestionOps");

NS_OBJECT_ENSURE_REGISTERED(RdmaCongestionOps);
NS_OBJECT_ENSURE_REGISTERED(RdmaCcNone);

TypeId
RdmaCongestionOps::GetTypeId()
{
    static TypeId tid = TypeId("ns3::RdmaCongestionOps")
                            .SetParent<Object>()
                            .SetGroupName("HeteroNs3")
                            .AddConstructor<RdmaCongestionOps>();
    return tid;
}

RdmaCongestionOps::RdmaCongestionOps() = default;
RdmaCongestionOps::~RdmaCongestionOps() = default;

void
RdmaCongestionOps::Init(RdmaQueuePair* qp)
{
    NS_LOG_FUNCTION(this << qp);
    m_qp = qp;
    qp->rateBps = qp->lineRateBps;
    qp->windowBytes = 0;
}

void
RdmaCongestionOps::OnAck(const RocePacket&, uint64_t)
{
}

void
RdmaCongestionOps::OnCnp()
{
}

void
RdmaCongestionOps::OnSent(uint32_t)
{
}

void
RdmaCongestionOps::Stop()
{
    NS_LOG_FUNCTION(this);
}

bool
RdmaCongestionOps::NeedsInt() const
{
    return false;
}

std::string
RdmaCongestionOps::GetName() const
{
    return "none";
}

void
RdmaCongestionOps::DoDispose()
{
    Stop();
    m_qp = nullptr;
    Object::DoDispose();
}

void
RdmaCongestionOps::SetPacedRate(double rate, bool wake)
{
    double old = m_qp->rateBps;
    m_qp->rateBps = rate;
    Time now = Simulator::Now();
    if (m_qp->pacingRule == 2)
    {
        return; // the artifact's DCQCN: the gap set when the last frame left stands
    }
    if (m_qp->pacingRule == 1 && m_qp->lastFrameBytes > 0 && rate != old)
    {
        // the HPCC artifact's RdmaHw::ChangeRate: the next frame leaves one whole gap of the new
        // rate after the last one, whatever part of the old gap has passed
        Time before = m_qp->nextAvail;
        m_qp->nextAvail =
            rate < m_qp->lineRateBps * (1 - 1e-9)
                ? m_qp->lastSent +
                      NanoSeconds(static_cast<int64_t>(m_qp->lastFrameBytes * 8.0 * 1e9 / rate))
                : m_qp->lastSent;
        if (m_qp->nextAvail < before && wake && !m_qp->wakePort.IsNull())
        {
            m_qp->wakePort();
        }
        return;
    }
    if (old > 0 && rate != old && m_qp->nextAvail > now)
    {
        double remaining = static_cast<double>((m_qp->nextAvail - now).GetTimeStep());
        m_qp->nextAvail = now + TimeStep(std::llround(remaining * old / rate));
        if (rate > old && wake && !m_qp->wakePort.IsNull())
        {
            m_qp->wakePort();
        }
    }
}

TypeId
RdmaCcNone::GetTypeId()
{
    static TypeId tid = TypeId("ns3::RdmaCcNone")
                            .SetParent<RdmaCongestionOps>()
                            .SetGroupName("HeteroNs3")
                            .AddConstructor<RdmaCcNone>();
    return tid;
}

std::string
RdmaCcNone::GetName() const
{
    return "none";
}

} // namespace ns3
