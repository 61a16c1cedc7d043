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
}
RdmaNetwork::~RdmaNetwork() = default;

void
RdmaNetwork::DoDispose()
{
    for (auto& f : m_flows)
    {
        f.qp = nullptr;
    }
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
    m_flows.clear();
    m_logic.clear();
    m_nics.clear();
    m_switches.clear();
    m_ports.clear();
    m_channels.clear();
    m_nodes.clear();
    m_callbacks.clear();
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
    for (auto& nic : m_nics)
    {
        if (nic)
        {
            nic->SetReceiveCompleteCallback(MakeCallback(&RdmaNetwork::OnReceiveComplete, this));
            nic->SetSendCompleteCallback(MakeCallback(&RdmaNetwork::OnSendComplete, this));
        }
    }
    m_built = true;
}

Time
RdmaNetwork::ComputeBaseRtt(uint32_t src,
                            uint32_t dst,
                            uint16_t sport,
                            uint64_t bytes,
                            uint32_t* firstPort,
                            double* ideal) const
{
    RocePacket probe;
    probe.src = src;
    probe.dst = dst;
    probe.sport = sport;
    Ptr<RdmaNic> nic = m_nics[src];
    double seconds = 0;
    uint32_t node = src;
    uint32_t seg = m_logic[src]->GetPort(m_logic[src]->SelectPort(probe))->GetSegmentBytes();
    uint64_t nFrames = bytes == 0 ? 0 : (bytes + seg - 1) / seg;
    double wire =
        static_cast<double>(bytes) + nFrames * static_cast<double>(nic->DataFrameBytes(0));
    double frame = nic->DataFrameBytes(static_cast<uint32_t>(std::min<uint64_t>(seg, bytes)));
    double minRate = 1e300;
    double frameSum = 0;
    double delays = 0;
    *firstPort = UINT32_MAX;
    for (uint32_t hop = 0; node != dst && hop < 64; ++hop)
    {
        uint32_t local = m_logic[node]->SelectPort(probe);
        NS_ABORT_MSG_IF(local == UINT32_MAX,
                        "RdmaNetwork: no route from node " << node << " toward host " << dst
                                                           << " (flow " << src << " -> " << dst
                                                           << ")");
        Ptr<RoceNetDevice> dev = m_logic[node]->GetPort(local);
        if (hop == 1)
        {
            auto it = std::find(m_ports.begin(), m_ports.end(), dev);
            *firstPort = static_cast<uint32_t>(it - m_ports.begin());
        }
        double bps = dev->GetRateBps();
        minRate = std::min(minRate, bps);
        frameSum += frame * 8.0 / bps;
        delays += dev->GetDelay().GetSeconds();
        seconds += 2 * dev->GetDelay().GetSeconds() + nic->DataFrameBytes(seg) * 8.0 / bps +
                   nic->AckFrameBytes() * 8.0 / bps;
        Ptr<RoceNetDevice> peer = dev->GetPeer();
        Ptr<Node> next = peer->GetNode();
        node = UINT32_MAX;
        for (uint32_t i = 0; i < m_nodes.size(); ++i)
        {
            if (m_nodes[i] == next)
            {
                node = i;
                break;
            }
        }
        NS_ABORT_MSG_IF(node == UINT32_MAX, "RdmaNetwork: dangling port");
        if (node != dst && m_nics[node])
        {
            NS_ABORT_MSG("RdmaNetwork: route from " << src << " to " << dst << " transits host "
                                                    << node);
        }
    }
    NS_ABORT_MSG_IF(node != dst, "RdmaNetwork: routing loop from " << src << " to " << dst);
    *ideal = wire * 8.0 / minRate + frameSum - frame * 8.0 / minRate + delays;
    return Seconds(seconds);
}

uint16_t
RdmaNetwork::SourcePortOf(uint32_t key)
{
    // Multiplicative hash of the key into the dynamic port range (mirrored by the analytic
    // backend).
    return static_cast<uint16_t>(49152 + (key * 2654435761u >> 18) % 16384);
}

uint32_t
RdmaNetwork::CreateFlow(uint32_t src, uint32_t dst, uint64_t bytes, uint8_t priority)
{
    return CreateFlow(src, dst, bytes, priority, static_cast<uint32_t>(m_flows.size()));
}

