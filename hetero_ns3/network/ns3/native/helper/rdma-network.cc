#include "rdma-network.h"

#include "ns3/abort.h"
#include "ns3/boolean.h"
#include "ns3/log.h"
#include "ns3/simulator.h"
#include "ns3/uinteger.h"
#include "port-counters.h"
#include "roce-profile.h"

#include <algorithm>

namespace ns3
{

NS_LOG_COMPONENT_DEFINE("RdmaNetwork");

NS_OBJECT_ENSURE_REGISTERED(RdmaNetwork);

TypeId
RdmaNetwork::GetTypeId()
{
    static TypeId tid =
        TypeId("ns3::RdmaNetwork")
            .SetParent<Object>()
            .SetGroupName("HeteroNs3")
            .AddConstructor<RdmaNetwork>()
            .AddTraceSource("FlowComplete",
                            "The last byte of a flow reached its destination: (flow id)",
                            MakeTraceSourceAccessor(&RdmaNetwork::m_flowComplete),
                            "ns3::TracedCallback::Uint32");
    return tid;
}

RdmaNetwork::RdmaNetwork()
{
    RoceProfile::Reset(); // one network per simulation: its events are counted from here
    m_flowTable = CreateObject<RdmaFlowTable>();
    m_flowTable->Bind(&m_nodes, &m_logic, &m_nics, &m_ports);
    m_flowTable->SetCompleteHook(MakeCallback(&RdmaNetwork::NotifyFlowComplete, this));
    m_sampler = CreateObject<QueueSampler>();
    m_sampler->Bind(&m_ports, PeekPointer(m_flowTable));
}

void
RdmaNetwork::NotifyFlowComplete(uint32_t flow)
{
    m_flowComplete(flow);
}
RdmaNetwork::~RdmaNetwork() = default;

void
RdmaNetwork::DoDispose()
{
    m_flowTable->Clear();
    for (auto& n : m_nics)
    {
        if (n)
        {
            n->Dispose();
        }
    }
    for (auto& s : m_switches)
    {
        if (s)
        {
            s->Dispose();
        }
    }
    m_logic.clear();
    m_nics.clear();
    m_switches.clear();
    m_ports.clear();
    m_channels.clear();
    m_nodes.clear();
    m_sampler->Dispose();
    m_flowTable->Dispose();
    Object::DoDispose();
}

uint32_t
RdmaNetwork::AddNode(bool isHost, uint64_t bufferBytes)
{
    NS_ABORT_MSG_IF(m_built, "RdmaNetwork::AddNode after Build");
    uint32_t id = m_nodes.size();
    m_nodes.push_back(CreateObject<Node>());
    if (isHost)
    {
        Ptr<RdmaNic> nic = CreateObject<RdmaNic>();
        nic->SetNodeIndex(id);
        m_nics.push_back(nic);
        m_switches.push_back(nullptr);
        m_logic.push_back(nic);
    }
    else
    {
        Ptr<RoceSwitch> sw = CreateObject<RoceSwitch>();
        sw->SetNodeIndex(id);
        m_nics.push_back(nullptr);
        m_switches.push_back(sw);
        m_logic.push_back(sw);
    }
    m_buffers.push_back(bufferBytes);
    return id;
}

void
RdmaNetwork::AddNodes(const uint8_t* isHost, const uint64_t* bufferBytes, uint32_t n)
{
    for (uint32_t i = 0; i < n; ++i)
    {
        AddNode(isHost[i] != 0, bufferBytes[i]);
    }
}

uint32_t
RdmaNetwork::AddLink(uint32_t a,
                     uint32_t b,
                     double rateBps,
                     double delaySeconds,
                     uint32_t segmentA,
                     uint32_t segmentB)
{
    NS_ABORT_MSG_IF(m_built, "RdmaNetwork::AddLink after Build");
    NS_ABORT_MSG_IF(a >= m_nodes.size() || b >= m_nodes.size() || a == b,
                    "RdmaNetwork::AddLink: bad ends " << a << ", " << b);
    NS_ABORT_MSG_IF(!(rateBps > 0) || delaySeconds < 0,
                    "RdmaNetwork::AddLink: rate must be > 0 and delay >= 0");
    uint32_t link = m_channels.size();
    Ptr<RoceChannel> ch = CreateObject<RoceChannel>();
    ch->SetAttribute("Delay", TimeValue(Seconds(delaySeconds)));
    uint32_t ends[2] = {a, b};
    uint32_t segs[2] = {segmentA, segmentB};
    for (int side = 0; side < 2; ++side)
    {
        uint32_t node = ends[side];
        Ptr<RoceNetDevice> dev = CreateObject<RoceNetDevice>();
        dev->SetDataRate(DataRate(static_cast<uint64_t>(rateBps)));
        if (segs[side] > 0)
        {
            dev->SetAttribute("SegmentBytes", UintegerValue(segs[side]));
        }
        m_nodes[node]->AddDevice(dev);
        uint32_t local = m_logic[node]->AddPort(dev);
        dev->SetOwner(PeekPointer(m_logic[node]), local);
        dev->Attach(ch);
        m_ports.push_back(dev);
        m_portLocal.push_back(local);
        m_portCap.push_back(0);
    }
    m_channels.push_back(ch);
    return link;
}

void
RdmaNetwork::AddLinks(const uint32_t* a,
                      const uint32_t* b,
                      const double* rateBps,
                      const double* delaySeconds,
                      const uint32_t* segment,
                      uint32_t n)
{
    for (uint32_t i = 0; i < n; ++i)
    {
        AddLink(a[i], b[i], rateBps[i], delaySeconds[i], segment[i], segment[i]);
    }
}

void
RdmaNetwork::CapPortRates(const uint32_t* port, const double* rateBps, uint32_t n)
{
    NS_ABORT_MSG_IF(m_built, "RdmaNetwork::CapPortRates after Build");
    for (uint32_t i = 0; i < n; ++i)
    {
        NS_ABORT_MSG_IF(port[i] >= m_ports.size(),
                        "RdmaNetwork::CapPortRates: unknown port " << port[i]);
        NS_ABORT_MSG_IF(!(rateBps[i] > 0), "RdmaNetwork::CapPortRates: rate must be > 0");
        m_portCap[port[i]] = rateBps[i];
        double r = std::min(m_ports[port[i]]->GetRateBps(), rateBps[i]);
        m_ports[port[i]]->SetDataRate(DataRate(static_cast<uint64_t>(r)));
    }
}

void
RdmaNetwork::AddRoute(uint32_t node, uint32_t dst, uint32_t link)
{
    NS_ABORT_MSG_IF(link >= m_channels.size() || node >= m_nodes.size(),
                    "RdmaNetwork::AddRoute: bad node " << node << " or link " << link);
    uint32_t pa = 2 * link;
    uint32_t port;
    if (m_ports[pa]->GetNode() == m_nodes[node])
    {
        port = pa;
    }
    else
    {
        NS_ABORT_MSG_IF(m_ports[pa + 1]->GetNode() != m_nodes[node],
                        "RdmaNetwork::AddRoute: link " << link << " does not touch node " << node);
        port = pa + 1;
    }
    m_logic[node]->AddRoute(dst, m_portLocal[port]);
}

void
RdmaNetwork::AddRoutes(const uint32_t* node, const uint32_t* dst, const uint32_t* link, uint64_t n)
{
    for (uint64_t i = 0; i < n; ++i)
    {
        AddRoute(node[i], dst[i], link[i]);
    }
}

void
RdmaNetwork::Build()
{
    NS_ABORT_MSG_IF(m_built, "RdmaNetwork::Build called twice");
    NS_LOG_FUNCTION(this);
    bool needsInt = false;
    for (auto& nic : m_nics)
    {
        if (nic)
        {
            nic->Prepare();
            needsInt = needsInt || nic->NeedsInt();
        }
    }
    for (uint32_t i = 0; i < m_switches.size(); ++i)
    {
        if (m_switches[i])
        {
            if (needsInt)
            {
                m_switches[i]->SetAttribute("IntEnabled", BooleanValue(true));
            }
            m_switches[i]->Setup(m_buffers[i]);
        }
    }
    m_flowTable->ConnectNics();
    m_built = true;
}

uint16_t
RdmaNetwork::SourcePortOf(uint32_t key)
{
    return RdmaFlowTable::SourcePortOf(key);
}

uint32_t
RdmaNetwork::CreateFlow(uint32_t src, uint32_t dst, uint64_t bytes, uint8_t priority)
{
    return CreateFlow(src, dst, bytes, priority, m_flowTable->GetNFlows());
}

void
RdmaNetwork::ReserveFlows(uint32_t n)
{
    m_flowTable->Reserve(n);
}

uint32_t
RdmaNetwork::CreateFlow(
    uint32_t src, uint32_t dst, uint64_t bytes, uint8_t priority, uint32_t ecmpKey)
{
    NS_ABORT_MSG_IF(!m_built, "RdmaNetwork::CreateFlow before Build");
    return m_flowTable->CreateFlow(src, dst, bytes, priority, ecmpKey);
}

void
RdmaNetwork::StartFlow(uint32_t id)
{
    m_flowTable->StartFlow(id);
}

void
RdmaNetwork::ScheduleFlow(uint32_t id, Time at)
{
    m_flowTable->ScheduleFlow(id, at);
}

void
RdmaNetwork::AddFlows(const uint32_t* src,
                      const uint32_t* dst,
                      const uint64_t* bytes,
                      const uint8_t* priority,
                      const double* startSeconds,
                      uint32_t n)
{
    for (uint32_t i = 0; i < n; ++i)
    {
        uint32_t id = CreateFlow(src[i], dst[i], bytes[i], priority[i]);
        ScheduleFlow(id, Seconds(startSeconds[i]));
    }
}

void
RdmaNetwork::AddFlowCompleteCallback(Callback<void, uint32_t> cb)
{
    m_flowTable->AddFlowCompleteCallback(cb);
}

void
RdmaNetwork::SampleQueues(const uint32_t* ports, uint32_t n, Time interval, Time until)
{
    m_sampler->Start(ports, n, interval, until);
}

void
RdmaNetwork::SetLinkRate(uint32_t link, double rateBps, Time at)
{
    NS_ABORT_MSG_IF(link >= m_channels.size(), "RdmaNetwork::SetLinkRate: unknown link " << link);
    NS_ABORT_MSG_IF(!(rateBps > 0), "RdmaNetwork::SetLinkRate: rate must be > 0");
    Simulator::Schedule(at - Simulator::Now(), [this, link, rateBps]() {
        NS_LOG_INFO("link " << link << " rate -> " << rateBps << " bit/s");
        for (uint32_t port = 2 * link; port < 2 * link + 2; ++port)
        {
            double r = m_portCap[port] > 0 ? std::min(rateBps, m_portCap[port]) : rateBps;
            m_ports[port]->SetDataRate(DataRate(static_cast<uint64_t>(r)));
        }
    });
}

void
RdmaNetwork::SetLinkUp(uint32_t link, bool up, Time at)
{
    NS_ABORT_MSG_IF(link >= m_channels.size(), "RdmaNetwork::SetLinkUp: unknown link " << link);
    Simulator::Schedule(at - Simulator::Now(), [this, link, up]() {
        NS_LOG_INFO("link " << link << (up ? " up" : " down"));
        m_ports[2 * link]->SetLinkUp(up);
        m_ports[2 * link + 1]->SetLinkUp(up);
    });
}

void
RdmaNetwork::Run(Time stop)
{
    if (stop.IsStrictlyPositive())
    {
        Simulator::Stop(stop - Simulator::Now());
    }
    Simulator::Run();
}

uint32_t
RdmaNetwork::GetNNodes() const
{
    return m_nodes.size();
}

uint32_t
RdmaNetwork::GetNLinks() const
{
    return m_channels.size();
}

uint32_t
RdmaNetwork::GetNPorts() const
{
    return m_ports.size();
}

uint32_t
RdmaNetwork::GetNFlows() const
{
    return m_flowTable->GetNFlows();
}

uint32_t
RdmaNetwork::GetNFlowsCompleted() const
{
    return m_flowTable->GetNFlowsCompleted();
}

Ptr<RoceNetDevice>
RdmaNetwork::GetPort(uint32_t port) const
{
    return m_ports.at(port);
}

Ptr<RoceSwitch>
RdmaNetwork::GetSwitch(uint32_t node) const
{
    return m_switches.at(node);
}

Ptr<RdmaNic>
RdmaNetwork::GetNic(uint32_t node) const
{
    return m_nics.at(node);
}

Ptr<RdmaQueuePair>
RdmaNetwork::GetQueuePair(uint32_t flow) const
{
    return m_flowTable->GetQueuePair(flow);
}

std::vector<double>
RdmaNetwork::GetFlowStartTimes() const
{
    return m_flowTable->GetFlowStartTimes();
}

std::vector<double>
RdmaNetwork::GetFlowFinishTimes() const
{
    return m_flowTable->GetFlowFinishTimes();
}

std::vector<double>
RdmaNetwork::GetFlowAckTimes() const
{
    return m_flowTable->GetFlowAckTimes();
}

std::vector<double>
RdmaNetwork::GetFlowBaseRtts() const
{
    return m_flowTable->GetFlowBaseRtts();
}

std::vector<double>
RdmaNetwork::GetFlowIdealFcts() const
{
    return m_flowTable->GetFlowIdealFcts();
}

std::vector<uint32_t>
RdmaNetwork::GetFlowRetransmits() const
{
    return m_flowTable->GetFlowRetransmits();
}

std::vector<uint32_t>
RdmaNetwork::GetFlowCnps() const
{
    return m_flowTable->GetFlowCnps();
}

std::vector<uint32_t>
RdmaNetwork::GetFlowAcks() const
{
    return m_flowTable->GetFlowAcks();
}

std::vector<uint32_t>
RdmaNetwork::GetFlowFirstHops() const
{
    return m_flowTable->GetFlowFirstHops();
}

std::vector<uint64_t>
RdmaNetwork::GetPortCounter(const std::string& name) const
{
    const PortCounter counter = PortCounterFromName(name); // named once, read per port by a switch
    std::vector<uint64_t> v;
    v.reserve(m_ports.size());
    for (const auto& d : m_ports)
    {
        v.push_back(ReadPortCounter(*d, counter));
    }
    return v;
}

std::vector<double>
RdmaNetwork::GetPortPausedSeconds() const
{
    std::vector<double> v;
    for (const auto& d : m_ports)
    {
        v.push_back(d->GetPausedTime().GetSeconds());
    }
    return v;
}

std::vector<double>
RdmaNetwork::GetQueueSampleTimes() const
{
    return m_sampler->GetTimes();
}

std::vector<uint32_t>
RdmaNetwork::GetQueueSamplePorts() const
{
    return m_sampler->GetPorts();
}

std::vector<uint64_t>
RdmaNetwork::GetQueueSampleBytes() const
{
    return m_sampler->GetBytes();
}

std::vector<uint64_t>
RdmaNetwork::GetQueueSampleTxBytes() const
{
    return m_sampler->GetTxBytes();
}

} // namespace ns3
