#ifndef HETERO_NS3_ROCE_CHANNEL_H
#define HETERO_NS3_ROCE_CHANNEL_H

#include "ns3/channel.h"
#include "ns3/nstime.h"
#include "roce-packet.h"

namespace ns3
{

class RoceNetDevice;

/**
 * \brief Full-duplex point-to-point wire between two RoceNetDevice ports.
 *
 * A frame whose transmission starts at t with serialization time s arrives at the peer at
 * t + s + Delay (store and forward: the peer sees the whole frame).
 */
class RoceChannel : public Channel
{
public:
    /** \return the TypeId. */
    static TypeId GetTypeId();
    RoceChannel();

    /** Attach one of the two ends. */
    void Attach(Ptr<RoceNetDevice> dev);
    /** Carry \p p from \p src to the other end; \p txTime is its serialization time. */
    void Transmit(Ptr<RocePacket> p, const RoceNetDevice* src, Time txTime);
    /** \return the end that is not \p dev. */
    Ptr<RoceNetDevice> GetPeer(const RoceNetDevice* dev) const;
    /** \return the propagation delay. */
    Time GetDelay() const;

    std::size_t GetNDevices() const override;
    Ptr<NetDevice> GetDevice(std::size_t i) const override;

protected:
    void DoDispose() override;

private:
    Time m_delay;
    Ptr<RoceNetDevice> m_dev[2];
    uint32_t m_nodeId[2]{0, 0};
};

} // namespace ns3

#endif
