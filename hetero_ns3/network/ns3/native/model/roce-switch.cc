#include "roce-switch.h"

#include "ns3/boolean.h"
#include "ns3/double.h"
#include "ns3/log.h"
#include "ns3/simulator.h"
#include "ns3/uinteger.h"
#include "roce-net-device.h"
#include "roce-profile.h"

#include <algorithm>

namespace ns3
{

NS_LOG_COMPONENT_DEFINE("RoceSwitch");

NS_OBJECT_ENSURE_REGISTERED(RoceSwitch);

TypeId
RoceSwitch::GetTypeId()
{
    static TypeId tid =
        TypeId("ns3::RoceSwitch")
            .SetParent<RoceNode>()
            .SetGroupName("HeteroNs3")
            .AddConstructor<RoceSwitch>()
            .AddAttribute("EcnEnabled",
                          "Mark ECN at egress",
                          BooleanValue(true),
                          MakeBooleanAccessor(&RoceSwitch::m_ecnEnabled),
                          MakeBooleanChecker())
            .AddAttribute("EcnKminBytes",
                          "ECN Kmin at EcnReferenceRate, bytes",
                          UintegerValue(100000),
                          MakeUintegerAccessor(&RoceSwitch::m_kmin),
                          MakeUintegerChecker<uint64_t>())
            .AddAttribute("EcnKmaxBytes",
                          "ECN Kmax at EcnReferenceRate, bytes",
                          UintegerValue(400000),
                          MakeUintegerAccessor(&RoceSwitch::m_kmax),
                          MakeUintegerChecker<uint64_t>())
            .AddAttribute("EcnPmax",
                          "Marking probability at Kmax",
                          DoubleValue(0.2),
                          MakeDoubleAccessor(&RoceSwitch::m_pmax),
                          MakeDoubleChecker<double>(0.0, 1.0))
            .AddAttribute("EcnReferenceRate",
                          "Link rate at which EcnKminBytes/EcnKmaxBytes apply",
                          DataRateValue(DataRate("25Gbps")),
                          MakeDataRateAccessor(&RoceSwitch::m_ecnRefRate),
                          MakeDataRateChecker())
            .AddAttribute("EcnScaleWithRate",
                          "Scale Kmin/Kmax linearly with each port's rate",
                          BooleanValue(true),
                          MakeBooleanAccessor(&RoceSwitch::m_ecnScale),
                          MakeBooleanChecker())
            .AddAttribute("IntEnabled",
                          "Push an INT record on every DATA frame at egress (HPCC)",
                          BooleanValue(false),
                          MakeBooleanAccessor(&RoceSwitch::m_intEnabled),
                          MakeBooleanChecker())
            .AddTraceSource("EcnMark",
                            "A DATA frame was CE-marked at egress: (egress port index, flow id)",
                            MakeTraceSourceAccessor(&RoceSwitch::m_ecnMarkTrace),
                            "ns3::RoceSwitch::EcnMarkTracedCallback");
    return tid;
}

RoceSwitch::RoceSwitch()
{
    m_mmu = CreateObject<RoceMmu>();
    m_rng = CreateObject<UniformRandomVariable>();
}

RoceSwitch::~RoceSwitch() = default;

void
RoceSwitch::DoDispose()
{
    for (auto& arr : m_refresh)
    {
        for (auto& ev : arr)
        {
            ev.Cancel();
        }
    }
    m_mmu = nullptr;
    m_rng = nullptr;
    RoceNode::DoDispose();
}

Ptr<RoceMmu>
RoceSwitch::GetMmu() const
{
    return m_mmu;
}

bool
RoceSwitch::IsHost() const
{
    return false;
}

void
RoceSwitch::Setup(uint64_t bufferBytes)
{
    NS_LOG_FUNCTION(this << bufferBytes);
    NS_ABORT_MSG_IF(m_kmax < m_kmin,
                    "RoceSwitch: EcnKmaxBytes (" << m_kmax << ") < EcnKminBytes (" << m_kmin
                                                 << ")");
    uint32_t n = m_ports.size();
    std::vector<uint64_t> headroom(n);
    m_portKmin.resize(n);
    m_portKmax.resize(n);
    m_pausing.assign(n, {});
    m_refresh.resize(n);
    double ref = static_cast<double>(m_ecnRefRate.GetBitRate());
    for (uint32_t i = 0; i < n; ++i)
    {
        Ptr<RoceNetDevice> dev = m_ports[i];
        Ptr<RoceNetDevice> peer = dev->GetPeer();
        double bps = dev->GetRateBps();
        double frame =
            std::max(dev->GetSegmentBytes(), peer ? peer->GetSegmentBytes() : 0u) + 128.0;
        // bytes that arrive after the PAUSE decision: wire round trip + a frame being
        // sent at each end + the PAUSE frame itself waiting behind one frame here.
        headroom[i] = static_cast<uint64_t>(2.0 * bps * dev->GetDelay().GetSeconds() / 8.0 +
                                            3.0 * frame + 64);
        double scale = m_ecnScale ? bps / ref : 1.0;
        m_portKmin[i] = m_kmin * scale;
        m_portKmax[i] = m_kmax * scale;
    }
    m_mmu->SetBufferBytes(bufferBytes);
    m_mmu->Setup(n, headroom);
    m_rng->SetStream(static_cast<int64_t>(m_nodeIndex));
}

double
RoceSwitch::MarkProbability(uint32_t port, uint64_t qlenBytes) const
{
    double q = static_cast<double>(qlenBytes);
    double kmin = m_portKmin.at(port);
    double kmax = m_portKmax.at(port);
    if (q <= kmin)
    {
        return 0.0;
    }
    if (q >= kmax)
    {
        return 1.0;
    }
    return m_pmax * (q - kmin) / (kmax - kmin);
}

bool
RoceSwitch::ShouldMark(uint32_t port, uint64_t qlenBytes)
{
    double prob = MarkProbability(port, qlenBytes);
    if (prob <= 0.0)
    {
        return false;
    }
    return prob >= 1.0 || m_rng->GetValue() < prob;
}

void
RoceSwitch::Receive(Ptr<RocePacket> p, uint32_t inPort)
{
    uint32_t out = SelectPort(*p);
    if (out == UINT32_MAX)
    {
        m_ports[inPort]->RecordDrop(*p, DROP_NO_ROUTE);
        return;
    }
    uint8_t cls = p->priority & 7;
    RoceMmu::Admission adm = m_mmu->Admit(inPort, out, cls, p->size);
    if (adm == RoceMmu::DROP_LOSSY)
    {
        m_ports[out]->RecordDrop(*p, DROP_LOSSY_BUFFER);
        return;
    }
    if (adm == RoceMmu::DROP_HEADROOM)
    {
        m_ports[inPort]->RecordDrop(*p, DROP_HEADROOM_OVERFLOW);
        return;
    }
    p->inPort = inPort;
    if (!m_pausing[inPort][cls] && m_mmu->ShouldPause(inPort, cls))
    {
        SendPause(inPort, cls);
    }
    m_ports[out]->Enqueue(p);
}

void
RoceSwitch::SendPause(uint32_t port, uint8_t cls)
{
    m_pausing[port][cls] = true;
    uint16_t quanta = m_mmu->GetPauseQuanta();
    m_ports[port]->SendPfc(cls, quanta);
    // Refresh before the peer's pause timer runs out (at half of the pause time).
    double seconds = quanta * 512.0 / m_ports[port]->GetRateBps();
    m_refresh[port][cls].Cancel();
    m_refresh[port][cls] =
        Simulator::Schedule(Seconds(seconds / 2), &RoceSwitch::RefreshPause, this, port, cls);
}

void
RoceSwitch::RefreshPause(uint32_t port, uint8_t cls)
{
    RoceProfile::Count(EV_PFC_REFRESH);
    if (m_pausing[port][cls])
    {
        SendPause(port, cls);
    }
}

void
RoceSwitch::NotifyDequeue(uint32_t port, RocePacket& p)
{
    uint8_t cls = p.priority & 7;
    m_mmu->Release(p.inPort, port, cls, p.size);
    if (m_pausing[p.inPort][cls] && m_mmu->ShouldResume(p.inPort, cls))
    {
        m_pausing[p.inPort][cls] = false;
        Simulator::Remove(m_refresh[p.inPort][cls]);
        m_ports[p.inPort]->SendPfc(cls, 0);
    }
    if (p.type != RocePacketType::DATA)
    {
        return;
    }
    Ptr<RoceNetDevice> dev = m_ports[port];
    if (m_ecnEnabled && p.ecnCapable && !p.ce && ShouldMark(port, dev->GetQueueBytes(cls)))
    {
        p.ce = true;
        NS_LOG_LOGIC("switch " << m_nodeIndex << " port " << port << ": ECN mark, flow "
                               << p.flowId);
        dev->RecordEcnMark();
        m_ecnMarkTrace(port, p.flowId);
    }
    if (m_intEnabled && p.nHops < RocePacket::MAX_INT_HOPS)
    {
        IntHop& h = p.hops[p.nHops++];
        h.txBytes = dev->GetTxBytes() + p.size;
        h.qlenBytes = dev->GetTotalQueueBytes();
        h.tsNs = Simulator::Now().GetNanoSeconds();
        h.rateBps = dev->GetRateBps();
    }
}

} // namespace ns3
