#include "queue-sampler.h"

#include "ns3/abort.h"
#include "ns3/log.h"
#include "ns3/simulator.h"
#include "roce-profile.h"

namespace ns3
{

NS_LOG_COMPONENT_DEFINE("QueueSampler");

NS_OBJECT_ENSURE_REGISTERED(QueueSampler);

TypeId
QueueSampler::GetTypeId()
{
    static TypeId tid = TypeId("ns3::QueueSampler")
                            .SetParent<Object>()
                            .SetGroupName("HeteroNs3")
                            .AddConstructor<QueueSampler>();
    return tid;
}

QueueSampler::QueueSampler() = default;
QueueSampler::~QueueSampler() = default;

void
QueueSampler::DoDispose()
{
    m_ports = nullptr;
    m_flows = nullptr;
    Object::DoDispose();
}

void
QueueSampler::Bind(const std::vector<Ptr<RoceNetDevice>>* ports, const RdmaFlowTable* flows)
{
    m_ports = ports;
    m_flows = flows;
}

void
QueueSampler::Start(const uint32_t* ports, uint32_t n, Time interval, Time until)
{
    NS_ABORT_MSG_IF(!interval.IsStrictlyPositive(),
                    "RdmaNetwork::SampleQueues: interval must be > 0");
    m_samplePorts.assign(ports, ports + n);
    for (uint32_t p : m_samplePorts)
    {
        NS_ABORT_MSG_IF(p >= m_ports->size(), "RdmaNetwork::SampleQueues: unknown port " << p);
    }
    m_interval = interval;
    m_until = until;
    Simulator::Schedule(interval, &QueueSampler::Sample, this);
}

void
QueueSampler::Sample()
{
    RoceProfile::Count(EV_SAMPLE);
    double t = Simulator::Now().GetSeconds();
    for (uint32_t p : m_samplePorts)
    {
        m_t.push_back(t);
        m_p.push_back(p);
        m_b.push_back((*m_ports)[p]->GetTotalQueueBytes());
        m_tx.push_back((*m_ports)[p]->GetTxBytes());
    }
    bool more = m_until.IsStrictlyPositive() ? Simulator::Now() + m_interval <= m_until
                                             : m_flows->GetNFlowsCompleted() < m_flows->GetNFlows();
    if (more)
    {
        Simulator::Schedule(m_interval, &QueueSampler::Sample, this);
    }
}

std::vector<double>
QueueSampler::GetTimes() const
{
    return m_t;
}

std::vector<uint32_t>
QueueSampler::GetPorts() const
{
    return m_p;
}

std::vector<uint64_t>
QueueSampler::GetBytes() const
{
    return m_b;
}

std::vector<uint64_t>
QueueSampler::GetTxBytes() const
{
    return m_tx;
}

} // namespace ns3
