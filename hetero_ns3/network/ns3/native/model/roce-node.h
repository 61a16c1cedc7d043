#ifndef HETERO_NS3_ROCE_NODE_H
#define HETERO_NS3_ROCE_NODE_H

#include "ns3/nstime.h"
#include "ns3/object.h"
#include "ns3/ptr.h"
#include "roce-packet.h"

#include <cstdint>
#include <vector>

namespace ns3
{

class RoceNetDevice;

/**
 * \brief Forwarding logic shared by RoCE switches and RDMA NICs.
 *
 * Owns the node's RoceNetDevice ports (local port index = order of AddPort) and a
 * destination-based forwarding table: for every destination host, the list of local ports
 * that are ECMP next hops. SelectPort hashes the flow 5-tuple (or, with per-packet
 * spraying, also the sequence number) with a seed to pick one of them.
 */
class RoceNode : public Object
{
public:
    /** \return the TypeId. */
    static TypeId GetTypeId();
    RoceNode();
    ~RoceNode() override;

    /** Attach a port; \return its local index. */
    uint32_t AddPort(Ptr<RoceNetDevice> dev);
    /** \return local port \p i. */
    Ptr<RoceNetDevice> GetPort(uint32_t i) const;
    /** \return number of ports. */
    uint32_t GetNPorts() const;
    /** Add local port \p port as an ECMP next hop toward host \p dst. */
    void AddRoute(uint32_t dst, uint32_t port);
    /** \return the ECMP next hops toward \p dst (empty when unknown). */
    const std::vector<uint32_t>& GetRoutes(uint32_t dst) const;
    /** Set the graph node index of this node. */
    void SetNodeIndex(uint32_t id);
    /** \return the graph node index. */
    uint32_t GetNodeIndex() const;
    /**
     * Pick the egress port for \p p among the next hops toward p.dst.
     * \return the local port, or UINT32_MAX when there is no route.
     */
    uint32_t SelectPort(const RocePacket& p) const;

    /** A frame (not PFC) arrived on local port \p port. */
    virtual void Receive(Ptr<RocePacket> p, uint32_t port) = 0;
    /**
     * A port with empty class queues asks for data (hosts only).
     * \param port local port
     * \param pausedMask bit c set when class c is paused by PFC
     * \param wake out: earliest time at which a paced queue pair becomes ready (zero = none)
     * \return a data frame, or nullptr
     */
    virtual Ptr<RocePacket> PullData(uint32_t port, uint8_t pausedMask, Time* wake);
    /**
     * Earliest time at which PullData on \p port could return a frame without any other change
     * (a new flow, an ACK, a RESUME, a timeout: each of those calls the port's TryTransmit).
     * \param port local port
     * \param pausedMask bit c set when class c is paused by PFC
     * \return that time (at or before now: at once), or Time::Max() when nothing is pending
     */
    virtual Time NextPullTime(uint32_t port, uint8_t pausedMask) const;
    /** Frame \p p leaves the class queues of \p port and starts transmission. */
    virtual void NotifyDequeue(uint32_t port, RocePacket& p);
    /** \return true for hosts (RDMA NICs). */
    virtual bool IsHost() const = 0;

protected:
    void DoDispose() override;

    std::vector<Ptr<RoceNetDevice>> m_ports;     //!< local ports
    std::vector<std::vector<uint32_t>> m_routes; //!< next hops per destination host

private:
    /** Fill m_fib / m_fibPorts from m_routes (on the first SelectPort after a change). */
    void CompileFib() const;

    /**
     * Flat forwarding table read per frame: per destination, (first port, count) when it has one
     * next hop (the port itself, no second lookup), else (offset into m_fibPorts, count). One
     * contiguous array instead of a separately allocated vector per destination.
     */
    struct FibEntry
    {
        uint32_t first; //!< the port (count == 1) or the offset into m_fibPorts (count > 1)
        uint32_t count; //!< next hops (0: no route)
    };

    mutable std::vector<FibEntry> m_fib;      //!< per destination host
    mutable std::vector<uint32_t> m_fibPorts; //!< next hops of multi-path destinations
    mutable bool m_fibDirty{true};            //!< m_routes changed since CompileFib

protected:
    uint32_t m_nodeIndex{0}; //!< graph node index
    uint32_t m_ecmpSeed{0};  //!< ECMP hash seed
    bool m_spray{false};     //!< per-packet spraying instead of per-flow
};

} // namespace ns3

#endif
