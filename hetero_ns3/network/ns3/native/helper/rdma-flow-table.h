#ifndef HETERO_NS3_RDMA_FLOW_TABLE_H
#define HETERO_NS3_RDMA_FLOW_TABLE_H

#include "ns3/callback.h"
#include "ns3/node.h"
#include "ns3/nstime.h"
#include "ns3/object.h"
#include "rdma-nic.h"
#include "rdma-queue-pair.h"
#include "roce-net-device.h"
#include "roce-node.h"

#include <cstdint>
#include <vector>

namespace ns3
{

/**
 * \brief The flows of one RdmaNetwork: their records, start events, completion callbacks and
 * per-flow results.
 *
 * Owned by RdmaNetwork, which forwards its flow API here. It reads the network's nodes, node
 * logic, NICs and ports (Bind) to start queue pairs and to walk a flow's path for its base RTT,
 * ideal FCT and first switch port; it never changes them.
 */
class RdmaFlowTable : public Object
{
public:
    /** \return the TypeId. */
    static TypeId GetTypeId();
    RdmaFlowTable();
    ~RdmaFlowTable() override;

    /**
     * \brief Read the network through these vectors (owned by the caller, who outlives this).
     * \param nodes ns-3 nodes, by node id
     * \param logic host NIC or switch logic, by node id
     * \param nics NICs, by node id (nullptr for switches)
     * \param ports ports, by port id
     */
    void Bind(const std::vector<Ptr<Node>>* nodes,
              const std::vector<Ptr<RoceNode>>* logic,
              const std::vector<Ptr<RdmaNic>>* nics,
              const std::vector<Ptr<RoceNetDevice>>* ports);
    /** \brief Run \p hook(flowId) first when a flow completes (the owner's trace source). */
    void SetCompleteHook(Callback<void, uint32_t> hook);
    /** \brief Let the NICs report receive / send completion here; call once, at Build. */
    void ConnectNics();
    /** \brief Forget every flow and callback, drop queue pairs. */
    void Clear();

    /** \brief Make room for \p n flows in all (no reallocation while they are created). */
    void Reserve(uint32_t n);
    /** \brief Create a flow (see RdmaNetwork::CreateFlow). \return its id (dense, from 0). */
    uint32_t CreateFlow(
        uint32_t src, uint32_t dst, uint64_t bytes, uint8_t priority, uint32_t ecmpKey);
    /** \return the RoCEv2 UDP source port (49152..65535) of a queue pair with ECMP key \p key. */
    static uint16_t SourcePortOf(uint32_t key);
    /** \brief Start flow \p id at the current simulation time. */
    void StartFlow(uint32_t id);
    /** \brief Start flow \p id at absolute simulation time \p at. */
    void ScheduleFlow(uint32_t id, Time at);
    /** \brief Run \p cb(flowId) whenever a flow's last byte reaches its destination. */
    void AddFlowCompleteCallback(Callback<void, uint32_t> cb);

    uint32_t GetNFlows() const;          //!< \return flows created
    uint32_t GetNFlowsCompleted() const; //!< \return flows whose data all arrived
    /** \return sender state of a flow while it sends (null before its start and once its last
     * byte is acknowledged: the table keeps only the flow's results then, see OnSendComplete). */
    Ptr<RdmaQueuePair> GetQueuePair(uint32_t flow) const;
    std::vector<double> GetFlowStartTimes() const;    //!< \return start, s (-1: not started)
    std::vector<double> GetFlowFinishTimes() const;   //!< \return last byte received, s (-1)
    std::vector<double> GetFlowAckTimes() const;      //!< \return last byte acknowledged, s (-1)
    std::vector<double> GetFlowBaseRtts() const;      //!< \return base RTT of the flow's path, s
    std::vector<double> GetFlowIdealFcts() const;     //!< \return ideal FCT, s (-1: not started)
    std::vector<uint32_t> GetFlowRetransmits() const; //!< \return go-back-N rewinds per flow
    std::vector<uint32_t> GetFlowCnps() const;        //!< \return CNPs sent by each receiver
    std::vector<uint32_t> GetFlowAcks() const;        //!< \return in-order ACKs sent by receivers
    std::vector<uint32_t> GetFlowFirstHops() const;   //!< \return first switch port per flow

protected:
    void DoDispose() override;

private:
    /** One flow: its request, its times, its queue pair while it sends (80 bytes). */
    struct FlowRecord
    {
        uint32_t src;            //!< source host
        uint32_t dst;            //!< destination host
        uint64_t bytes;          //!< payload, bytes
        uint32_t ecmpKey{0};     //!< hashed into the UDP source port
        uint32_t retransmits{0}; //!< go-back-N rewinds, copied from the queue pair at the end
        double start{-1};        //!< start time, s
        double finish{-1};       //!< last byte received, s
        double ackDone{-1};      //!< last byte acknowledged, s
        double ideal{-1};        //!< ideal FCT, s
        double baseRtt{-1};      //!< base RTT of the path, s (-1: not started)
        Ptr<RdmaQueuePair> qp;   //!< sender state, from start until the last byte is acknowledged
        uint8_t priority;        //!< priority class 0..7
        bool started{false};     //!< StartFlow ran
    };

    void Complete(uint32_t flow);          //!< count, trace and call back a completed flow
    void OnReceiveComplete(uint32_t flow); //!< NIC: last byte of \p flow received
    /** NIC: last byte of \p flow acknowledged; keep its retransmit count, release its queue pair.
     */
    void OnSendComplete(uint32_t flow);
    void StartScheduledFlow(uint32_t id); //!< StartFlow from a scheduled event (counted)
    /** Walk the path of a probe packet: base RTT; first switch port and ideal FCT by pointer. */
    Time ComputeBaseRtt(uint32_t src,
                        uint32_t dst,
                        uint16_t sport,
                        uint64_t bytes,
                        uint32_t* firstPort,
                        double* ideal) const;

    const std::vector<Ptr<Node>>* m_nodes{nullptr};          //!< network nodes
    const std::vector<Ptr<RoceNode>>* m_logic{nullptr};      //!< node logic
    const std::vector<Ptr<RdmaNic>>* m_nics{nullptr};        //!< NICs
    const std::vector<Ptr<RoceNetDevice>>* m_ports{nullptr}; //!< ports
    std::vector<FlowRecord> m_flows;                         //!< by flow id
    uint32_t m_completed{0};                                 //!< flows received in full
    Callback<void, uint32_t> m_completeHook;                 //!< owner's trace, run first
    std::vector<Callback<void, uint32_t>> m_callbacks;       //!< user completion callbacks
};

} // namespace ns3

#endif /* HETERO_NS3_RDMA_FLOW_TABLE_H */
