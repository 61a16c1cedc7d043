#ifndef HETERO_NS3_DAG_REPLAY_H
#define HETERO_NS3_DAG_REPLAY_H

#include "ns3/nstime.h"
#include "ns3/object.h"
#include "ns3/ptr.h"
#include "rdma-network.h"

#include <cstdint>
#include <vector>

namespace ns3
{

/**
 * \brief Replays an execution plan (a DAG of compute and flow tasks) inside ns-3's event loop.
 *
 * The plan arrives as arrays (struct of arrays, one row per task, dependencies in CSR form,
 * every dependency an earlier task). A task is released when its last dependency finishes.
 * A compute task then completes after its duration (a scheduled event: in-order GPU streams are
 * already folded into the dependencies by the planner). A flow task becomes an RDMA queue pair
 * of the RdmaNetwork from its source GPU's node to its destination GPU's node and completes when
 * its last byte is received. Nothing crosses into Python while the simulation runs.
 */
class DagReplay : public Object
{
public:
    /** \return the TypeId. */
    static TypeId GetTypeId();
    DagReplay();
    ~DagReplay() override;

    /** Use \p network for flow tasks (built, not yet run). */
    void SetNetwork(Ptr<RdmaNetwork> network);

    /**
     * Load the plan. Arrays have \p n rows; \p depPtr has n+1 entries indexing \p depIdx.
     * \p kind: 0 compute, 1 flow. \p gpu / \p dst: GPU indices; \p gpuNode maps a GPU index to
     * its RdmaNetwork node id (\p nGpus entries). \p durationSeconds: compute durations.
     */
    void SetTasks(uint32_t n,
                  const uint8_t* kind,
                  const int32_t* gpu,
                  const int32_t* dst,
                  const int64_t* bytes,
                  const double* durationSeconds,
                  const uint8_t* priority,
                  const int64_t* depPtr,
                  const int32_t* depIdx,
                  const uint32_t* gpuNode,
                  uint32_t nGpus);

    /**
     * Give each task a connection id (\p n rows, call after SetTasks): a flow task's queue pair
     * then takes its UDP source port (ECMP entropy) from its connection, so every flow of one
     * connection follows one path. Flow tasks need ids in 0..2^32-1; compute tasks' entries are
     * ignored. Without this call each flow hashes by its own RdmaNetwork flow id.
     */
    void SetConnections(const int64_t* connection, uint32_t n);

    /** Release every task without dependencies at the current simulation time. */
    void Start();

    uint32_t GetNTasks() const;                 //!< \return tasks in the plan
    uint32_t GetNCompleted() const;             //!< \return tasks finished so far
    uint32_t GetNFlowsStarted() const;          //!< \return flow tasks handed to the network
    std::vector<double> GetStartTimes() const;  //!< \return per task start, s (-1: not started)
    std::vector<double> GetFinishTimes() const; //!< \return per task finish, s (-1: unfinished)
    std::vector<int64_t> GetFlowIds() const;    //!< \return per task RdmaNetwork flow id (-1: none)

protected:
    void DoDispose() override;

private:
    void Release(uint32_t task);
    void Complete(uint32_t task);
    void OnFlowComplete(uint32_t flowId);

    Ptr<RdmaNetwork> m_network;
    std::vector<uint8_t> m_kind;
    std::vector<uint32_t> m_srcNode;
    std::vector<uint32_t> m_dstNode;
    std::vector<uint64_t> m_bytes;
    std::vector<Time> m_duration;
    std::vector<uint8_t> m_priority;
    std::vector<uint32_t> m_pending; //!< unfinished dependencies per task
    std::vector<uint64_t> m_succPtr; //!< successors, CSR
    std::vector<uint32_t> m_succIdx;
    std::vector<double> m_start;
    std::vector<double> m_finish;
    std::vector<uint32_t> m_connection; //!< ECMP key per task (empty: the flow id)
    std::vector<int64_t> m_flowOfTask;
    std::vector<uint32_t> m_taskOfFlow; //!< indexed by RdmaNetwork flow id
    uint32_t m_completed{0};
    uint32_t m_flowsStarted{0};
    bool m_callbackHooked{false};
};

} // namespace ns3

#endif
