#ifndef HETERO_NS3_ROCE_NET_DEVICE_H
#define HETERO_NS3_ROCE_NET_DEVICE_H

#include "ns3/data-rate.h"
#include "ns3/event-id.h"
#include "ns3/mac48-address.h"
#include "ns3/net-device.h"
#include "ns3/nstime.h"
#include "ns3/traced-callback.h"
#include "roce-packet.h"

#include <array>
#include <deque>
#include <string>

namespace ns3
{

class RoceChannel;
class RoceNode;

/** \brief Named reasons for dropping a frame (counted per port). */
enum RoceDropReason : uint32_t
{
    DROP_NO_ROUTE = 0,          //!< no forwarding entry toward the destination
    DROP_LOSSY_BUFFER = 1,      //!< lossy class: egress threshold or shared buffer exceeded
    DROP_HEADROOM_OVERFLOW = 2, //!< lossless class: PFC headroom exhausted (misconfigured headroom)
    DROP_LINK_DOWN = 3,         //!< link taken down (fault injection)
    DROP_REASON_COUNT = 4,
};

/** \return the snake_case name of a drop reason. */
const char* RoceDropReasonName(uint32_t reason);

/**
 * \brief Lossless point-to-point port with 8 traffic classes and IEEE 802.1Qbb PFC.
 *
 * Each class has its own FIFO egress queue. Classes are served in strict priority
 * (class 7 first) or by deficit weighted round robin (Scheduler attribute). PFC frames go
 * through a separate control queue served before any class and are never paused. A PFC
 * PAUSE for class c with q quanta stops class c for q x 512 bit times at this port's rate;
 * a RESUME (q = 0) restarts it at once. On hosts, when every class queue is empty or
 * paused, the port asks its RoceNode for data (PullData), which implements the NIC's
 * queue-pair scheduling and pacing.
 *
 * Frames are RocePacket objects; the ns3::Packet Send() path of NetDevice is not used
 * (Send returns false).
 */
class RoceNetDevice : public NetDevice
{
public:
    /** Scheduling between traffic classes. */
    enum Scheduler
    {
        STRICT = 0, //!< strict priority, class 7 highest
        WRR = 1,    //!< deficit weighted round robin with WrrWeights
    };

    static constexpr uint32_t N_CLASSES = 8; //!< traffic classes

    /** \return the TypeId. */
    static TypeId GetTypeId();
    RoceNetDevice();
    ~RoceNetDevice() override;

    /** Connect to \p ch (called by the network builder). */
    void Attach(Ptr<RoceChannel> ch);
    /** Set the owning forwarding logic and this port's local index in it. */
    void SetOwner(RoceNode* owner, uint32_t localPort);
    /** Queue \p p in class \p p->priority and start transmitting if idle. */
    void Enqueue(Ptr<RocePacket> p);
    /** Send a PFC frame for class \p cls with \p quanta (0 = resume) ahead of all data. */
    void SendPfc(uint8_t cls, uint16_t quanta);
    /** Start a transmission if the port is idle and something is eligible. */
    void TryTransmit();
    /** A frame arrives from the channel. */
    void Receive(Ptr<RocePacket> p);
    /** Count a drop of \p p for \p reason at this port. */
    void RecordDrop(const RocePacket& p, uint32_t reason);
    /** Count an ECN mark at this port. */
    void RecordEcnMark();
    /** Take the link direction up or down; down drops queued and new frames. */
    void SetLinkUp(bool up);

    /** Set the line rate. */
    void SetDataRate(DataRate rate);
    /** \return the line rate. */
    DataRate GetDataRate() const;
    /** \return the line rate in bit/s. */
    double GetRateBps() const;
    /** \return data payload bytes per segment on this port. */
    uint32_t GetSegmentBytes() const;
    /** \return bytes queued in class \p cls. */
    uint64_t GetQueueBytes(uint8_t cls) const;
    /** \return bytes queued in all classes. */
    uint64_t GetTotalQueueBytes() const;
    /** \return true when class \p cls is paused by the peer. */
    bool IsClassPaused(uint8_t cls) const;
    /** \return propagation delay of the attached channel. */
    Time GetDelay() const;
    /** \return the peer port on the other end of the channel. */
    Ptr<RoceNetDevice> GetPeer() const;