uint32_t
RdmaNetwork::CreateFlow(
    uint32_t src, uint32_t dst, uint64_t bytes, uint8_t priority, uint32_t ecmpKey)
{
    NS_ABORT_MSG_IF(!m_built, "RdmaNetwork::CreateFlow before Build");
    NS_ABORT_MSG_IF(src >= m_nodes.size() || !m_nics[src],
                    "RdmaNetwork::CreateFlow: source " << src << " is not a host");
    NS_ABORT_MSG_IF(dst >= m_nodes.size() || !m_nics[dst],
                    "RdmaNetwork::CreateFlow: destination " << dst << " is not a host");
    NS_ABORT_MSG_IF(src == dst, "RdmaNetwork::CreateFlow: source and destination are both " << src);
    NS_ABORT_MSG_IF(priority > 7, "RdmaNetwork::CreateFlow: priority " << int(priority) << " > 7");
    FlowRecord f;
    f.src = src;
    f.dst = dst;
    f.bytes = bytes;
    f.priority = priority;
    f.ecmpKey = ecmpKey;
    m_flows.push_back(f);
    return m_flows.size() - 1;
}

void
RdmaNetwork::StartScheduledFlow(uint32_t id)
{
    RoceProfile::Count(EV_FLOW_START);
    StartFlow(id);
}

void
RdmaNetwork::StartFlow(uint32_t id)
{
    NS_ABORT_MSG_IF(id >= m_flows.size(), "RdmaNetwork::StartFlow: unknown flow " << id);
    FlowRecord& f = m_flows[id];
    NS_ABORT_MSG_IF(f.started, "RdmaNetwork::StartFlow: flow " << id << " already started");
    f.started = true;
    NS_LOG_INFO("flow " << id << " starts: " << f.src << " -> " << f.dst << ", " << f.bytes
                        << " B");
    f.start = Simulator::Now().GetSeconds();
    Ptr<RdmaQueuePair> qp = Create<RdmaQueuePair>();
    qp->flowId = id;
    qp->src = f.src;
    qp->dst = f.dst;
    qp->sport = SourcePortOf(f.ecmpKey);
    qp->priority = f.priority;
    qp->size = f.bytes;
    uint32_t firstPort;
    qp->baseRtt = ComputeBaseRtt(f.src, f.dst, qp->sport, f.bytes, &firstPort, &f.ideal);
    f.qp = qp;
    if (f.bytes == 0)
    {
        f.finish = f.start;
        f.ackDone = f.start;
        ++m_completed;
        m_flowComplete(id);
        for (auto& cb : m_callbacks)
        {
            cb(id);
        }
        return;
    }
    m_nics[f.src]->StartQueuePair(qp);
}

void
RdmaNetwork::ScheduleFlow(uint32_t id, Time at)
{
    Time delay = at - Simulator::Now();
    NS_ABORT_MSG_IF(delay.IsStrictlyNegative(),
                    "RdmaNetwork::ScheduleFlow: start time " << at << " is in the past");
    Simulator::Schedule(delay, &RdmaNetwork::StartScheduledFlow, this, id);
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
    m_callbacks.push_back(cb);
}

void
RdmaNetwork::OnReceiveComplete(uint32_t flow)
{
    FlowRecord& f = m_flows.at(flow);
    if (f.finish >= 0)
    {
        return;
    }
    f.finish = Simulator::Now().GetSeconds();
    ++m_completed;
    NS_LOG_INFO("flow " << flow << " received in full at " << f.finish << " s");
    m_flowComplete(flow);
    for (auto& cb : m_callbacks)
    {
        cb(flow);
    }
}

void
RdmaNetwork::OnSendComplete(uint32_t flow)
{
    m_flows.at(flow).ackDone = Simulator::Now().GetSeconds();
}

void
RdmaNetwork::SampleQueues(const uint32_t* ports, uint32_t n, Time interval, Time until)
{
    NS_ABORT_MSG_IF(!interval.IsStrictlyPositive(),
                    "RdmaNetwork::SampleQueues: interval must be > 0");
    m_samplePorts.assign(ports, ports + n);
    for (uint32_t p : m_samplePorts)
    {
        NS_ABORT_MSG_IF(p >= m_ports.size(), "RdmaNetwork::SampleQueues: unknown port " << p);
    }
    m_sampleInterval = interval;
    m_sampleUntil = until;
    Simulator::Schedule(interval, &RdmaNetwork::Sample, this);
}

