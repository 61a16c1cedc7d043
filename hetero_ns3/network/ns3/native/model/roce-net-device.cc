// RoceNetDevice, device plumbing: attributes, attachment, link state, counters, drop accounting and
// the NetDevice interface. Egress (class queues, strict priority / DWRR, transmission, pacing
// wake-ups) and PFC (PAUSE/RESUME in and out) are in roce-net-device-egress.cc.
#include "roce-net-device.h"

#include "ns3/enum.h"
#include "ns3/log.h"
#include "ns3/node.h"
#include "ns3/simulator.h"
#include "ns3/string.h"
#include "ns3/uinteger.h"
#include "roce-channel.h"
#include "roce-node.h"

namespace ns3
{

NS_LOG_COMPONENT_DEFINE("RoceNetDevice");

NS_OBJECT_ENSURE_REGISTERED(RoceNetDevice);

const char*
RoceDropReasonName(uint32_t reason)
{
    switch (reason)
    {
        case DROP_NO_ROUTE:
            return "no_route";
        case DROP_LOSSY_BUFFER:
            return "lossy_buffer_full";
        case DROP_HEADROOM_OVERFLOW:
            return "headroom_overflow";
        case DROP_LINK_DOWN:
            return "link_down";
        default:
            return "unknown";
    }
}

TypeId
RoceNetDevice::GetTypeId()
{
    static TypeId tid =
        TypeId("ns3::RoceNetDevice")
            .SetParent<NetDevice>()
            .SetGroupName("HeteroNs3")
            .AddConstructor<RoceNetDevice>()
            .AddAttribute(
                "DataRate",
                "Line rate of this port",
                DataRateValue(DataRate("100Gbps")),
                MakeDataRateAccessor(&RoceNetDevice::SetDataRate, &RoceNetDevice::GetDataRate),
                MakeDataRateChecker())
            .AddAttribute("SegmentBytes",
                          "Data payload bytes per frame when a host sends through this port (MTU)",
                          UintegerValue(4096),
                          MakeUintegerAccessor(&RoceNetDevice::m_segmentBytes),
                          MakeUintegerChecker<uint32_t>(1))
            .AddAttribute(
                "Scheduler",
                "Scheduling between traffic classes: strict priority or weighted round robin",
                EnumValue(RoceNetDevice::STRICT),
                MakeEnumAccessor<Scheduler>(&RoceNetDevice::m_scheduler),
                MakeEnumChecker(RoceNetDevice::STRICT, "Strict", RoceNetDevice::WRR, "Wrr"))
            .AddAttribute("WrrWeights",
                          "Eight space-separated integer weights of classes 0..7 for Wrr",
                          StringValue("1 1 1 1 1 1 1 1"),
                          MakeStringAccessor(&RoceNetDevice::m_weightsText),
                          MakeStringChecker())
            .AddTraceSource("Drop",
                            "A frame was dropped at this port: (flow id, RoceDropReason)",
                            MakeTraceSourceAccessor(&RoceNetDevice::m_dropTrace),
                            "ns3::TracedCallback::Uint32Uint32")
            .AddTraceSource("PfcRx",
                            "A PFC frame arrived: (class, quanta; 0 = resume)",
                            MakeTraceSourceAccessor(&RoceNetDevice::m_pfcRxTrace),
                            "ns3::TracedCallback::Uint8Uint16")
            .AddTraceSource("TxBegin",
                            "A frame starts transmission: (flow id, bytes)",
                            MakeTraceSourceAccessor(&RoceNetDevice::m_txBeginTrace),
                            "ns3::TracedCallback::Uint32Uint32");
    return tid;
}

RoceNetDevice::RoceNetDevice()
{
    m_address = Mac48Address::Allocate();
}

RoceNetDevice::~RoceNetDevice() = default;

void
RoceNetDevice::DoDispose()
{
    for (auto& ev : m_resumeEvent)
    {
        ev.Cancel();
    }
    m_wakeEvent.Cancel();
    m_txEvent.Cancel();
    for (auto& q : m_queues)
    {
        q.clear();
    }
    m_ctrl.clear();
    m_channel = nullptr;
    m_node = nullptr;
    m_owner = nullptr;
    NetDevice::DoDispose();
}

void
RoceNetDevice::Attach(Ptr<RoceChannel> ch)
{
    m_channel = ch;
    ch->Attach(this);
}

void
RoceNetDevice::SetOwner(RoceNode* owner, uint32_t localPort)
{
    m_owner = owner;
    m_localPort = localPort;
}

void
RoceNetDevice::SetDataRate(DataRate rate)
{
    m_rate = rate;
    m_bps = static_cast<double>(rate.GetBitRate());
}

DataRate
RoceNetDevice::GetDataRate() const
{
    return m_rate;
}

double
RoceNetDevice::GetRateBps() const
{
    return m_bps;
}

uint32_t
RoceNetDevice::GetSegmentBytes() const
{
    return m_segmentBytes;
}

uint64_t
RoceNetDevice::GetQueueBytes(uint8_t cls) const
{
    return m_queueBytes[cls];
}

uint64_t
RoceNetDevice::GetTotalQueueBytes() const
{
    return m_totalQueueBytes;
}

bool
RoceNetDevice::IsClassPaused(uint8_t cls) const
{
    return m_paused[cls];
}

Time
RoceNetDevice::GetDelay() const
{
    return m_channel ? m_channel->GetDelay() : Time(0);
}

Ptr<RoceNetDevice>
RoceNetDevice::GetPeer() const
{
    return m_channel ? m_channel->GetPeer(this) : nullptr;
}

void
RoceNetDevice::RecordDrop(const RocePacket& p, uint32_t reason)
{
    ++m_drops[reason];
    NS_LOG_LOGIC("port " << m_localPort << ": drop of a frame of flow " << p.flowId << " ("
                         << RoceDropReasonName(reason) << ")");
    m_dropTrace(p.flowId, reason);
}

void
RoceNetDevice::RecordEcnMark()
{
    ++m_ecnMarks;
}

void
RoceNetDevice::SetLinkUp(bool up)
{
    if (m_linkUp == up)
    {
        return;
    }
    m_linkUp = up;
    NS_LOG_INFO("port " << m_localPort << (up ? ": link up" : ": link down"));
    if (!up)
    {
        for (uint32_t c = 0; c < N_CLASSES; ++c)
        {
            for (auto& p : m_queues[c])
            {
                RecordDrop(*p, DROP_LINK_DOWN);
                m_owner->NotifyDequeue(m_localPort, *p);
            }
            m_queues[c].clear();
            m_queueBytes[c] = 0;
        }
        m_totalQueueBytes = 0;
        m_ctrl.clear();
    }
    else
    {
        TryTransmit();
    }
}

uint64_t
RoceNetDevice::GetTxBytes() const
{
    return m_txBytes;
}

uint64_t
RoceNetDevice::GetTxPackets() const
{
    return m_txPackets;
}

uint64_t
RoceNetDevice::GetTxDataBytes() const
{
    return m_txDataBytes;
}

uint64_t
RoceNetDevice::GetPfcPauseSent() const
{
    return m_pauseSent;
}

uint64_t
RoceNetDevice::GetPfcResumeSent() const
{
    return m_resumeSent;
}

uint64_t
RoceNetDevice::GetPfcPauseReceived() const
{
    return m_pauseRecv;
}

Time
RoceNetDevice::GetPausedTime() const
{
    Time t = m_pausedTime;
    for (uint32_t c = 0; c < N_CLASSES; ++c)
    {
        if (m_paused[c])
        {
            t += Simulator::Now() - m_pauseStart[c];
        }
    }
    return t;
}

uint64_t
RoceNetDevice::GetEcnMarks() const
{
    return m_ecnMarks;
}

uint64_t
RoceNetDevice::GetDrops(uint32_t reason) const
{
    return reason < DROP_REASON_COUNT ? m_drops[reason] : 0;
}

// ---- NetDevice boilerplate: the ns3::Packet path is not used by this module ----

void
RoceNetDevice::SetIfIndex(const uint32_t index)
{
    m_ifIndex = index;
}

uint32_t
RoceNetDevice::GetIfIndex() const
{
    return m_ifIndex;
}

Ptr<Channel>
RoceNetDevice::GetChannel() const
{
    return m_channel;
}

void
RoceNetDevice::SetAddress(Address address)
{
    m_address = Mac48Address::ConvertFrom(address);
}

Address
RoceNetDevice::GetAddress() const
{
    return m_address;
}

bool
RoceNetDevice::SetMtu(const uint16_t mtu)
{
    m_segmentBytes = mtu;
    return true;
}

uint16_t
RoceNetDevice::GetMtu() const
{
    return static_cast<uint16_t>(std::min<uint32_t>(m_segmentBytes, 65535));
}

bool
RoceNetDevice::IsLinkUp() const
{
    return m_linkUp;
}

void
RoceNetDevice::AddLinkChangeCallback(Callback<void>)
{
}

bool
RoceNetDevice::IsBroadcast() const
{
    return false;
}

Address
RoceNetDevice::GetBroadcast() const
{
    return Mac48Address::GetBroadcast();
}

bool
RoceNetDevice::IsMulticast() const
{
    return false;
}

Address
RoceNetDevice::GetMulticast(Ipv4Address) const
{
    return Mac48Address::GetBroadcast();
}

Address
RoceNetDevice::GetMulticast(Ipv6Address) const
{
    return Mac48Address::GetBroadcast();
}

bool
RoceNetDevice::IsBridge() const
{
    return false;
}

bool
RoceNetDevice::IsPointToPoint() const
{
    return true;
}

bool
RoceNetDevice::Send(Ptr<Packet>, const Address&, uint16_t)
{
    return false;
}

bool
RoceNetDevice::SendFrom(Ptr<Packet>, const Address&, const Address&, uint16_t)
{
    return false;
}

Ptr<Node>
RoceNetDevice::GetNode() const
{
    return m_node;
}

void
RoceNetDevice::SetNode(Ptr<Node> node)
{
    m_node = node;
}

bool
RoceNetDevice::NeedsArp() const
{
    return false;
}

void
RoceNetDevice::SetReceiveCallback(NetDevice::ReceiveCallback)
{
}

void
RoceNetDevice::SetPromiscReceiveCallback(PromiscReceiveCallback)
{
}

bool
RoceNetDevice::SupportsSendFrom() const
{
    return false;
}

} // namespace ns3
