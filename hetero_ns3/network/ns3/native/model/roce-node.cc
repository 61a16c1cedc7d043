#include "roce-node.h"

#include "ns3/boolean.h"
#include "ns3/log.h"
#include "ns3/uinteger.h"
#include "roce-net-device.h"

namespace ns3
{

NS_LOG_COMPONENT_DEFINE("RoceNode");

NS_OBJECT_ENSURE_REGISTERED(RoceNode);

TypeId
RoceNode::GetTypeId()
{
    static TypeId tid =
        TypeId("ns3::RoceNode")
            .SetParent<Object>()
            .SetGroupName("HeteroNs3")
            .AddAttribute("EcmpSeed",
                          "Seed mixed into the ECMP hash (with the node index)",
                          UintegerValue(0),
                          MakeUintegerAccessor(&RoceNode::m_ecmpSeed),
                          MakeUintegerChecker<uint32_t>())
            .AddAttribute(
                "PacketSpray",
                "Hash the sequence number too: per-packet spraying instead of per-flow ECMP",
                BooleanValue(false),
                MakeBooleanAccessor(&RoceNode::m_spray),
                MakeBooleanChecker());
    return tid;
}

RoceNode::RoceNode() = default;
RoceNode::~RoceNode() = default;

uint32_t
RoceNode::AddPort(Ptr<RoceNetDevice> dev)
{
    m_ports.push_back(dev);
    return m_ports.size() - 1;
}

Ptr<RoceNetDevice>
RoceNode::GetPort(uint32_t i) const
{
    return m_ports.at(i);
}

uint32_t
RoceNode::GetNPorts() const
{
    return m_ports.size();
}

void
RoceNode::AddRoute(uint32_t dst, uint32_t port)
{
    NS_LOG_FUNCTION(this << dst << port);
    NS_ABORT_MSG_IF(port >= m_ports.size(), "route to " << dst << " names unknown port " << port);
    if (dst >= m_routes.size())
    {
        m_routes.resize(dst + 1);
    }
    m_routes[dst].push_back(port);
    m_fibDirty = true;
}

const std::vector<uint32_t>&
RoceNode::GetRoutes(uint32_t dst) const
{
    static const std::vector<uint32_t> empty;
    return dst < m_routes.size() ? m_routes[dst] : empty;
}

void
RoceNode::SetNodeIndex(uint32_t id)
{
    m_nodeIndex = id;
}

uint32_t
RoceNode::GetNodeIndex() const
{
    return m_nodeIndex;
}

static inline uint64_t
Mix64(uint64_t x)
{
    // splitmix64 finalizer: cheap and well mixed
    x ^= x >> 30;
    x *= 0xbf58476d1ce4e5b9ULL;
    x ^= x >> 27;
    x *= 0x94d049bb133111ebULL;
    x ^= x >> 31;
    return x;
}

void
RoceNode::CompileFib() const
{
    m_fib.assign(m_routes.size(), FibEntry{0, 0});
    m_fibPorts.clear();
    for (uint32_t d = 0; d < m_routes.size(); ++d)
    {
        const std::vector<uint32_t>& hops = m_routes[d];
        if (hops.size() == 1)
        {
            m_fib[d] = FibEntry{hops[0], 1};
        }
        else if (hops.size() > 1)
        {
            m_fib[d] = FibEntry{static_cast<uint32_t>(m_fibPorts.size()),
                                static_cast<uint32_t>(hops.size())};
            m_fibPorts.insert(m_fibPorts.end(), hops.begin(), hops.end());
        }
    }
    m_fibDirty = false;
}

uint32_t
RoceNode::SelectPort(const RocePacket& p) const
{
    if (m_fibDirty)
    {
        CompileFib();
    }
    if (p.dst >= m_fib.size())
    {
        return UINT32_MAX;
    }
    FibEntry e = m_fib[p.dst];
    if (e.count <= 1)
    {
        return e.count == 1 ? e.first : UINT32_MAX;
    }
    uint64_t h = Mix64((uint64_t(m_ecmpSeed) << 32) ^ m_nodeIndex);
    h = Mix64(h ^ ((uint64_t(p.src) << 32) | p.dst));
    h = Mix64(h ^ ((uint64_t(p.sport) << 16) | p.dport) ^ (uint64_t(17) << 40));
    if (m_spray)
    {
        h = Mix64(h ^ p.seq);
    }
    return m_fibPorts[e.first + h % e.count];
}

Ptr<RocePacket>
RoceNode::PullData(uint32_t, uint8_t, Time*)
{
    return nullptr;
}

Time
RoceNode::NextPullTime(uint32_t, uint8_t) const
{
    return Time(0);
}

void
RoceNode::NotifyDequeue(uint32_t, RocePacket&)
{
}

void
RoceNode::DoDispose()
{
    m_ports.clear();
    m_routes.clear();
    Object::DoDispose();
}

} // namespace ns3
