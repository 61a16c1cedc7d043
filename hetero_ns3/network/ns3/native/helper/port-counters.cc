#include "port-counters.h"

#include "ns3/abort.h"
#include "ns3/log.h"

#include <array>

namespace ns3
{

NS_LOG_COMPONENT_DEFINE("PortCounters");

namespace
{

constexpr std::array<const char*, 7> kCounterNames = {"tx_bytes",
                                                      "tx_packets",
                                                      "tx_data_bytes",
                                                      "pfc_pause_sent",
                                                      "pfc_resume_sent",
                                                      "pfc_pause_received",
                                                      "ecn_marks"};

} // namespace

PortCounter
PortCounterFromName(const std::string& name)
{
    for (uint32_t i = 0; i < kCounterNames.size(); ++i)
    {
        if (name == kCounterNames[i])
        {
            return static_cast<PortCounter>(i);
        }
    }
    for (uint32_t r = 0; r < DROP_REASON_COUNT; ++r)
    {
        if (name == std::string("drops_") + RoceDropReasonName(r))
        {
            return static_cast<PortCounter>(static_cast<uint32_t>(PortCounter::DROPS_FIRST) + r);
        }
    }
    NS_ABORT_MSG("unknown port counter " << name);
    return PortCounter::TX_BYTES;
}

uint64_t
ReadPortCounter(const RoceNetDevice& device, PortCounter counter)
{
    switch (counter)
    {
        case PortCounter::TX_BYTES:
            return device.GetTxBytes();
        case PortCounter::TX_PACKETS:
            return device.GetTxPackets();
        case PortCounter::TX_DATA_BYTES:
            return device.GetTxDataBytes();
        case PortCounter::PFC_PAUSE_SENT:
            return device.GetPfcPauseSent();
        case PortCounter::PFC_RESUME_SENT:
            return device.GetPfcResumeSent();
        case PortCounter::PFC_PAUSE_RECEIVED:
            return device.GetPfcPauseReceived();
        case PortCounter::ECN_MARKS:
            return device.GetEcnMarks();
        default:
            return device.GetDrops(static_cast<uint32_t>(counter) -
                                   static_cast<uint32_t>(PortCounter::DROPS_FIRST));
    }
}

} // namespace ns3
