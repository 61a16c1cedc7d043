#ifndef HETERO_NS3_PORT_COUNTERS_H
#define HETERO_NS3_PORT_COUNTERS_H

#include "roce-net-device.h"

#include <cstdint>
#include <string>

namespace ns3
{

/**
 * \brief The per-port integer counters that RdmaNetwork reads back (one value per port).
 *
 * A counter is named once (by PortCounterFromName) and then read per port by a switch over this
 * enum, not by string compares. The drop counters follow RoceDropReason, one per reason.
 */
enum class PortCounter : uint32_t
{
    TX_BYTES = 0,       //!< bytes sent, every frame kind
    TX_PACKETS,         //!< frames sent
    TX_DATA_BYTES,      //!< bytes of DATA frames sent
    PFC_PAUSE_SENT,     //!< PFC pause frames sent
    PFC_RESUME_SENT,    //!< PFC resume frames sent
    PFC_PAUSE_RECEIVED, //!< PFC pause frames received
    ECN_MARKS,          //!< DATA frames marked CE at this egress
    DROPS_FIRST,        //!< drops of RoceDropReason 0; reason r is DROPS_FIRST + r
};

/**
 * \brief The counter called \p name ("tx_bytes", ..., "drops_<reason>"); aborts on an unknown name.
 * \param name counter name as the Python side spells it
 * \return the counter
 */
PortCounter PortCounterFromName(const std::string& name);

/**
 * \brief The value of \p counter on \p device.
 * \param device a port
 * \param counter which counter
 * \return its value
 */
uint64_t ReadPortCounter(const RoceNetDevice& device, PortCounter counter);

} // namespace ns3

#endif /* HETERO_NS3_PORT_COUNTERS_H */
