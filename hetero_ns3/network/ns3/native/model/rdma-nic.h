#ifndef HETERO_NS3_RDMA_NIC_H
#define HETERO_NS3_RDMA_NIC_H

#include "ns3/callback.h"
#include "ns3/object-factory.h"
#include "ns3/traced-callback.h"
#include "ns3/type-id.h"
#include "rdma-congestion-ops.h"
#include "rdma-queue-pair.h"
#include "roce-node.h"

#include <map>
#include <memory>
#include <unordered_map>
#include <vector>

namespace ns3
{

/**
 * \brief RDMA NIC of a host: queue pairs, pacing, ACK/NACK/CNP, go-back-N.
 *
 * Sender: one RdmaQueuePair per flow, bound to the egress port that the host's forwarding
 * table (ECMP hash) picks. Each port serves its ready queue pairs round robin; a queue pair
 * is ready when it has bytes to send, its class is not paused, its window (if any) has
 * room and its pacing time has come. Frames carry SegmentBytes of payload (the port's
 * MTU) plus HeaderBytes (plus IntHeaderBytes when the strategy uses INT).
 *
 * Receiver: in-order DATA advances the expected byte; every AckInterval frames (and on the
 * last one, and on any frame with the BTH AckReq bit) it returns a cumulative ACK carrying the
 * frame's INT stack. The sender sets AckReq on a flow's last frame and, when window-limited,
 * on the frame that fills the window and every quarter window, so that ACK coalescing neither
 * stalls a window-limited sender nor turns its sliding window into stop-and-wait. Out-of-order DATA
 * triggers a NACK for the expected byte (at most once per NackInterval for the same byte)
 * and is discarded (go-back-N). An ECN-marked frame triggers a CNP, at most one per queue
 * pair per CnpInterval. A lost tail is recovered by the sender's RetransmitTimeout.
 *
 * With ReorderTolerant, out-of-order frames are kept instead of discarded and no NACK is sent;
 * the cumulative ACK jumps once the gap fills (for per-packet spraying over lossless paths).
 * Losses are then recovered by RetransmitTimeout only (no selective retransmission).
 */
class RdmaNic : public RoceNode
{
public:
    /** \return the TypeId. */
    static TypeId GetTypeId();
    /** Signature of the CongestionControlCreated trace: (flow id, the new strategy, before Init).
     */
    typedef void (*CcCreatedTracedCallback)(uint32_t flowId, Ptr<RdmaCongestionOps> cc);
    RdmaNic();
    ~RdmaNic() override;

    /** Create the congestion-control factory; call once after attributes are set. */
    void Prepare();
    /** Start sending \p qp now (fields flowId/src/dst/sport/priority/size/baseRtt set). */
    void StartQueuePair(Ptr<RdmaQueuePair> qp);
    /** Set the callback run when this host has received every byte of a flow. */
    void SetReceiveCompleteCallback(Callback<void, uint32_t> cb);
    /** Set the callback run when a flow sourced here has been fully acknowledged. */
    void SetSendCompleteCallback(Callback<void, uint32_t> cb);
    /** \return the congestion-control TypeId. */
    TypeId GetCongestionControl() const;
    /** \return wire bytes of a full DATA frame for payload \p payload. */
    uint32_t DataFrameBytes(uint32_t payload) const;
    /** \return CNPs this host sent for flow \p flowId as its receiver (0 if unknown). */
    uint32_t GetCnpsSent(uint32_t flowId) const;
    /** \return ACKs this host sent for flow \p flowId as its receiver (0 if unknown). */
    uint32_t GetAcksSent(uint32_t flowId) const;
    /** \return true when the congestion control needs INT (valid after Prepare). */
    bool NeedsInt() const;
    /** \return wire bytes of ACK/NACK/CNP frames. */
    uint32_t AckFrameBytes() const;

    void Receive(Ptr<RocePacket> p, uint32_t port) override;
    Ptr<RocePacket> PullData(uint32_t port, uint8_t pausedMask, Time* wake) override;
    Time NextPullTime(uint32_t port, uint8_t pausedMask) const override;
    bool IsHost() const override;

protected:
    void DoDispose() override;

private:
    /** Receiver state of one flow (56 bytes: it stays for every flow this host received). */
    struct RxState
    {
        uint64_t expected{0};
        Time lastCnp{Seconds(-1)};
        uint64_t lastNackSeq{UINT64_MAX};
        Time lastNack;
        /** Out-of-order ranges [start, end) kept (ReorderTolerant); allocated on first use. */
        std::unique_ptr<std::map<uint64_t, uint64_t>> held;
        uint32_t sinceAck{0};
        uint32_t cnps{0};
        uint32_t acks{0};
        bool done{false};
    };

    void OnData(Ptr<RocePacket> p, uint32_t port);
    void OnAckOrNack(const RocePacket& p, bool nack);
    void SendControl(RocePacketType type, const RocePacket& data, uint64_t seq, bool copyInt);
    /** \return true when the DATA frame starting at \p seq (just counted in qp.sndNxt) sets AckReq.
     */
    bool NeedsAckRequest(const RdmaQueuePair& qp, uint64_t seq) const;
    void Rto(RdmaQueuePair* qp);
    void FinishQp(RdmaQueuePair* qp);

    TypeId m_ccTypeId;
    ObjectFactory m_ccFactory;
    bool m_ccNeedsInt{false};
    bool m_factoryReady{false};
    uint32_t m_ackInterval;
    Time m_cnpInterval;
    bool m_sendCnp{true};
    Time m_nackInterval;
    Time m_rto;
    uint32_t m_ackPriority;
    uint32_t m_headerBytes;
    uint32_t m_ackBytes;
    uint32_t m_intBytes;
    bool m_useWindow;
    uint8_t m_pacingRule; //!< see the PacingRule attribute
    bool m_reorderTolerant;

    std::vector<std::vector<Ptr<RdmaQueuePair>>> m_active; //!< per port
    std::vector<uint32_t> m_rr;                            //!< per port round-robin cursor
    /** Queue pairs of this host's flows from start until fully acknowledged (FinishQp drops them).
     */
    std::unordered_map<uint32_t, Ptr<RdmaQueuePair>> m_tx;
    std::unordered_map<uint32_t, RxState> m_rx;
    Callback<void, uint32_t> m_rxComplete;
    Callback<void, uint32_t> m_txComplete;
    TracedCallback<uint32_t, Ptr<RdmaCongestionOps>>
        m_ccCreatedTrace;                        //!< a QP's strategy was created
    TracedCallback<uint32_t> m_cnpSentTrace;     //!< receiver sent a CNP (flow id)
    TracedCallback<uint32_t> m_cnpReceivedTrace; //!< sender got a CNP (flow id)
};

} // namespace ns3

#endif