    // counters (read by the network object)
    uint64_t GetTxBytes() const;              //!< \return bytes sent (all frames)
    uint64_t GetTxPackets() const;            //!< \return frames sent
    uint64_t GetTxDataBytes() const;          //!< \return payload bytes of DATA frames sent
    uint64_t GetPfcPauseSent() const;         //!< \return PAUSE frames sent
    uint64_t GetPfcResumeSent() const;        //!< \return RESUME frames sent
    uint64_t GetPfcPauseReceived() const;     //!< \return PAUSE frames received
    Time GetPausedTime() const;               //!< \return summed paused time over classes (so far)
    uint64_t GetEcnMarks() const;             //!< \return ECN marks made at this egress port
    uint64_t GetDrops(uint32_t reason) const; //!< \return drops for \p reason

    // NetDevice
    void SetIfIndex(const uint32_t index) override;
    uint32_t GetIfIndex() const override;
    Ptr<Channel> GetChannel() const override;
    void SetAddress(Address address) override;
    Address GetAddress() const override;
    bool SetMtu(const uint16_t mtu) override;
    uint16_t GetMtu() const override;
    bool IsLinkUp() const override;
    void AddLinkChangeCallback(Callback<void> callback) override;
    bool IsBroadcast() const override;
    Address GetBroadcast() const override;
    bool IsMulticast() const override;
    Address GetMulticast(Ipv4Address multicastGroup) const override;
    Address GetMulticast(Ipv6Address addr) const override;
    bool IsBridge() const override;
    bool IsPointToPoint() const override;
    bool Send(Ptr<Packet> packet, const Address& dest, uint16_t protocolNumber) override;
    bool SendFrom(Ptr<Packet> packet,
                  const Address& source,
                  const Address& dest,
                  uint16_t protocolNumber) override;
    Ptr<Node> GetNode() const override;
    void SetNode(Ptr<Node> node) override;
    bool NeedsArp() const override;
    void SetReceiveCallback(NetDevice::ReceiveCallback cb) override;
    void SetPromiscReceiveCallback(PromiscReceiveCallback cb) override;
    bool SupportsSendFrom() const override;

protected:
    void DoDispose() override;

private:
    class PortEvent;
    /** Schedule member \p fn of this port after \p delay (pooled event). \return its id. */
    EventId SchedulePortEvent(Time delay, void (RoceNetDevice::*fn)());
    int PickClass();
    void TransmitComplete();
    void Resume(uint8_t cls);
    void PauseExpired(uint8_t cls); //!< the PAUSE timer of \p cls ran out: Resume

    void Wake();
    void ScheduleWake(Time at);
    Time TxTime(uint32_t bytes);
    uint8_t PausedMask() const;
    void ParseWeights();

    Ptr<RoceChannel> m_channel;
    Ptr<Node> m_node;
    RoceNode* m_owner{nullptr};
    uint32_t m_localPort{0};
    uint32_t m_ifIndex{0};
    Mac48Address m_address;
    DataRate m_rate;
    double m_bps{0};
    double m_txFracNs{0};
    uint32_t m_segmentBytes{4096};
    Scheduler m_scheduler{STRICT};
    std::string m_weightsText;
    std::array<uint32_t, N_CLASSES> m_weights{};
    std::array<int64_t, N_CLASSES> m_deficit{};
    uint32_t m_wrrCur{0};
    bool m_weightsParsed{false};
    bool m_linkUp{true};
    Time m_busyUntil;  //!< end of the frame being serialized
    EventId m_txEvent; //!< pending TransmitComplete (only when something waits)

    std::array<std::deque<Ptr<RocePacket>>, N_CLASSES> m_queues;
    std::array<uint64_t, N_CLASSES> m_queueBytes{};
    uint64_t m_totalQueueBytes{0};
    std::deque<Ptr<RocePacket>> m_ctrl;

    std::array<bool, N_CLASSES> m_paused{};
    std::array<Time, N_CLASSES> m_pauseStart;
    std::array<EventId, N_CLASSES> m_resumeEvent;
    EventId m_wakeEvent;
    Time m_wakeAt;

    uint64_t m_txBytes{0};
    uint64_t m_txPackets{0};
    uint64_t m_txDataBytes{0};
    uint64_t m_pauseSent{0};
    uint64_t m_resumeSent{0};
    uint64_t m_pauseRecv{0};
    Time m_pausedTime;
    uint64_t m_ecnMarks{0};
    std::array<uint64_t, DROP_REASON_COUNT> m_drops{};

    TracedCallback<uint32_t, uint32_t> m_dropTrace;    //!< (flow id, reason)
    TracedCallback<uint8_t, uint16_t> m_pfcRxTrace;    //!< (class, quanta)
    TracedCallback<uint32_t, uint32_t> m_txBeginTrace; //!< (flow id, bytes)
};

} // namespace ns3

#endif
