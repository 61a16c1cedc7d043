#include "rdma-hpcc.h"

#include "ns3/double.h"
#include "ns3/log.h"
#include "ns3/nstime.h"
#include "ns3/uinteger.h"

#include <algorithm>

namespace ns3
{

NS_LOG_COMPONENT_DEFINE("RdmaHpcc");

NS_OBJECT_ENSURE_REGISTERED(RdmaHpcc);

TypeId
RdmaHpcc::GetTypeId()
{
    static TypeId tid =
        TypeId("ns3::RdmaHpcc")
            .SetParent<RdmaCongestionOps>()
            .SetGroupName("HeteroNs3")
            .AddConstructor<RdmaHpcc>()
            .AddAttribute("Eta",
                          "Target utilization eta (paper: 0.95)",
                          DoubleValue(0.95),
                          MakeDoubleAccessor(&RdmaHpcc::m_eta),
                          MakeDoubleChecker<double>(0.01, 1.0))
            .AddAttribute("MaxStage",
                          "Additive-increase stages before a multiplicative update (paper: 5)",
                          UintegerValue(5),
                          MakeUintegerAccessor(&RdmaHpcc::m_maxStage),
                          MakeUintegerChecker<uint32_t>())
            .AddAttribute("RateAi",
                          "Additive increase as a rate: W_AI = RateAi x base RTT",
                          DataRateValue(DataRate("50Mbps")),
                          MakeDataRateAccessor(&RdmaHpcc::m_rai),
                          MakeDataRateChecker())
            .AddAttribute("MinRate",
                          "Lower bound of the sending rate",
                          DataRateValue(DataRate("100Mbps")),
                          MakeDataRateAccessor(&RdmaHpcc::m_minRate),
                          MakeDataRateChecker())
            .AddAttribute(
                "BaseRtt",
                "T of every flow (window, INT queue term, W_AI, pacing). 0: each flow's own "
                "path base RTT; > 0: this one value for all flows (paper and artifact "
                "GLOBAL_T: the network's largest base RTT)",
                TimeValue(Seconds(0)),
                MakeTimeAccessor(&RdmaHpcc::m_globalT),
                MakeTimeChecker(Seconds(0)))
            .AddTraceSource("Window",
                            "Send window W, bytes (pacing rate = W / base RTT)",
                            MakeTraceSourceAccessor(&RdmaHpcc::m_w),
                            "ns3::TracedValueCallback::Double");
    return tid;
}

RdmaHpcc::RdmaHpcc() = default;

std::string
RdmaHpcc::GetName() const
{
    return "hpcc";
}

bool
RdmaHpcc::NeedsInt() const
{
    return true;
}

double
RdmaHpcc::GetU() const
{
    return m_u;
}

void
RdmaHpcc::Init(RdmaQueuePair* qp)
{
    NS_LOG_FUNCTION(this << qp);
    m_qp = qp;
    m_t = m_globalT.IsStrictlyPositive() ? m_globalT.GetSeconds() : qp->baseRtt.GetSeconds();
    m_wc = qp->lineRateBps * m_t / 8.0;
    m_w = m_wc;
    m_u = 1.0;
    m_maxRateBps = qp->lineRateBps;
    qp->rateBps = qp->lineRateBps;
    qp->windowBytes = static_cast<uint64_t>(m_w.Get());
}

double
RdmaHpcc::ComputeWindow(double u, bool updateWc)
{
    double wai = static_cast<double>(m_rai.GetBitRate()) * m_t / 8.0;
    double w;
    if (u >= m_eta || m_incStage >= m_maxStage)
    {
        w = m_wc / (u / m_eta) + wai;
        if (updateWc)
        {
            m_incStage = 0;
            m_wc = w;
            NS_LOG_LOGIC("flow " << m_qp->flowId << ": U " << u << ", multiplicative update, Wc "
                                 << w << " B");
        }
    }
    else
    {
        w = m_wc + wai;
        if (updateWc)
        {
            ++m_incStage;
            m_wc = w;
        }
    }
    return w;
}

void
RdmaHpcc::OnAck(const RocePacket& ack, uint64_t)
{
    if (ack.nHops == 0)
    {
        return;
    }
    if (m_nPrev == ack.nHops)
    {
        double u = 0;
        double tau = m_t;
        bool any = false;
        for (uint8_t i = 0; i < ack.nHops; ++i)
        {
            const IntHop& now = ack.hops[i];
            const IntHop& prev = m_prev[i];
            double dt = (now.tsNs - prev.tsNs) * 1e-9;
            if (dt <= 0)
            {
                continue;
            }
            double txRate = (now.txBytes - prev.txBytes) * 8.0 / dt;
            double ui = std::min(now.qlenBytes, prev.qlenBytes) * 8.0 / (now.rateBps * m_t) +
                        txRate / now.rateBps;
            if (!any || ui > u)
            {
                u = ui;
                tau = dt;
                any = true;
            }
        }
        if (any)
        {
            tau = std::min(tau, m_t);
            m_u = (1.0 - tau / m_t) * m_u + (tau / m_t) * u;
            bool updateWc = ack.seq > m_lastUpdateSeq;
            double w = ComputeWindow(m_u, updateWc);
            if (updateWc)
            {
                m_lastUpdateSeq = m_qp->sndNxt;
            }
            double wmin = static_cast<double>(m_minRate.GetBitRate()) * m_t / 8.0;
            double wmax = m_maxRateBps * m_t / 8.0;
            m_w = std::clamp(w, wmin, wmax); // one trace event per ACK, the window in use
            m_wc = std::clamp(m_wc, wmin, wmax);
            m_qp->windowBytes = std::max<uint64_t>(static_cast<uint64_t>(m_w.Get()), 1);
            // as the artifact's RdmaHw::ChangeRate: the gap still owed follows the new rate
            SetPacedRate(m_w * 8.0 / m_t, true);
        }
    }
    else
    {
        m_lastUpdateSeq = m_qp->sndNxt;
        // First INT stack of this path: no flow can exceed the slowest link on it (the artifact's
        // hosts are NICs, so its line rate is that of the network link; ours may start behind PCIe
        // / NVLink).
        double slowest = m_qp->lineRateBps;
        for (uint8_t i = 0; i < ack.nHops; ++i)
        {
            slowest = std::min(slowest, ack.hops[i].rateBps);
        }
        m_maxRateBps = slowest;
        double wmax = slowest * m_t / 8.0;
        m_wc = std::min(m_wc, wmax);
        m_w = std::min(m_w.Get(), wmax);
        m_qp->windowBytes = std::max<uint64_t>(static_cast<uint64_t>(m_w.Get()), 1);
        m_qp->rateBps = std::min(m_qp->rateBps, slowest);
    }
    m_nPrev = ack.nHops;
    std::copy(ack.hops, ack.hops + ack.nHops, m_prev);
}

} // namespace ns3
