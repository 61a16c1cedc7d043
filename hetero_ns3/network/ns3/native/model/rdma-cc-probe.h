#ifndef HETERO_NS3_RDMA_CC_PROBE_H
#define HETERO_NS3_RDMA_CC_PROBE_H

#include "ns3/object.h"
#include "ns3/ptr.h"
#include "rdma-congestion-ops.h"

#include <cstdint>
#include <vector>

namespace ns3
{

class RdmaNic;
class RoceSwitch;

/**
 * \brief Recorder of congestion-control state changes and signals, for tests and studies.
 *
 * Watch() a NIC: every queue pair it starts afterwards has its strategy's trace sources
 * (Rate, TargetRate, Alpha for DCQCN; Window for HPCC; any that exist) connected, plus the NIC's
 * CnpSent / CnpReceived. Watch() a switch: its EcnMark. Each event is one record
 * (time s, flow id, kind, value); the kinds are the Kind enum. Values: bit/s (rates), bytes
 * (window), alpha, or the egress port index (ECN marks; 0 for CNPs).
 */
class RdmaCcProbe : public Object
{
public:
    /** What a record is. */
    enum Kind : uint8_t
    {
        RATE = 0,         //!< DCQCN Rc / TIMELY / DCTCP rate, bit/s
        TARGET_RATE = 1,  //!< DCQCN Rt, bit/s
        ALPHA = 2,        //!< DCQCN / DCTCP alpha
        WINDOW = 3,       //!< HPCC / DCTCP window, bytes
        CNP_SENT = 4,     //!< receiver sent a CNP
        CNP_RECEIVED = 5, //!< sender got a CNP
        ECN_MARK = 6,     //!< switch CE-marked a frame (value: egress port index)
        RTT = 7,          //!< TIMELY RTT sample, s
    };

    /** \return the TypeId. */
    static TypeId GetTypeId();
    RdmaCcProbe();
    ~RdmaCcProbe() override;

    /** Record the strategies and CNPs of queue pairs started by \p nic from now on. */
    void WatchNic(Ptr<RdmaNic> nic);
    /** Record the ECN marks of \p sw. */
    void WatchSwitch(Ptr<RoceSwitch> sw);

    /** \return number of records. */
    uint32_t GetN() const;
    std::vector<double> GetTimes() const;   //!< \return record times, s
    std::vector<uint32_t> GetFlows() const; //!< \return record flow ids
    std::vector<uint8_t> GetKinds() const;  //!< \return record kinds (Kind)
    std::vector<double> GetValues() const;  //!< \return record values

private:
    void Record(uint32_t flow, Kind kind, double value);
    void OnCcCreated(uint32_t flow, Ptr<RdmaCongestionOps> cc);

    std::vector<double> m_time;
    std::vector<uint32_t> m_flow;
    std::vector<uint8_t> m_kind;
    std::vector<double> m_value;
};

} // namespace ns3

#endif
