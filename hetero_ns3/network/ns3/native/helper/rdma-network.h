#ifndef HETERO_NS3_RDMA_NETWORK_H
#define HETERO_NS3_RDMA_NETWORK_H

#include "ns3/callback.h"
#include "ns3/node.h"
#include "ns3/nstime.h"
#include "ns3/object.h"
#include "ns3/traced-callback.h"
#include "queue-sampler.h"
#include "rdma-flow-table.h"
#include "rdma-nic.h"
#include "rdma-queue-pair.h"
#include "roce-channel.h"
#include "roce-net-device.h"
#include "roce-switch.h"

#include <string>
#include <vector>

namespace ns3
{

/**
 * \brief One simulated RoCE network, built from arrays; owns every node, port and flow of a run.
 *
 * This class assembles the network (nodes, links, routes, Build) and forwards its flow API to
 * an RdmaFlowTable and its queue sampling to a QueueSampler, both owned here; port counters
 * are read through port-counters.h.
 *
 * Node ids are graph node indices (0..n-1, hosts and switches in one numbering). Link l
 * joins nodes a and b; its port at a is port 2l, its port at b is port 2l+1. Forwarding
 * entries (node, destination host, link) make the link's port at that node an ECMP next
 * hop toward the host. Attributes of RoceNetDevice, RoceChannel, RoceMmu, RoceSwitch,
 * RdmaNic and the congestion-control strategies come from their defaults
 * (Config::SetDefault) at Build time.
 *
 * Typical use (C++): AddNode..., AddLink..., AddRoute..., Build(); then CreateFlow() +
 * StartFlow() (now) or ScheduleFlow() (absolute time); hook AddFlowCompleteCallback();
 * Simulator::Run(); read results; Simulator::Destroy().
 */
class RdmaNetwork : public Object
{
public:
    /** \return the TypeId. */
    static TypeId GetTypeId();
    RdmaNetwork();
    ~RdmaNetwork() override;

    /** Add a node; \p bufferBytes is the switch buffer (0 = RoceMmu default). \return node id. */
    uint32_t AddNode(bool isHost, uint64_t bufferBytes);
    /** Add \p n nodes from arrays. */
    void AddNodes(const uint8_t* isHost, const uint64_t* bufferBytes, uint32_t n);
    /**
     * Add a full-duplex link. \p segmentA / \p segmentB: DATA payload bytes per frame of
     * the port at a / b (0 = RoceNetDevice default). \return link id.
     */
    uint32_t AddLink(uint32_t a,
                     uint32_t b,
                     double rateBps,
                     double delaySeconds,
                     uint32_t segmentA,
                     uint32_t segmentB);
    /** Add \p n links from arrays (\p segment applies to both ends). */
    void AddLinks(const uint32_t* a,
                  const uint32_t* b,
                  const double* rateBps,
                  const double* delaySeconds,
                  const uint32_t* segment,
                  uint32_t n);
    /**
     * Cap the send rate of \p n ports (before Build): port \p port[i] serializes at
     * min(its link's rate, \p rateBps[i]), now and after SetLinkRate. The run path caps the GPU
     * side of a GPU's PCIe link at its NIC's rate where the GPU has a NIC of its own, so that the
     * RDMA endpoint (its queue pairs and their line rate) paces at the NIC rate as a real NIC does.
     */
    void CapPortRates(const uint32_t* port, const double* rateBps, uint32_t n);
    /** At \p node, make link \p link an ECMP next hop toward host \p dst. */
    void AddRoute(uint32_t node, uint32_t dst, uint32_t link);
    /** Add \p n forwarding entries from arrays. */
    void AddRoutes(const uint32_t* node, const uint32_t* dst, const uint32_t* link, uint64_t n);
    /** Finish construction: size switch buffers, prepare NICs. Call once, before flows. */
    void Build();

    /** Make room for \p n flows in all, so that creating them never reallocates the table. */
    void ReserveFlows(uint32_t n);
    /**
     * Create a flow without starting it; its ECMP key (see the overload) is its own id.
     * \return its id (dense, from 0).
     */
    uint32_t CreateFlow(uint32_t src, uint32_t dst, uint64_t bytes, uint8_t priority);
    /**
     * Create a flow whose queue pair takes its UDP source port (ECMP entropy) from \p ecmpKey
     * instead of its flow id: flows with one key (one persistent connection) hash alike.
     * \return its id (dense, from 0).
     */
    uint32_t CreateFlow(
        uint32_t src, uint32_t dst, uint64_t bytes, uint8_t priority, uint32_t ecmpKey);
    /** \return the RoCEv2 UDP source port (49152..65535) of a queue pair with ECMP key \p key. */
    static uint16_t SourcePortOf(uint32_t key);
    /** Start flow \p id at the current simulation time. */
    void StartFlow(uint32_t id);
    /** Start flow \p id at absolute simulation time \p at. */
    void ScheduleFlow(uint32_t id, Time at);
    /** Create and schedule \p n flows from arrays (start times in seconds). */
    void AddFlows(const uint32_t* src,
                  const uint32_t* dst,
                  const uint64_t* bytes,
                  const uint8_t* priority,
                  const double* startSeconds,
                  uint32_t n);
    /** Run \p cb(flowId) whenever a flow's last byte reaches its destination. */
    void AddFlowCompleteCallback(Callback<void, uint32_t> cb);

