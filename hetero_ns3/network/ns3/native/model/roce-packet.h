#ifndef HETERO_NS3_ROCE_PACKET_H
#define HETERO_NS3_ROCE_PACKET_H

#include "ns3/simple-ref-count.h"
#include "roce-pool.h"

#include <cstddef>
#include <cstdint>

namespace ns3
{

/** \brief Kind of a frame carried by RoceNetDevice. */
enum class RocePacketType : uint8_t
{
    DATA = 0, //!< RDMA write/send payload segment
    ACK = 1,  //!< cumulative acknowledgement (may carry INT for HPCC)
    NACK = 2, //!< go-back-N negative acknowledgement
    CNP = 3,  //!< DCQCN congestion notification packet
    PFC = 4,  //!< IEEE 802.1Qbb PAUSE / RESUME frame (hop by hop, never forwarded)
};

/** \brief One INT (in-band network telemetry) record pushed by a switch egress port (HPCC). */
struct IntHop
{
    uint64_t txBytes;   //!< cumulative bytes sent by the egress port, this packet included
    uint64_t qlenBytes; //!< egress queue length of the port (all classes), bytes
    int64_t tsNs;       //!< dequeue time, nanoseconds
    double rateBps;     //!< egress link rate, bit/s
};

/**
 * \brief A lean RoCE frame: header fields only, no payload bytes.
 *
 * The module never looks at payload contents, so frames are small reference-counted
 * structs instead of ns3::Packet with serialized headers (this skips header
 * (de)serialization on every hop). A frame is in one place at a time (store and
 * forward), so the switch bookkeeping fields can be written in place.
 */
class RocePacket : public SimpleRefCount<RocePacket>
{
public:
    static constexpr uint32_t MAX_INT_HOPS = 8; //!< INT stack depth

    RocePacketType type{RocePacketType::DATA}; //!< frame kind
    uint8_t priority{0};                       //!< traffic class 0..7
    bool ecnCapable{true};                     //!< ECT set
    bool ce{false};                            //!< congestion experienced (ECN mark)
    bool ackReq{false};    //!< DATA: BTH AckReq bit, the responder ACKs this frame at once
    uint8_t nHops{0};      //!< INT records in use
    uint8_t pfcClass{0};   //!< PFC: class paused / resumed
    uint16_t pfcQuanta{0}; //!< PFC: pause quanta (0 = resume)
    uint16_t sport{0};     //!< UDP source port (ECMP entropy)
    uint16_t dport{4791};  //!< UDP destination port (RoCEv2)
    uint32_t flowId{0};    //!< flow (queue pair) id
    uint32_t src{0};       //!< source host node id
    uint32_t dst{0};       //!< destination host node id
    uint32_t size{0};      //!< bytes on the wire
    uint32_t payload{0};   //!< data payload bytes
    uint64_t seq{0};       //!< DATA: offset of first byte; ACK/NACK: next expected byte
    uint64_t flowBytes{0}; //!< DATA: total size of the flow, bytes
    // switch bookkeeping (valid while the frame sits in a switch)
    uint32_t inPort{0};        //!< ingress port at the current switch
    IntHop hops[MAX_INT_HOPS]; //!< INT stack (only the first nHops records are meaningful)

    /** User-provided so that `new RocePacket()` does not zero the INT stack (256 bytes) per frame.
     */
    RocePacket() {}

    /** Frames come from a free list: one allocation per frame alive at the peak, not per frame. */
    static void*
    operator new(std::size_t bytes)
    {
        return RoceFreeList<sizeof(RocePacket)>::Allocate(bytes);
    }

    /** Return a frame's memory to the free list. */
    static void
    operator delete(void* ptr, std::size_t bytes)
    {
        RoceFreeList<sizeof(RocePacket)>::Release(ptr, bytes);
    }
};

} // namespace ns3

#endif
