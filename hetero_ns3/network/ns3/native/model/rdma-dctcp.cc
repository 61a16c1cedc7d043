#include "rdma-dctcp.h"

#include "ns3/double.h"
#include "ns3/log.h"

#include <algorithm>

namespace ns3
{

NS_LOG_COMPONENT_DEFINE("RdmaDctcp");

NS_OBJECT_ENSURE_REGISTERED(RdmaDctcp);

TypeId
RdmaDctcp::GetTypeId()
{
    static TypeId tid =
        TypeId("ns3::RdmaDctcp")
            .SetParent<RdmaCongestionOps>()
            .SetGroupName("HeteroNs3")
            .AddConstructor<RdmaDctcp>()
            .AddAttribute("G",
                          "Gain g of the marked-fraction moving average (paper: 1/16)",
                          DoubleValue(1.0 / 16),
                          MakeDoubleAccessor(&RdmaDctcp::m_g),
                          MakeDoubleChecker<double>(0.0, 1.0))
            .AddAttribute("MinRate",
                          "Lower bound of the sending rate (window >= MinRate x base RTT)",
                          DataRateValue(DataRate("100Mbps")),
                          MakeDataRateAccessor(&RdmaDctcp::m_minRate),
                          MakeDataRateChecker())
            .AddTraceSource("Window",
                            "Send window W, bytes",
                            MakeTraceSourceAccessor(&RdmaDctcp::m_w),
                            "ns3::TracedValueCallback::Double")
            .AddTraceSource("Alpha",
                            "Estimate of the marked fraction alpha",
                            MakeTraceSourceAccessor(&RdmaDctcp::m_alpha),
                            "ns3::TracedValueCallback::Double");
    return tid;
}

RdmaDctcp::RdmaDctcp() = default;

std::string
RdmaDctcp::GetName() const
{
    return "dctcp";
}

void
RdmaDctcp::Init(RdmaQueuePair* qp)
{
    NS_LOG_FUNCTION(this << qp);
    m_qp = qp;
    m_t = qp->baseRtt.GetSeconds();
    m_alpha = 1.0;
    m_windowEnd = 0;
    Apply(qp->lineRateBps * m_t / 8.0);
}

void
RdmaDctcp::Apply(double w)
{
    double wmin = std::max(static_cast<double>(m_minRate.GetBitRate()) * m_t / 8.0, 1.0);
    double wmax = m_qp->lineRateBps * m_t / 8.0;
    m_w = std::clamp(w, wmin, wmax);
    m_qp->windowBytes = std::max<uint64_t>(static_cast<uint64_t>(m_w.Get()), 1);
    m_qp->rateBps = std::min(m_w.Get() * 8.0 / m_t, m_qp->lineRateBps);
    NS_LOG_LOGIC("flow " << m_qp->flowId << ": window " << m_qp->windowBytes << " B, rate "
                         << m_qp->rateBps << " bit/s");
}

void
RdmaDctcp::OnAck(const RocePacket& ack, uint64_t newlyAcked)
{
    m_acked += newlyAcked;
    if (ack.ce)
    {
        m_marked += newlyAcked;
    }
    if (ack.seq <= m_windowEnd)
    {
        return;
    }
    // One window of feedback: update alpha, then react once.
    if (m_acked > 0)
    {
        double f = static_cast<double>(m_marked) / static_cast<double>(m_acked);
        m_alpha = (1.0 - m_g) * m_alpha.Get() + m_g * f;
    }
    double w = m_marked > 0 ? m_w.Get() * (1.0 - m_alpha.Get() / 2.0) : m_w.Get() + m_qp->segment;
    m_acked = 0;
    m_marked = 0;
    m_windowEnd = m_qp->sndNxt;
    Apply(w);
}

} // namespace ns3
