#ifndef HETERO_NS3_QUEUE_SAMPLER_H
#define HETERO_NS3_QUEUE_SAMPLER_H

#include "ns3/nstime.h"
#include "ns3/object.h"
#include "rdma-flow-table.h"
#include "roce-net-device.h"

#include <cstdint>
#include <vector>

namespace ns3
{

/**
 * \brief Periodic samples of the queue bytes and cumulative tx bytes of chosen ports.
 *
 * Owned by RdmaNetwork. A sample is one row per sampled port (time, port, queue bytes, tx
 * bytes); sampling continues until a fixed time, or while the flow table has unfinished flows.
 */
class QueueSampler : public Object
{
public:
    /** \return the TypeId. */
    static TypeId GetTypeId();
    QueueSampler();
    ~QueueSampler() override;

    /**
     * \brief Read these ports and this flow table (owned by the caller, who outlives this).
     * \param ports ports, by port id
     * \param flows the network's flows (for "while flows are unfinished")
     */
    void Bind(const std::vector<Ptr<RoceNetDevice>>* ports, const RdmaFlowTable* flows);
    /** \brief Sample \p ports every \p interval until \p until (zero: while flows are
     * unfinished). */
    void Start(const uint32_t* ports, uint32_t n, Time interval, Time until);

    std::vector<double> GetTimes() const;     //!< \return sample times, s
    std::vector<uint32_t> GetPorts() const;   //!< \return sample ports
    std::vector<uint64_t> GetBytes() const;   //!< \return sampled queue bytes
    std::vector<uint64_t> GetTxBytes() const; //!< \return sampled cumulative tx bytes

protected:
    void DoDispose() override;

private:
    void Sample(); //!< take one sample, schedule the next

    const std::vector<Ptr<RoceNetDevice>>* m_ports{nullptr}; //!< network ports
    const RdmaFlowTable* m_flows{nullptr};                   //!< network flows
    std::vector<uint32_t> m_samplePorts;                     //!< ports to sample
    Time m_interval;                                         //!< sampling period
    Time m_until;                                            //!< last sample time (0: flows)
    std::vector<double> m_t;                                 //!< sample times, s
    std::vector<uint32_t> m_p;                               //!< sampled ports
    std::vector<uint64_t> m_b;                               //!< queue bytes
    std::vector<uint64_t> m_tx;                              //!< cumulative tx bytes
};

} // namespace ns3

#endif /* HETERO_NS3_QUEUE_SAMPLER_H */
