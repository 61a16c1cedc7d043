#ifndef HETERO_NS3_RDMA_QUEUE_PAIR_H
#define HETERO_NS3_RDMA_QUEUE_PAIR_H

#include "ns3/callback.h"
#include "ns3/event-id.h"
#include "ns3/nstime.h"
#include "ns3/ptr.h"
#include "ns3/simple-ref-count.h"

#include <cstdint>

namespace ns3
{

class RdmaCongestionOps;

/**
 * \brief Sender state of one flow (an RDMA queue pair, reliable connection).
 *
 * Byte sequence space [0, size). sndUna: first unacknowledged byte; sndNxt: next byte
 * to send (go-back-N rewinds it to the NACKed byte). The congestion-control strategy
 * writes rateBps (pacing rate) and windowBytes (0 = no window).
 */
class RdmaQueuePair : public SimpleRefCount<RdmaQueuePair>
{
public:
    uint32_t flowId{0};         //!< flow id (network-wide)
    uint32_t src{0};            //!< source host node index
    uint32_t dst{0};            //!< destination host node index
    uint16_t sport{0};          //!< UDP source port (ECMP entropy)
    uint8_t priority{3};        //!< traffic class
    uint64_t size{0};           //!< bytes to deliver
    uint64_t sndNxt{0};         //!< next byte to send
    uint64_t sndUna{0};         //!< first unacknowledged byte
    uint32_t port{0};           //!< local egress port at the source host
    uint32_t segment{4096};     //!< payload bytes per frame (port's SegmentBytes)
    double lineRateBps{0};      //!< egress port line rate, bit/s
    double rateBps{0};          //!< current pacing rate, bit/s (set by congestion control)
    uint64_t windowBytes{0};    //!< send window, bytes (0 = unlimited)
    Time baseRtt;               //!< base round-trip time of the path (data out, ACK back)
    Time ctrlLead;              //!< port delay + ACK serialization: a CNP's arrival is scheduled
                                //!< this long before it (when its last hop begins)
    Time nextAvail;             //!< pacing: earliest time of the next frame
    Time lastSent;              //!< pacing: when the last DATA frame left
    uint32_t lastFrameBytes{0}; //!< pacing: wire bytes of that frame
    uint8_t pacingRule{0};      //!< on a rate change: 0 rescale the gap owed, 1 frame gap, 2 keep
    Callback<void> wakePort;    //!< asks the egress port to look again (nextAvail moved earlier)
    Time lastProgress;          //!< last time sndUna advanced or the RTO was re-armed
    EventId rtoEvent;           //!< retransmission timer
    uint32_t retransmits{0};    //!< go-back-N rewinds (NACK or timeout)
    bool finished{false};       //!< all bytes acknowledged
    Ptr<RdmaCongestionOps> cc;  //!< congestion-control strategy of this QP

    /** \return bytes sent and not yet acknowledged. */
    uint64_t
    Inflight() const
    {
        return sndNxt - sndUna;
    }
};

} // namespace ns3

#endif
