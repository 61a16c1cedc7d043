#include "rdma-flow-table.h"

#include "ns3/abort.h"
#include "ns3/log.h"
#include "ns3/simulator.h"
#include "roce-profile.h"

#include <algorithm>

namespace ns3
{

NS_LOG_COMPONENT_DEFINE("RdmaFlowTable");

NS_OBJECT_ENSURE_REGISTERED(RdmaFlowTable);

TypeId
RdmaFlowTable::GetTypeId()
{
    static TypeId tid = TypeId("ns3::RdmaFlowTable")
                            .SetParent<Object>()
                            .SetGroupName("HeteroNs3")
                            .AddConstructor<RdmaFlowTable>();
    return tid;
}

RdmaFlowTable::RdmaFlowTable() = default;
RdmaFlowTable::~RdmaFlowTable() = default;

void
RdmaFlowTable::DoDispose()
{
    Clear();
    m_completeHook = MakeNullCallback<void, uint32_t>();
    m_nodes = nullptr;
    m_logic = nullptr;
    m_nics = nullptr;
    m_ports = nullptr;
    Object::DoDispose();
}

void
RdmaFlowTable::Clear()
{
    for (auto& f : m_flows)
    {
        f.qp = nullptr;
    }
    m_flows.clear();
    m_callbacks.clear();
}

void
RdmaFlowTable::Bind(const std::vector<Ptr<Node>>* nodes,
                    const std::vector<Ptr<RoceNode>>* logic,
                    const std::vector<Ptr<RdmaNic>>* nics,
                    const std::vector<Ptr<RoceNetDevice>>* ports)
{
    m_nodes = nodes;
    m_logic = logic;
    m_nics = nics;
    m_ports = ports;
}

void
RdmaFlowTable::SetCompleteHook(Callback<void, uint32_t> hook)
{
    m_completeHook = hook;
}

void
RdmaFlowTable::ConnectNics()
{
    for (auto& nic : *m_nics)
    {
        if (nic)
        {
            nic->SetReceiveCompleteCallback(MakeCallback(&RdmaFlowTable::OnReceiveComplete, this));
            nic->SetSendCompleteCallback(MakeCallback(&RdmaFlowTable::OnSendComplete, this));
        }
    }
}

void
RdmaFlowTable::Complete(uint32_t flow)
{
    ++m_completed;
    if (!m_completeHook.IsNull())
    {
        m_completeHook(flow);
    }
    for (auto& cb : m_callbacks)
    {
        cb(flow);
    }
}

uint32_t
RdmaFlowTable::GetNFlows() const
{
    return m_flows.size();
}

uint32_t
RdmaFlowTable::GetNFlowsCompleted() const
{
    return m_completed;
}

Time
RdmaFlowTable::ComputeBaseRtt(uint32_t src,
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
    Ptr<RdmaNic> nic = (*m_nics)[src];
    double seconds = 0;
    uint32_t node = src;
    uint32_t seg = (*m_logic)[src]->GetPort((*m_logic)[src]->SelectPort(probe))->GetSegmentBytes();
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
        uint32_t local = (*m_logic)[node]->SelectPort(probe);
        NS_ABORT_MSG_IF(local == UINT32_MAX,
                        "RdmaNetwork: no route from node " << node << " toward host " << dst
                                                           << " (flow " << src << " -> " << dst
                                                           << ")");
        Ptr<RoceNetDevice> dev = (*m_logic)[node]->GetPort(local);
        if (hop == 1)
        {
            auto it = std::find(m_ports->begin(), m_ports->end(), dev);
            *firstPort = static_cast<uint32_t>(it - m_ports->begin());
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
        for (uint32_t i = 0; i < m_nodes->size(); ++i)
        {
            if ((*m_nodes)[i] == next)
            {
                node = i;
                break;
            }
        }
        NS_ABORT_MSG_IF(node == UINT32_MAX, "RdmaNetwork: dangling port");
        if (node != dst && (*m_nics)[node])
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
RdmaFlowTable::SourcePortOf(uint32_t key)
{
    // Multiplicative hash of the key into the dynamic port range (mirrored by the analytic
    // backend).
    return static_cast<uint16_t>(49152 + (key * 2654435761u >> 18) % 16384);
}

void
RdmaFlowTable::Reserve(uint32_t n)
{
    m_flows.reserve(n);
}

uint32_t
RdmaFlowTable::CreateFlow(
    uint32_t src, uint32_t dst, uint64_t bytes, uint8_t priority, uint32_t ecmpKey)
{
    NS_ABORT_MSG_IF(src >= m_nodes->size() || !(*m_nics)[src],
                    "RdmaNetwork::CreateFlow: source " << src << " is not a host");
    NS_ABORT_MSG_IF(dst >= m_nodes->size() || !(*m_nics)[dst],
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
RdmaFlowTable::StartScheduledFlow(uint32_t id)
{
    RoceProfile::Count(EV_FLOW_START);
    StartFlow(id);
}

void
RdmaFlowTable::StartFlow(uint32_t id)
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
    f.baseRtt = qp->baseRtt.GetSeconds();
    if (f.bytes == 0)
    {
        f.finish = f.start;
        f.ackDone = f.start;
        Complete(id);
        return;
    }
    f.qp = qp;
    (*m_nics)[f.src]->StartQueuePair(qp);
}

void
RdmaFlowTable::ScheduleFlow(uint32_t id, Time at)
{
    Time delay = at - Simulator::Now();
    NS_ABORT_MSG_IF(delay.IsStrictlyNegative(),
                    "RdmaNetwork::ScheduleFlow: start time " << at << " is in the past");
    Simulator::Schedule(delay, &RdmaFlowTable::StartScheduledFlow, this, id);
}

void
RdmaFlowTable::AddFlowCompleteCallback(Callback<void, uint32_t> cb)
{
    m_callbacks.push_back(cb);
}

void
RdmaFlowTable::OnReceiveComplete(uint32_t flow)
{
    FlowRecord& f = m_flows.at(flow);
    if (f.finish >= 0)
    {
        return;
    }
    f.finish = Simulator::Now().GetSeconds();
    NS_LOG_INFO("flow " << flow << " received in full at " << f.finish << " s");
    Complete(flow);
}

void
RdmaFlowTable::OnSendComplete(uint32_t flow)
{
    FlowRecord& f = m_flows.at(flow);
    f.ackDone = Simulator::Now().GetSeconds();
    // The queue pair (and its congestion-control object and timers) is not needed any more: keep
    // its one result, so that a run's memory grows with the flows in flight, not all flows.
    if (f.qp)
    {
        f.retransmits = f.qp->retransmits;
        f.qp = nullptr;
    }
}

Ptr<RdmaQueuePair>
RdmaFlowTable::GetQueuePair(uint32_t flow) const
{
    return m_flows.at(flow).qp;
}

std::vector<double>
RdmaFlowTable::GetFlowStartTimes() const
{
    std::vector<double> v;
    v.reserve(m_flows.size());
    for (const auto& f : m_flows)
    {
        v.push_back(f.start);
    }
    return v;
}

std::vector<double>
RdmaFlowTable::GetFlowFinishTimes() const
{
    std::vector<double> v;
    v.reserve(m_flows.size());
    for (const auto& f : m_flows)
    {
        v.push_back(f.finish);
    }
    return v;
}

std::vector<double>
RdmaFlowTable::GetFlowAckTimes() const
{
    std::vector<double> v;
    v.reserve(m_flows.size());
    for (const auto& f : m_flows)
    {
        v.push_back(f.ackDone);
    }
    return v;
}

std::vector<double>
RdmaFlowTable::GetFlowBaseRtts() const
{
    std::vector<double> v;
    v.reserve(m_flows.size());
    for (const auto& f : m_flows)
    {
        v.push_back(f.baseRtt);
    }
    return v;
}

std::vector<double>
RdmaFlowTable::GetFlowIdealFcts() const
{
    std::vector<double> v;
    v.reserve(m_flows.size());
    for (const auto& f : m_flows)
    {
        v.push_back(f.ideal);
    }
    return v;
}

std::vector<uint32_t>
RdmaFlowTable::GetFlowRetransmits() const
{
    std::vector<uint32_t> v;
    v.reserve(m_flows.size());
    for (const auto& f : m_flows)
    {
        v.push_back(f.qp ? f.qp->retransmits : f.retransmits);
    }
    return v;
}

std::vector<uint32_t>
RdmaFlowTable::GetFlowCnps() const
{
    std::vector<uint32_t> v;
    v.reserve(m_flows.size());
    for (uint32_t i = 0; i < m_flows.size(); ++i)
    {
        v.push_back((*m_nics)[m_flows[i].dst]->GetCnpsSent(i));
    }
    return v;
}

std::vector<uint32_t>
RdmaFlowTable::GetFlowAcks() const
{
    std::vector<uint32_t> v;
    v.reserve(m_flows.size());
    for (uint32_t i = 0; i < m_flows.size(); ++i)
    {
        v.push_back((*m_nics)[m_flows[i].dst]->GetAcksSent(i));
    }
    return v;
}

std::vector<uint32_t>
RdmaFlowTable::GetFlowFirstHops() const
{
    std::vector<uint32_t> v;
    v.reserve(m_flows.size());
    for (const auto& f : m_flows)
    {
        uint32_t port = UINT32_MAX;
        if (f.started)
        {
            double ideal;
            ComputeBaseRtt(f.src, f.dst, SourcePortOf(f.ecmpKey), f.bytes, &port, &ideal);
        }
        v.push_back(port);
    }
    return v;
}

} // namespace ns3
