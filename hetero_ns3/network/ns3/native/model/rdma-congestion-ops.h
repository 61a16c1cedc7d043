#ifndef HETERO_NS3_RDMA_CONGESTION_OPS_H
#define HETERO_NS3_RDMA_CONGESTION_OPS_H

#include "ns3/object.h"
#include "rdma-queue-pair.h"
#include "roce-packet.h"

#include <string>

namespace ns3
{

/**
 * \brief Congestion-control strategy of one RDMA queue pair (pluggable, chosen by the
 * RdmaNic::CongestionControl TypeId attribute; one instance per queue pair).
 *
 * The base class is the `none` strategy: line rate, no window, no reaction.
 */
class RdmaCongestionOps : public Object
{
public:
    /** \return the TypeId. */
    static TypeId GetTypeId();
    RdmaCongestionOps();
    ~RdmaCongestionOps() override;

    /** Attach to \p qp and set its initial rate and window. */
    virtual void Init(RdmaQueuePair* qp);
    /** An ACK for \p qp arrived; \p newlyAcked bytes were acknowledged by it. */
    virtual void OnAck(const RocePacket& ack, uint64_t newlyAcked);
    /** A CNP for \p qp arrived. */
    virtual void OnCnp();
    /** \p bytes (wire) were sent. */
    virtual void OnSent(uint32_t bytes);
    /** The queue pair finished: cancel timers. */
    virtual void Stop();
    /** \return true when the strategy needs INT records on DATA frames. */
    virtual bool NeedsInt() const;
    /** \return short name (none, dcqcn, hpcc). */
    virtual std::string GetName() const;

protected:
    void DoDispose() override;
    /**
     * Set the queue pair's pacing rate to \p rate (bit/s). The NIC's rate limiter behaves as a
     * token bucket: the bits still owed for the frame last sent accrue at the new rate, so the
     * remaining pacing gap is rescaled by old / new rate. When the gap shrinks and \p wake is
     * true, the egress port is asked to look again (pass false from OnSent: the port is then
     * building a frame and reads nextAvail right after it).
     */
    void SetPacedRate(double rate, bool wake);
    RdmaQueuePair* m_qp{nullptr}; //!< the queue pair (owned by the NIC, outlives this)
};

/** \brief `none`: send at line rate (baselines). Same behaviour as the base class. */
class RdmaCcNone : public RdmaCongestionOps
{
public:
    /** \return the TypeId. */
    static TypeId GetTypeId();
    std::string GetName() const override;
};

} // namespace ns3

#endif
