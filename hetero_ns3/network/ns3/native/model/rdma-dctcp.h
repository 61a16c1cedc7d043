#ifndef HETERO_NS3_RDMA_DCTCP_H
#define HETERO_NS3_RDMA_DCTCP_H

#include "ns3/data-rate.h"
#include "ns3/traced-value.h"
#include "rdma-congestion-ops.h"

namespace ns3
{

/**
 * \brief DCTCP sender (Alizadeh et al., "Data Center TCP", SIGCOMM 2010) over RDMA.
 *
 * Window-based; the receiver echoes each DATA frame's CE bit in its ACK (ACK per frame). Once per
 * window of data (when an ACK passes the sequence recorded at the previous update) the fraction F
 * of acknowledged bytes that were marked updates alpha = (1 - g) alpha + g F, and if any byte of
 * that window was marked the window is cut once: W = W (1 - alpha/2). Without marks the window
 * grows by one segment per window (congestion avoidance). Initial W = line rate x base RTT (no slow
 * start, as RDMA NICs start at line rate); pacing rate = W / base RTT; W stays between MinRate x
 * base RTT and one BDP.
 */
class RdmaDctcp : public RdmaCongestionOps
{
public:
    /** \return the TypeId. */
    static TypeId GetTypeId();
    RdmaDctcp();

    void Init(RdmaQueuePair* qp) override;
    void OnAck(const RocePacket& ack, uint64_t newlyAcked) override;
    std::string GetName() const override;

private:
    /** Clamp \p w to [MinRate x T, BDP], set it and the QP's window and pacing rate. */
    void Apply(double w);

    double m_g;
    DataRate m_minRate;

    double m_t{0};                    //!< base RTT, s
    TracedValue<double> m_w{0};       //!< window W, bytes (trace source Window)
    TracedValue<double> m_alpha{1.0}; //!< marked-fraction estimate (trace source Alpha)
    uint64_t m_windowEnd{0};          //!< update once an ACK passes this sequence
    uint64_t m_acked{0};              //!< bytes acknowledged in the current window
    uint64_t m_marked{0};             //!< of which acknowledged by ECN-echo ACKs
};

} // namespace ns3

#endif
