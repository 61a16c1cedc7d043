#ifndef HETERO_NS3_ROCE_PROFILE_H
#define HETERO_NS3_ROCE_PROFILE_H

#include <cstdint>

namespace ns3
{

/** \brief Kinds of simulator events the module runs, counted by RoceProfile. */
enum RoceEventKind : uint32_t
{
    EV_DATA_HOP = 0,     //!< a DATA frame arrives at the far end of a link
    EV_ACK_HOP,          //!< an ACK frame arrives
    EV_NACK_HOP,         //!< a NACK frame arrives
    EV_CNP_HOP,          //!< a CNP frame arrives
    EV_PFC_HOP,          //!< a PFC PAUSE / RESUME frame arrives
    EV_TX_COMPLETE,      //!< a port finishes serializing a frame with another waiting
    EV_PACING_WAKE,      //!< a host port wakes up for a paced queue pair
    EV_PFC_RESUME_TIMER, //!< a PAUSE runs out at the paused port (no RESUME came)
    EV_PFC_REFRESH,      //!< a switch refreshes a PAUSE it keeps asserting
    EV_RTO,              //!< a queue pair's retransmit timer fires
    EV_TASK_DONE,        //!< DagReplay: a task completes (compute end, flow end, barrier)
    EV_FLOW_START,       //!< RdmaNetwork: a flow added with a start time starts
    EV_SAMPLE,           //!< RdmaNetwork: a queue sample
    EV_DCQCN_ALPHA,      //!< RdmaDcqcn: an alpha update timer (LazyAlpha off)
    EV_DCQCN_DECREASE,   //!< RdmaDcqcn: a rate-decrease check or deferred cut
    EV_DCQCN_INCREASE,   //!< RdmaDcqcn: a rate-increase timer
    EV_KIND_COUNT,
};

/**
 * \brief Process-wide counters of the module's events by kind, and of DATA frames sent by NICs.
 *
 * Always on: one increment per event (the events themselves cost hundreds of nanoseconds). The
 * simulator is a process-wide singleton and runs one network at a time, so the counters are
 * plain globals, reset when a network is made (RdmaNetwork's constructor). Events the module does
 * not count here (other congestion controls' timers, link faults) are the simulator's total minus
 * the sum.
 */
class RoceProfile
{
public:
    /** Count one event of \p kind. */
    static void
    Count(RoceEventKind kind)
    {
        ++s_events[kind];
    }

    /** Count one DATA frame made by a NIC (first transmission or retransmission). */
    static void
    CountDataFrame()
    {
        ++s_dataFrames;
    }

    /** \return events of \p kind so far. */
    static uint64_t
    Get(uint32_t kind)
    {
        return kind < EV_KIND_COUNT ? s_events[kind] : 0;
    }

    /** \return DATA frames made by NICs so far. */
    static uint64_t
    GetDataFrames()
    {
        return s_dataFrames;
    }

    /** Zero every counter. */
    static void
    Reset()
    {
        for (auto& c : s_events)
        {
            c = 0;
        }
        s_dataFrames = 0;
    }

    /** \return the snake_case name of \p kind ("" when out of range). */
    static const char*
    Name(uint32_t kind)
    {
        static const char* const names[EV_KIND_COUNT] = {
            "data_hop",
            "ack_hop",
            "nack_hop",
            "cnp_hop",
            "pfc_hop",
            "tx_complete",
            "pacing_wake",
            "pfc_resume_timer",
            "pfc_refresh",
            "rto",
            "task_done",
            "flow_start",
            "sample",
            "dcqcn_alpha",
            "dcqcn_decrease",
            "dcqcn_increase",
        };
        return kind < EV_KIND_COUNT ? names[kind] : "";
    }

private:
    static inline uint64_t s_events[EV_KIND_COUNT] = {}; //!< events by kind
    static inline uint64_t s_dataFrames = 0;             //!< DATA frames made by NICs
};

} // namespace ns3

#endif
