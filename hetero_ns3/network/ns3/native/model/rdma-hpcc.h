#ifndef HETERO_NS3_RDMA_HPCC_H
#define HETERO_NS3_RDMA_HPCC_H

#include "ns3/data-rate.h"
#include "ns3/nstime.h"
#include "ns3/traced-value.h"
#include "rdma-congestion-ops.h"

namespace ns3
{

/**
 * \brief HPCC sender (Li et al., SIGCOMM 2019), window-based with INT feedback.
 *
 * Per ACK, for every hop i of the INT stack it estimates the normalized inflight
 * u_i = min(q_i, q'_i) / (B_i T) + txRate_i / B_i, takes the most loaded hop, and smooths
 * U with weight tau/T. The window is W = Wc / (U/eta) + W_AI when U >= eta or after
 * MaxStage additive steps, else W = Wc + W_AI; the reference window Wc is updated once per
 * RTT (when the ACK passes the sequence recorded at the last update). Rate = W / T.
 * W_AI = RateAi x T. T is the BaseRtt attribute when set (one network-wide value, as the
 * paper's parameter section and the artifact's GLOBAL_T use), else the flow's own path base RTT;
 * initial W = line rate x T; from the first INT stack on, W <= (slowest link of the path) x T.
 */
class RdmaHpcc : public RdmaCongestionOps
{
public:
    /** \return the TypeId. */
    static TypeId GetTypeId();
    RdmaHpcc();

    void Init(RdmaQueuePair* qp) override;
    void OnAck(const RocePacket& ack, uint64_t newlyAcked) override;
    bool NeedsInt() const override;
    std::string GetName() const override;

    /** \return the smoothed normalized inflight U. */
    double GetU() const;

private:
    double ComputeWindow(double u, bool updateWc);

    double m_eta;
    uint32_t m_maxStage;
    DataRate m_rai;
    DataRate m_minRate;
    Time m_globalT; //!< network-wide T (attribute BaseRtt); zero: per-flow base RTT

    double m_t{0};              // base RTT, s
    double m_maxRateBps{0};     // line rate, then the slowest link of the path (first INT stack)
    double m_wc{0};             // reference window, bytes
    TracedValue<double> m_w{0}; //!< window W, bytes (trace source Window)
    double m_u{1.0};
    uint32_t m_incStage{0};
    uint64_t m_lastUpdateSeq{0};
    uint8_t m_nPrev{0};
    IntHop m_prev[RocePacket::MAX_INT_HOPS];
};

} // namespace ns3

#endif
