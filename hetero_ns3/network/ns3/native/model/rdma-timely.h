#ifndef HETERO_NS3_RDMA_TIMELY_H
#define HETERO_NS3_RDMA_TIMELY_H

#include "ns3/data-rate.h"
#include "ns3/nstime.h"
#include "ns3/traced-callback.h"
#include "ns3/traced-value.h"
#include "rdma-congestion-ops.h"

#include <cstdint>
#include <deque>

namespace ns3
{

/**
 * \brief TIMELY sender (Mittal et al., "TIMELY: RTT-based Congestion Control for the Datacenter",
 * SIGCOMM 2015, Algorithm 1) over RDMA: rate-based, driven by RTT samples, no window, no ECN.
 *
 * Each ACK that acknowledges the end of a frame gives one RTT sample new_rtt = ACK arrival - send
 * time of that frame (kept by this strategy, one entry per frame in flight). Per sample after the
 * first: rtt_diff = (1 - Alpha) rtt_diff + Alpha (new_rtt - prev_rtt); g = rtt_diff / MinRtt; then
 * new_rtt < TLow: R += RateAi; new_rtt > THigh: R *= 1 - Beta (1 - THigh / new_rtt); g <= 0:
 * R += N RateAi, N = HaiFactor (5) once the count of consecutive non-positive gradients reaches
 * HaiCount (5), else 1; g > 0: R *= 1 - Beta g (and the count resets). R stays in [MinRate, line
 * rate]. The Python config keeps RdmaNic::AckInterval = 16 for this strategy (one sample per 64 KiB
 * of 4 KiB frames, close to the paper's per-completion update); see docs/roce.md.
 */
class RdmaTimely : public RdmaCongestionOps
{
public:
    /** \return the TypeId. */
    static TypeId GetTypeId();
    RdmaTimely();

    void Init(RdmaQueuePair* qp) override;
    void OnAck(const RocePacket& ack, uint64_t newlyAcked) override;
    void OnSent(uint32_t bytes) override;
    std::string GetName() const override;

private:
    /** One RTT sample \p rtt (s): Algorithm 1. */
    void Update(double rtt);

    double m_alpha;
    double m_beta;
    Time m_tLow;
    Time m_tHigh;
    Time m_minRtt;
    DataRate m_rateAi;
    DataRate m_minRate;
    uint32_t m_haiCount;
    uint32_t m_haiFactor;

    /** A frame in flight: the sequence just past it and when it left. */
    struct Sent
    {
        uint64_t end;
        Time at;
    };

    std::deque<Sent> m_sent;           //!< frames sent and not yet acknowledged, by sequence
    double m_prevRtt{-1};              //!< previous RTT sample, s (-1: none yet)
    double m_rttDiff{0};               //!< EWMA of RTT differences, s
    uint32_t m_negCount{0};            //!< consecutive non-positive gradients
    TracedValue<double> m_rate{0};     //!< sending rate, bit/s (trace source Rate)
    TracedValue<double> m_gradient{0}; //!< normalized gradient (trace source Gradient)
    TracedCallback<double, double> m_rttTrace; //!< (previous, new) RTT sample, s (trace source Rtt)
};

} // namespace ns3

#endif
