#include "roce-channel.h"

#include "ns3/abort.h"
#include "ns3/event-impl.h"
#include "ns3/log.h"
#include "ns3/node.h"
#include "ns3/simulator.h"
#include "roce-net-device.h"
#include "roce-pool.h"
#include "roce-profile.h"

namespace ns3
{

NS_LOG_COMPONENT_DEFINE("RoceChannel");

NS_OBJECT_ENSURE_REGISTERED(RoceChannel);

TypeId
RoceChannel::GetTypeId()
{
    static TypeId tid = TypeId("ns3::RoceChannel")
                            .SetParent<Channel>()
                            .SetGroupName("HeteroNs3")
                            .AddConstructor<RoceChannel>()
                            .AddAttribute("Delay",
                                          "One-way propagation delay",
                                          TimeValue(MicroSeconds(1)),
                                          MakeTimeAccessor(&RoceChannel::m_delay),
                                          MakeTimeChecker(Time(0)));
    return tid;
}

RoceChannel::RoceChannel() = default;

void
RoceChannel::Attach(Ptr<RoceNetDevice> dev)
{
    NS_LOG_FUNCTION(this << dev);
    int slot = m_dev[0] ? 1 : 0;
    NS_ABORT_MSG_IF(m_dev[1], "RoceChannel already has two ends");
    m_dev[slot] = dev;
    m_nodeId[slot] = dev->GetNode() ? dev->GetNode()->GetId() : 0;
}

namespace
{

/**
 * Arrival of a frame at the far end of a channel: the most frequent event of a run (one per
 * frame-hop). A pooled EventImpl instead of MakeEvent's, which allocates twice (the event and a
 * std::function holding the bound arguments).
 */
class RoceArrivalEvent : public EventImpl
{
public:
    RoceArrivalEvent(RoceNetDevice* dev, Ptr<RocePacket> p)
        : m_dev(dev)
        , m_packet(std::move(p))
    {
    }

    static void*
    operator new(std::size_t bytes)
    {
        return RoceFreeList<sizeof(RoceArrivalEvent)>::Allocate(bytes);
    }

    static void
    operator delete(void* ptr, std::size_t bytes)
    {
        RoceFreeList<sizeof(RoceArrivalEvent)>::Release(ptr, bytes);
    }

protected:
    void
    Notify() override
    {
        // RocePacketType DATA..PFC map onto EV_DATA_HOP..EV_PFC_HOP.
        RoceProfile::Count(static_cast<RoceEventKind>(EV_DATA_HOP + uint32_t(m_packet->type)));
        m_dev->Receive(std::move(m_packet));
    }

private:
    RoceNetDevice* m_dev;
    Ptr<RocePacket> m_packet;
};

} // namespace

void
RoceChannel::Transmit(Ptr<RocePacket> p, const RoceNetDevice* src, Time txTime)
{
    int dst = (PeekPointer(m_dev[0]) == src) ? 1 : 0;
    // The simulator takes over the event's one reference.
    Simulator::ScheduleWithContext(m_nodeId[dst],
                                   txTime + m_delay,
                                   new RoceArrivalEvent(PeekPointer(m_dev[dst]), std::move(p)));
}

Ptr<RoceNetDevice>
RoceChannel::GetPeer(const RoceNetDevice* dev) const
{
    return PeekPointer(m_dev[0]) == dev ? m_dev[1] : m_dev[0];
}

Time
RoceChannel::GetDelay() const
{
    return m_delay;
}

std::size_t
RoceChannel::GetNDevices() const
{
    return m_dev[1] ? 2 : (m_dev[0] ? 1 : 0);
}

Ptr<NetDevice>
RoceChannel::GetDevice(std::size_t i) const
{
    return m_dev[i];
}

void
RoceChannel::DoDispose()
{
    m_dev[0] = nullptr;
    m_dev[1] = nullptr;
    Channel::DoDispose();
}

} // namespace ns3
