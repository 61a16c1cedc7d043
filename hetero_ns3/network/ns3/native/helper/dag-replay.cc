#include "dag-replay.h"

#include "ns3/abort.h"
#include "ns3/log.h"
#include "ns3/simulator.h"
#include "roce-profile.h"

#include <algorithm>
#include <limits>

namespace ns3
{

NS_LOG_COMPONENT_DEFINE("DagReplay");
NS_OBJECT_ENSURE_REGISTERED(DagReplay);

namespace
{
constexpr uint32_t kNoTask = std::numeric_limits<uint32_t>::max();
} // namespace

TypeId
DagReplay::GetTypeId()
{
    static TypeId tid = TypeId("ns3::DagReplay")
                            .SetParent<Object>()
                            .SetGroupName("HeteroNs3")
                            .AddConstructor<DagReplay>();
    return tid;
}

DagReplay::DagReplay() = default;

DagReplay::~DagReplay() = default;

void
DagReplay::DoDispose()
{
    m_network = nullptr;
    Object::DoDispose();
}

void
DagReplay::SetNetwork(Ptr<RdmaNetwork> network)
{
    m_network = network;
}

void
DagReplay::SetTasks(uint32_t n,
                    const uint8_t* kind,
                    const int32_t* gpu,
                    const int32_t* dst,
                    const int64_t* bytes,
                    const double* durationSeconds,
                    const uint8_t* priority,
                    const int64_t* depPtr,
                    const int32_t* depIdx,
                    const uint32_t* gpuNode,
                    uint32_t nGpus)
{
    m_kind.assign(kind, kind + n);
    m_srcNode.assign(n, 0);
    m_dstNode.assign(n, 0);
    m_bytes.assign(n, 0);
    m_duration.assign(n, Time(0));
    m_priority.assign(n, 0);
    m_pending.assign(n, 0);
    m_start.assign(n, -1.0);
    m_finish.assign(n, -1.0);
    m_flowOfTask.assign(n, -1);
    m_connection.clear();
    m_taskOfFlow.clear();
    m_completed = 0;
    m_flowsStarted = 0;

    std::vector<uint64_t> succCount(n + 1, 0);
    for (uint32_t i = 0; i < n; ++i)
    {
        NS_ABORT_MSG_IF(gpu[i] < 0 || static_cast<uint32_t>(gpu[i]) >= nGpus,
                        "DagReplay: task " << i << " names GPU " << gpu[i] << " outside 0.."
                                           << nGpus - 1);
        m_srcNode[i] = gpuNode[gpu[i]];
        if (kind[i] == 1)
        {
            NS_ABORT_MSG_IF(dst[i] < 0 || static_cast<uint32_t>(dst[i]) >= nGpus,
                            "DagReplay: flow task " << i << " has destination GPU " << dst[i]);
            NS_ABORT_MSG_IF(bytes[i] <= 0,
                            "DagReplay: flow task " << i << " has " << bytes[i] << " bytes");
            m_dstNode[i] = gpuNode[dst[i]];
            m_bytes[i] = static_cast<uint64_t>(bytes[i]);
            m_priority[i] = static_cast<uint8_t>(priority[i]);
        }
        else
        {
            NS_ABORT_MSG_IF(durationSeconds[i] < 0,
                            "DagReplay: compute task " << i << " has a negative duration");
            m_duration[i] = Seconds(durationSeconds[i]);
        }
        for (int64_t k = depPtr[i]; k < depPtr[i + 1]; ++k)
        {
            int32_t d = depIdx[k];
            NS_ABORT_MSG_IF(d < 0 || static_cast<uint32_t>(d) >= i,
                            "DagReplay: task " << i << " depends on task " << d
                                               << " (must be an earlier task)");
            ++succCount[d + 1];
        }
        m_pending[i] = static_cast<uint32_t>(depPtr[i + 1] - depPtr[i]);
    }
    m_succPtr.assign(n + 1, 0);
    for (uint32_t i = 0; i < n; ++i)
    {
        m_succPtr[i + 1] = m_succPtr[i] + succCount[i + 1];
    }
    m_succIdx.assign(m_succPtr[n], 0);
    std::vector<uint64_t> fill(m_succPtr.begin(), m_succPtr.end() - 1);
    for (uint32_t i = 0; i < n; ++i)
    {
        for (int64_t k = depPtr[i]; k < depPtr[i + 1]; ++k)
        {
            m_succIdx[fill[depIdx[k]]++] = i;
        }
    }
}

void
DagReplay::SetConnections(const int64_t* connection, uint32_t n)
{
    NS_ABORT_MSG_IF(n != m_kind.size(),
                    "DagReplay::SetConnections: " << n << " rows for a plan of " << m_kind.size()
                                                  << " tasks");
    m_connection.assign(n, 0);
    for (uint32_t i = 0; i < n; ++i)
    {
        if (m_kind[i] != 1)
        {
            continue;
        }
        NS_ABORT_MSG_IF(connection[i] < 0 ||
                            connection[i] > int64_t(std::numeric_limits<uint32_t>::max()),
                        "DagReplay: flow task " << i << " has connection id " << connection[i]);
        m_connection[i] = static_cast<uint32_t>(connection[i]);
    }
}

void
DagReplay::Start()
{
    NS_ABORT_MSG_IF(!m_network && std::count(m_kind.begin(), m_kind.end(), 1) > 0,
                    "DagReplay: the plan has flow tasks but no network was set");
    if (m_network && !m_callbackHooked)
    {
        m_network->AddFlowCompleteCallback(MakeCallback(&DagReplay::OnFlowComplete, this));
        m_callbackHooked = true;
    }
    if (m_network)
    {
        // Size the flow tables once: growing them by doubling would hold up to three times the
        // final size while a 10^7-flow table is copied.
        uint64_t flows = std::count(m_kind.begin(), m_kind.end(), 1);
        uint64_t total = m_network->GetNFlows() + flows;
        m_network->ReserveFlows(static_cast<uint32_t>(std::min<uint64_t>(total, UINT32_MAX)));
        m_taskOfFlow.reserve(total);
    }
    for (uint32_t i = 0; i < m_pending.size(); ++i)
    {
        if (m_pending[i] == 0)
        {
            Release(i);
        }
    }
}

void
DagReplay::Release(uint32_t task)
{
    m_start[task] = Simulator::Now().GetSeconds();
    if (m_kind[task] == 1)
    {
        uint32_t id = m_connection.empty()
                          ? m_network->CreateFlow(
                                m_srcNode[task], m_dstNode[task], m_bytes[task], m_priority[task])
                          : m_network->CreateFlow(m_srcNode[task],
                                                  m_dstNode[task],
                                                  m_bytes[task],
                                                  m_priority[task],
                                                  m_connection[task]);
        if (m_taskOfFlow.size() <= id)
        {
            m_taskOfFlow.resize(id + 1, kNoTask);
        }
        m_taskOfFlow[id] = task;
        m_flowOfTask[task] = id;
        ++m_flowsStarted;
        m_network->StartFlow(id);
    }
    else
    {
        // Zero-duration tasks also go through the scheduler: no deep recursion along join chains.
        Simulator::Schedule(m_duration[task], &DagReplay::Complete, this, task);
    }
}

void
DagReplay::Complete(uint32_t task)
{
    RoceProfile::Count(EV_TASK_DONE);
    m_finish[task] = Simulator::Now().GetSeconds();
    ++m_completed;
    for (uint64_t k = m_succPtr[task]; k < m_succPtr[task + 1]; ++k)
    {
        uint32_t s = m_succIdx[k];
        if (--m_pending[s] == 0)
        {
            Release(s);
        }
    }
}

void
DagReplay::OnFlowComplete(uint32_t flowId)
{
    if (flowId < m_taskOfFlow.size() && m_taskOfFlow[flowId] != kNoTask)
    {
        // Leave the NIC's receive path before releasing successors (which may start new flows).
        Simulator::ScheduleNow(&DagReplay::Complete, this, m_taskOfFlow[flowId]);
    }
}

uint32_t
DagReplay::GetNTasks() const
{
    return static_cast<uint32_t>(m_kind.size());
}

uint32_t
DagReplay::GetNCompleted() const
{
    return m_completed;
}

uint32_t
DagReplay::GetNFlowsStarted() const
{
    return m_flowsStarted;
}

std::vector<double>
DagReplay::GetStartTimes() const
{
    return m_start;
}

std::vector<double>
DagReplay::GetFinishTimes() const
{
    return m_finish;
}

std::vector<int64_t>
DagReplay::GetFlowIds() const
{
    return m_flowOfTask;
}

} // namespace ns3