void
RdmaNetwork::Sample()
{
    RoceProfile::Count(EV_SAMPLE);
    double t = Simulator::Now().GetSeconds();
    for (uint32_t p : m_samplePorts)
    {
        m_sampleT.push_back(t);
        m_sampleP.push_back(p);
        m_sampleB.push_back(m_ports[p]->GetTotalQueueBytes());
        m_sampleTx.push_back(m_ports[p]->GetTxBytes());
    }
    bool more = m_sampleUntil.IsStrictlyPositive()
                    ? Simulator::Now() + m_sampleInterval <= m_sampleUntil
                    : m_completed < m_flows.size();
    if (more)
    {
        Simulator::Schedule(m_sampleInterval, &RdmaNetwork::Sample, this);
    }
}

void
RdmaNetwork::SetLinkRate(uint32_t link, double rateBps, Time at)
{
    NS_ABORT_MSG_IF(link >= m_channels.size(), "RdmaNetwork::SetLinkRate: unknown link " << link);
    NS_ABORT_MSG_IF(!(rateBps > 0), "RdmaNetwork::SetLinkRate: rate must be > 0");
    DataRate r(static_cast<uint64_t>(rateBps));
    Simulator::Schedule(at - Simulator::Now(), [this, link, r]() {
        NS_LOG_INFO("link " << link << " rate -> " << r);
        m_ports[2 * link]->SetDataRate(r);
        m_ports[2 * link + 1]->SetDataRate(r);
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
    return m_flows.size();
}

uint32_t
RdmaNetwork::GetNFlowsCompleted() const
{
    return m_completed;
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
    return m_flows.at(flow).qp;
}

std::vector<double>
RdmaNetwork::GetFlowStartTimes() const
{
    std::vector<double> v;
    for (const auto& f : m_flows)
    {
        v.push_back(f.start);
    }
    return v;
}

std::vector<double>
RdmaNetwork::GetFlowFinishTimes() const
{
    std::vector<double> v;
    for (const auto& f : m_flows)
    {
        v.push_back(f.finish);
    }
    return v;
}

std::vector<double>
RdmaNetwork::GetFlowAckTimes() const
{
    std::vector<double> v;
    for (const auto& f : m_flows)
    {
        v.push_back(f.ackDone);
    }
    return v;
}

std::vector<double>
RdmaNetwork::GetFlowBaseRtts() const
{
    std::vector<double> v;
    for (const auto& f : m_flows)
    {
        v.push_back(f.qp ? f.qp->baseRtt.GetSeconds() : -1.0);
    }
    return v;
}

std::vector<double>
RdmaNetwork::GetFlowIdealFcts() const
{
    std::vector<double> v;
    for (const auto& f : m_flows)
    {
        v.push_back(f.ideal);
    }
    return v;
}

std::vector<uint32_t>
RdmaNetwork::GetFlowRetransmits() const
{
    std::vector<uint32_t> v;
    for (const auto& f : m_flows)
    {
        v.push_back(f.qp ? f.qp->retransmits : 0);
    }
    return v;
}

std::vector<uint32_t>
RdmaNetwork::GetFlowCnps() const
{
    std::vector<uint32_t> v;
    for (uint32_t i = 0; i < m_flows.size(); ++i)
    {
        v.push_back(m_nics[m_flows[i].dst]->GetCnpsSent(i));
    }
    return v;
}

std::vector<uint32_t>
RdmaNetwork::GetFlowAcks() const
{
    std::vector<uint32_t> v;
    for (uint32_t i = 0; i < m_flows.size(); ++i)
    {
        v.push_back(m_nics[m_flows[i].dst]->GetAcksSent(i));
    }
    return v;
}

std::vector<uint32_t>
RdmaNetwork::GetFlowFirstHops() const
{
    std::vector<uint32_t> v;
    for (const auto& f : m_flows)
    {
        uint32_t port = UINT32_MAX;
        if (f.qp)
        {
            double ideal;
            ComputeBaseRtt(f.src, f.dst, f.qp->sport, f.bytes, &port, &ideal);
        }
        v.push_back(port);
    }
    return v;
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
    return m_sampleT;
}

std::vector<uint32_t>
RdmaNetwork::GetQueueSamplePorts() const
{
    return m_sampleP;
}

std::vector<uint64_t>
RdmaNetwork::GetQueueSampleBytes() const
{
    return m_sampleB;
}

std::vector<uint64_t>
RdmaNetwork::GetQueueSampleTxBytes() const
{
    return m_sampleTx;
}

} // namespace ns3
