#include "roce-mmu.h"

#include "ns3/abort.h"
#include "ns3/boolean.h"
#include "ns3/double.h"
#include "ns3/log.h"
#include "ns3/uinteger.h"

#include <algorithm>

namespace ns3
{

NS_LOG_COMPONENT_DEFINE("RoceMmu");

NS_OBJECT_ENSURE_REGISTERED(RoceMmu);

TypeId
RoceMmu::GetTypeId()
{
    static TypeId tid =
        TypeId("ns3::RoceMmu")
            .SetParent<Object>()
            .SetGroupName("HeteroNs3")
            .AddConstructor<RoceMmu>()
            .AddAttribute("BufferBytes",
                          "Total packet buffer of the switch, bytes",
                          UintegerValue(32 * 1024 * 1024),
                          MakeUintegerAccessor(&RoceMmu::m_bufferBytes),
                          MakeUintegerChecker<uint64_t>(1))
            .AddAttribute("PfcEnabled",
                          "Enable IEEE 802.1Qbb PFC (lossless classes)",
                          BooleanValue(true),
                          MakeBooleanAccessor(&RoceMmu::m_pfcEnabled),
                          MakeBooleanChecker())
            .AddAttribute("LosslessClasses",
                          "Bit mask of classes that are lossless when PFC is enabled",
                          UintegerValue(0xff),
                          MakeUintegerAccessor(&RoceMmu::m_losslessMask),
                          MakeUintegerChecker<uint32_t>(0, 0xff))
            .AddAttribute("PfcDynamic",
                          "Dynamic PFC threshold (alpha x free shared buffer) instead of static",
                          BooleanValue(true),
                          MakeBooleanAccessor(&RoceMmu::m_pfcDynamic),
                          MakeBooleanChecker())
            .AddAttribute("PfcAlpha",
                          "Alpha of the dynamic PFC threshold",
                          DoubleValue(0.125),
                          MakeDoubleAccessor(&RoceMmu::m_pfcAlpha),
                          MakeDoubleChecker<double>(0.0))
            .AddAttribute("PfcStaticThresholdBytes",
                          "Static PFC threshold per ingress (port, class), bytes",
                          UintegerValue(256 * 1024),
                          MakeUintegerAccessor(&RoceMmu::m_pfcStatic),
                          MakeUintegerChecker<uint64_t>())
            .AddAttribute("PfcResumeOffsetBytes",
                          "RESUME when ingress bytes fall this far below the PFC threshold",
                          UintegerValue(3 * 1024),
                          MakeUintegerAccessor(&RoceMmu::m_resumeOffset),
                          MakeUintegerChecker<uint64_t>())
            .AddAttribute(
                "HeadroomBytes",
                "PFC headroom reserved per ingress port, bytes (0 = from link rate and delay)",
                UintegerValue(0),
                MakeUintegerAccessor(&RoceMmu::m_headroomAttr),
                MakeUintegerChecker<uint64_t>())
            .AddAttribute("EgressDynamic",
                          "Dynamic egress threshold for lossy classes instead of static",
                          BooleanValue(true),
                          MakeBooleanAccessor(&RoceMmu::m_egressDynamic),
                          MakeBooleanChecker())
            .AddAttribute("EgressAlpha",
                          "Alpha of the dynamic egress threshold (lossy classes)",
                          DoubleValue(1.0),
                          MakeDoubleAccessor(&RoceMmu::m_egressAlpha),
                          MakeDoubleChecker<double>(0.0))
            .AddAttribute("EgressStaticThresholdBytes",
                          "Static egress threshold per (port, class) for lossy classes, bytes",
                          UintegerValue(1024 * 1024),
                          MakeUintegerAccessor(&RoceMmu::m_egressStatic),
                          MakeUintegerChecker<uint64_t>())
            .AddAttribute("PauseQuanta",
                          "Pause quanta carried by PAUSE frames (1 quantum = 512 bit times)",
                          UintegerValue(0xffff),
                          MakeUintegerAccessor(&RoceMmu::m_pauseQuanta),
                          MakeUintegerChecker<uint16_t>(1));
    return tid;
}

RoceMmu::RoceMmu() = default;

void
RoceMmu::SetBufferBytes(uint64_t bytes)
{
    if (bytes > 0)
    {
        m_bufferBytes = bytes;
    }
}

void
RoceMmu::Setup(uint32_t nPorts, const std::vector<uint64_t>& headroom)
{
    NS_LOG_FUNCTION(this << nPorts);
    m_headroom.assign(nPorts, 0);
    uint64_t reserved = 0;
    if (m_pfcEnabled && m_losslessMask != 0)
    {
        for (uint32_t i = 0; i < nPorts; ++i)
        {
            m_headroom[i] = m_headroomAttr > 0 ? m_headroomAttr : headroom.at(i);
            reserved += m_headroom[i];
        }
    }
    NS_ABORT_MSG_IF(reserved >= m_bufferBytes,
                    "RoceMmu: PFC headroom ("
                        << reserved << " B over " << nPorts
                        << " ports) leaves no shared buffer out of BufferBytes=" << m_bufferBytes
                        << "; raise the buffer or lower HeadroomBytes");
    m_sharedPool = m_bufferBytes - reserved;
    m_sharedUsed = 0;
    m_headroomUsed.assign(nPorts, 0);
    m_ingress.assign(nPorts, {});
    m_ingressHdrm.assign(nPorts, {});
    m_egress.assign(nPorts, {});
}

bool
RoceMmu::IsLossless(uint8_t cls) const
{
    return m_pfcEnabled && ((m_losslessMask >> cls) & 1u);
}

uint64_t
RoceMmu::PfcThreshold() const
{
    if (!m_pfcDynamic)
    {
        return m_pfcStatic;
    }
    uint64_t free = m_sharedPool > m_sharedUsed ? m_sharedPool - m_sharedUsed : 0;
    return static_cast<uint64_t>(m_pfcAlpha * static_cast<double>(free));
}

uint64_t
RoceMmu::EgressThreshold() const
{
    if (!m_egressDynamic)
    {
        return m_egressStatic;
    }
    uint64_t free = m_sharedPool > m_sharedUsed ? m_sharedPool - m_sharedUsed : 0;
    return static_cast<uint64_t>(m_egressAlpha * static_cast<double>(free));
}

RoceMmu::Admission
RoceMmu::Admit(uint32_t inPort, uint32_t outPort, uint8_t cls, uint32_t size)
{
    if (IsLossless(cls))
    {
        bool sharedOk = m_sharedUsed + size <= m_sharedPool;
        bool belowThreshold = m_ingress[inPort][cls] + size <= PfcThreshold();
        if (sharedOk && belowThreshold && m_ingressHdrm[inPort][cls] == 0)
        {
            m_sharedUsed += size;
            m_ingress[inPort][cls] += size;
            m_egress[outPort][cls] += size;
            return ADMIT_SHARED;
        }
        if (m_headroomUsed[inPort] + size <= m_headroom[inPort])
        {
            m_headroomUsed[inPort] += size;
            m_ingressHdrm[inPort][cls] += size;
            m_egress[outPort][cls] += size;
            return ADMIT_HEADROOM;
        }
        return DROP_HEADROOM;
    }
    if (m_sharedUsed + size > m_sharedPool || m_egress[outPort][cls] + size > EgressThreshold())
    {
        return DROP_LOSSY;
    }
    m_sharedUsed += size;
    m_ingress[inPort][cls] += size;
    m_egress[outPort][cls] += size;
    return ADMIT_SHARED;
}

void
RoceMmu::Release(uint32_t inPort, uint32_t outPort, uint8_t cls, uint32_t size)
{
    // The ingress (port, class) counters are drained headroom first, whichever of its frames
    // leaves: a shared-buffer MMU counts bytes per ingress priority group, not which frame filled
    // which region (the HPCC artifact's SwitchMmu::RemoveFromIngressAdmission does the same).
    // Charging the departure to the frame's own region kept a port PAUSEd until the frames that
    // went to headroom, at the tail of the egress queue, had left: the whole queue's drain time.
    uint64_t fromHdrm = std::min<uint64_t>(m_ingressHdrm[inPort][cls], size);
    m_headroomUsed[inPort] -= fromHdrm;
    m_ingressHdrm[inPort][cls] -= fromHdrm;
    m_sharedUsed -= size - fromHdrm;
    m_ingress[inPort][cls] -= size - fromHdrm;
    m_egress[outPort][cls] -= size;
}

bool
RoceMmu::ShouldPause(uint32_t inPort, uint8_t cls) const
{
    return IsLossless(cls) &&
           (m_ingressHdrm[inPort][cls] > 0 || m_ingress[inPort][cls] >= PfcThreshold());
}

bool
RoceMmu::ShouldResume(uint32_t inPort, uint8_t cls) const
{
    if (m_ingressHdrm[inPort][cls] > 0)
    {
        return false;
    }
    uint64_t th = PfcThreshold();
    return m_ingress[inPort][cls] + m_resumeOffset <= th || m_ingress[inPort][cls] == 0;
}

uint64_t
RoceMmu::GetSharedUsed() const
{
    return m_sharedUsed;
}

uint64_t
RoceMmu::GetSharedPool() const
{
    return m_sharedPool;
}

uint64_t
RoceMmu::GetIngressBytes(uint32_t port, uint8_t cls) const
{
    return m_ingress.at(port)[cls];
}

uint16_t
RoceMmu::GetPauseQuanta() const
{
    return m_pauseQuanta;
}

} // namespace ns3
