#include "rdma-timely.h"

#include "ns3/double.h"
#include "ns3/simulator.h"
#include "ns3/uinteger.h"

#include <algorithm>

namespace ns3
{

NS_OBJECT_ENSURE_REGISTERED(RdmaTimely);

TypeId
RdmaTimely::GetTypeId()
{
    static TypeId tid =
        TypeId("ns3::RdmaTimely")
            .SetParent<RdmaCongestionOps>()
            .SetGroupName("HeteroNs3")
            .AddConstructor<RdmaTimely>()
            .AddAttribute(
                "Alpha",
                "EWMA weight of the newest RTT difference (paper and HPCC artifact: 0.875)",
                DoubleValue(0.875),
                MakeDoubleAccessor(&RdmaTimely::m_alpha),
                MakeDoubleChecker<double>(0.0, 1.0))
            .AddAttribute("Beta",
                          "Multiplicative decrease factor (paper and HPCC artifact: 0.8)",
                          DoubleValue(0.8),
                          MakeDoubleAccessor(&RdmaTimely::m_beta),
                          MakeDoubleChecker<double>(0.0, 1.0))
            .AddAttribute("TLow",
                          "Below this RTT the rate only grows additively (paper: 50 us)",
                          TimeValue(MicroSeconds(50)),
                          MakeTimeAccessor(&RdmaTimely::m_tLow),
                          MakeTimeChecker())
            .AddAttribute(
                "THigh",
                "Above this RTT the rate is cut by Beta (1 - THigh / RTT) (paper: 500 us)",
                TimeValue(MicroSeconds(500)),
                MakeTimeAccessor(&RdmaTimely::m_tHigh),
                MakeTimeChecker())
            .AddAttribute("MinRtt",
                          "Normalizer of the RTT gradient (paper: 20 us)",
                          TimeValue(MicroSeconds(20)),
                          MakeTimeAccessor(&RdmaTimely::m_minRtt),
                          MakeTimeChecker(NanoSeconds(1)))
            .AddAttribute("RateAi",
                          "Additive increment delta per update (paper: 10 Mb/s)",
                          DataRateValue(DataRate("10Mbps")),
                          MakeDataRateAccessor(&RdmaTimely::m_rateAi),
                          MakeDataRateChecker())
            .AddAttribute("MinRate",
                          "Lower bound of the sending rate",
                          DataRateValue(DataRate("100Mbps")),
                          MakeDataRateAccessor(&RdmaTimely::m_minRate),
                          MakeDataRateChecker())
            .AddAttribute(
                "HaiCount",
                "Consecutive non-positive gradients that enter hyper-active increase (paper: 5)",
                UintegerValue(5),
                MakeUintegerAccessor(&RdmaTimely::m_haiCount),
                MakeUintegerChecker<uint32_t>(1))
            .AddAttribute("HaiFactor",
                          "Increment multiple N in hyper-active increase (paper: 5)",
                          UintegerValue(5),
                          MakeUintegerAccessor(&RdmaTimely::m_haiFactor),
                          MakeUintegerChecker<uint32_t>(1))
            .AddTraceSource("Rate",
                            "Sending rate, bit/s",
                            MakeTraceSourceAccessor(&RdmaTimely::m_rate),
                            "ns3::TracedValueCallback::Double")
            .AddTraceSource("Gradient",
                            "Normalized RTT gradient rtt_diff / MinRtt",
                            MakeTraceSourceAccessor(&RdmaTimely::m_gradient),
                            "ns3::TracedValueCallback::Double")
            .AddTraceSource(
                "Rtt",
                "Every RTT sample: (previous sample, new sample), seconds (previous -1 at first)",
                MakeTraceSourceAccessor(&RdmaTimely::m_rttTrace),
                "ns3::TracedValueCallback::Double");
    return tid;
}

RdmaTimely::RdmaTimely() = default;

std::string
RdmaTimely::GetName() const
{
    return "timely";
}

void
RdmaTimely::Init(RdmaQueuePair* qp)
{
    m_qp = qp;
    m_sent.clear();
    m_prevRtt = -1;
    m_rttDiff = 0;
    m_negCount = 0;
    m_rate = qp->lineRateBps;
    qp->rateBps = qp->lineRateBps;
    qp->windowBytes = 0;
}

void
RdmaTimely::OnSent(uint32_t)
{
    // Called after the NIC advanced sndNxt past the frame. A go-back-N rewind re-sends from a lower
    // sequence: forget the frames at and above it (their new copies get new send times).
    uint64_t end = m_qp->sndNxt;
    while (!m_sent.empty() && m_sent.back().end >= end)
    {
        m_sent.pop_back();
    }
    m_sent.push_back({end, Simulator::Now()});
}

void
RdmaTimely::OnAck(const RocePacket& ack, uint64_t)
{
    while (!m_sent.empty() && m_sent.front().end < ack.seq)
    {
        m_sent.pop_front();
    }
    // Only an ACK for the end of a frame we timed gives a sample (duplicates do not).
    if (m_sent.empty() || m_sent.front().end != ack.seq)
    {
        return;
    }
    double rtt = (Simulator::Now() - m_sent.front().at).GetSeconds();
    m_sent.pop_front();
    Update(rtt);
}

void
RdmaTimely::Update(double rtt)
{
    m_rttTrace(m_prevRtt, rtt);
    if (m_prevRtt < 0)
    {
        m_prevRtt = rtt; // first sample: no gradient yet
        return;
    }
    m_rttDiff = (1.0 - m_alpha) * m_rttDiff + m_alpha * (rtt - m_prevRtt);
    m_prevRtt = rtt;
    m_gradient = m_rttDiff / m_minRtt.GetSeconds();
    double r = m_rate.Get();
    double ai = static_cast<double>(m_rateAi.GetBitRate());
    double tHigh = m_tHigh.GetSeconds();
    if (rtt < m_tLow.GetSeconds())
    {
        r += ai;
    }
    else if (rtt > tHigh)
    {
        r *= 1.0 - m_beta * (1.0 - tHigh / rtt);
        m_negCount = 0;
    }
    else if (m_gradient.Get() <= 0)
    {
        ++m_negCount;
        r += (m_negCount >= m_haiCount ? m_haiFactor : 1) * ai;
    }
    else
    {
        r *= 1.0 - m_beta * m_gradient.Get();
        m_negCount = 0;
    }
    double lo = std::min(static_cast<double>(m_minRate.GetBitRate()), m_qp->lineRateBps);
    m_rate = std::clamp(r, lo, m_qp->lineRateBps);
    m_qp->rateBps = m_rate.Get();
}

} // namespace ns3