    /** Sample queue bytes of \p ports every \p interval until \p until (zero: while flows are
     * unfinished). */
    void SampleQueues(const uint32_t* ports, uint32_t n, Time interval, Time until);
    /** Change both directions of link \p link to \p rateBps at absolute time \p at. */
    void SetLinkRate(uint32_t link, double rateBps, Time at);
    /** Take link \p link down (frames dropped, reason link_down) or up at absolute time \p at. */
    void SetLinkUp(uint32_t link, bool up, Time at);
    /** Simulator::Run, stopping at \p stop when positive. */
    void Run(Time stop);

    uint32_t GetNNodes() const;                      //!< \return nodes
    uint32_t GetNLinks() const;                      //!< \return links
    uint32_t GetNPorts() const;                      //!< \return ports (2 per link)
    uint32_t GetNFlows() const;                      //!< \return flows created
    uint32_t GetNFlowsCompleted() const;             //!< \return flows whose data all arrived
    Ptr<RoceNetDevice> GetPort(uint32_t port) const; //!< \return port \p port
    Ptr<RoceSwitch> GetSwitch(uint32_t node) const;  //!< \return switch logic (nullptr for hosts)
    Ptr<RdmaNic> GetNic(uint32_t node) const;        //!< \return NIC (nullptr for switches)
    Ptr<RdmaQueuePair> GetQueuePair(
        uint32_t flow) const; //!< \return sender state of a started flow

    std::vector<double> GetFlowStartTimes() const; //!< \return start, s (-1: not started)
    std::vector<double> GetFlowFinishTimes()
        const; //!< \return last byte received, s (-1: unfinished)
    std::vector<double> GetFlowAckTimes()
        const; //!< \return last byte acknowledged at sender, s (-1)
    std::vector<double> GetFlowBaseRtts() const; //!< \return base RTT of the flow's path, s
    /**
     * \return ideal FCT per flow, s: the flow's wire bytes at the path's slowest rate, plus one
     * frame's serialization at every other hop, plus the propagation delays (-1: not started).
     */
    std::vector<double> GetFlowIdealFcts() const;
    std::vector<uint32_t> GetFlowRetransmits() const; //!< \return go-back-N rewinds per flow
    std::vector<uint32_t> GetFlowCnps() const;        //!< \return CNPs sent by each flow's receiver
    std::vector<uint32_t> GetFlowAcks()
        const; //!< \return in-order ACKs sent by each flow's receiver
    std::vector<uint32_t> GetFlowFirstHops()
        const; //!< \return first switch port chosen (port id) per flow
    /**
     * Per-port counter: tx_bytes, tx_packets, tx_data_bytes, pfc_pause_sent, pfc_resume_sent,
     * pfc_pause_received, ecn_marks, drops_no_route, drops_lossy_buffer_full,
     * drops_headroom_overflow, drops_link_down.
     */
    std::vector<uint64_t> GetPortCounter(const std::string& name) const;
    std::vector<double> GetPortPausedSeconds() const;  //!< \return paused time per port, s
    std::vector<double> GetQueueSampleTimes() const;   //!< \return sample times, s
    std::vector<uint32_t> GetQueueSamplePorts() const; //!< \return sample ports
    std::vector<uint64_t> GetQueueSampleBytes() const; //!< \return sampled queue bytes
    std::vector<uint64_t> GetQueueSampleTxBytes()
        const; //!< \return sampled cumulative tx bytes of the port

protected:
    void DoDispose() override;

private:
    void NotifyFlowComplete(uint32_t flow); //!< fire the FlowComplete trace source

    std::vector<Ptr<Node>> m_nodes;
    std::vector<Ptr<RoceNode>> m_logic;
    std::vector<Ptr<RdmaNic>> m_nics;
    std::vector<Ptr<RoceSwitch>> m_switches;
    std::vector<uint64_t> m_buffers;
    std::vector<Ptr<RoceNetDevice>> m_ports;
    std::vector<uint32_t> m_portLocal;
    std::vector<double> m_portCap; //!< per port: send-rate cap, bit/s (0: none)
    std::vector<Ptr<RoceChannel>> m_channels;
    bool m_built{false};
    TracedCallback<uint32_t> m_flowComplete;
    Ptr<RdmaFlowTable> m_flowTable; //!< flows, their events and results
    Ptr<QueueSampler> m_sampler;    //!< queue samples
};

} // namespace ns3

#endif
