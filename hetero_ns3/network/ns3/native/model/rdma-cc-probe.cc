#include "rdma-cc-probe.h"

#include "ns3/callback.h"
#include "ns3/log.h"
#include "ns3/simulator.h"
#include "rdma-nic.h"
#include "roce-switch.h"

namespace ns3
{

NS_LOG_COMPONENT_DEFINE("RdmaCcProbe");

NS_OBJECT_ENSURE_REGISTERED(RdmaCcProbe);

TypeId
RdmaCcProbe::GetTypeId()
{
    static TypeId tid = TypeId("ns3::RdmaCcProbe")
                            .SetParent<Object>()
                            .SetGroupName("HeteroNs3")
                            .AddConstructor<RdmaCcProbe>();
    return tid;
}

RdmaCcProbe::RdmaCcProbe() = default;
RdmaCcProbe::~RdmaCcProbe() = default;

void
RdmaCcProbe::Record(uint32_t flow, Kind kind, double value)
{
    m_time.push_back(Simulator::Now().GetSeconds());
    m_flow.push_back(flow);
    m_kind.push_back(kind);
    m_value.push_back(value);
}

void
RdmaCcProbe::WatchNic(Ptr<RdmaNic> nic)
{
    nic->TraceConnectWithoutContext("CongestionControlCreated",
                                    MakeCallback(&RdmaCcProbe::OnCcCreated, this));
    nic->TraceConnectWithoutContext(
        "CnpSent", Callback<void, uint32_t>([this](uint32_t f) { Record(f, CNP_SENT, 0); }));
    nic->TraceConnectWithoutContext("CnpReceived", Callback<void, uint32_t>([this](uint32_t f) {
                                        Record(f, CNP_RECEIVED, 0);
                                    }));
}

void
RdmaCcProbe::WatchSwitch(Ptr<RoceSwitch> sw)
{
    sw->TraceConnectWithoutContext(
        "EcnMark", Callback<void, uint32_t, uint32_t>([this](uint32_t port, uint32_t f) {
            Record(f, ECN_MARK, port);
        }));
}

void
RdmaCcProbe::OnCcCreated(uint32_t flow, Ptr<RdmaCongestionOps> cc)
{
    const std::pair<const char*, Kind> sources[] = {
        {"Rate", RATE},
        {"TargetRate", TARGET_RATE},
        {"Alpha", ALPHA},
        {"Window", WINDOW},
        {"Rtt", RTT},
    };
    for (const auto& [name, kind] : sources)
    {
        Kind k = kind;
        // TraceConnectWithoutContext returns false when the strategy has no such source.
        cc->TraceConnectWithoutContext(
            name, Callback<void, double, double>([this, flow, k](double, double now) {
                Record(flow, k, now);
            }));
    }
}

uint32_t
RdmaCcProbe::GetN() const
{
    return m_time.size();
}

std::vector<double>
RdmaCcProbe::GetTimes() const
{
    return m_time;
}

std::vector<uint32_t>
RdmaCcProbe::GetFlows() const
{
    return m_flow;
}

std::vector<uint8_t>
RdmaCcProbe::GetKinds() const
{
    return m_kind;
}

std::vector<double>
RdmaCcProbe::GetValues() const
{
    return m_value;
}

} // namespace ns3
