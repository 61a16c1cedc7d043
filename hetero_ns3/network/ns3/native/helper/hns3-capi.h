#ifndef HETERO_NS3_CAPI_H
#define HETERO_NS3_CAPI_H

/*
 * A small C ABI over RdmaNetwork and DagReplay, for callers that load the module with
 * dlopen/ctypes instead of cppyy (no ns-3 headers are parsed at run time).
 *
 * Conventions: handles are opaque pointers owned by the caller (free with hns3_*_free);
 * times are seconds (double) converted with ns3::Seconds exactly as the C++ API does; arrays
 * are caller-owned and only read during the call. Functions returning int give 0 on success and
 * -1 on failure, with hns3_last_error() describing it. hns3_*_read(..., name, out, capacity)
 * copies the result array called `name` into `out` when `out` is non-null and `capacity` is large
 * enough, and returns its length (-1 for an unknown name). The ns-3 simulator is a process-wide
 * singleton: one network (and one replay) at a time, each run ended by hns3_simulator_destroy().
 */

#include <stdint.h>

#ifdef __cplusplus
extern "C"
{
#endif

    typedef struct Hns3Network Hns3Network;
    typedef struct Hns3Replay Hns3Replay;

    /** ABI version: bumped whenever a signature below changes. */
    int hns3_abi_version(void);
    /** Message of the last failed call in this thread ("" if none). */
    const char* hns3_last_error(void);

    /** Config::SetDefault(name, StringValue(value)); -1 if the attribute or value is not accepted.
     */
    int hns3_set_default(const char* name, const char* value);
    /** 1 if "ns3::Type::Attribute" names an existing attribute, else 0. */
    int hns3_attribute_exists(const char* name);
    /** RngSeedManager::SetSeed / SetRun. */
    void hns3_set_seed(uint32_t seed, uint64_t run);
    /** Simulator::SetScheduler with a scheduler TypeId name (e.g. ns3::PriorityQueueScheduler). */
    int hns3_set_scheduler(const char* typeId);

    /** Simulator::Stop(Seconds(duration)) then Simulator::Run(). */
    void hns3_simulator_run_for(double durationSeconds);
    double hns3_simulator_now(void);           //!< Simulator::Now(), s
    uint64_t hns3_simulator_event_count(void); //!< Simulator::GetEventCount()
    void hns3_simulator_destroy(void);         //!< Simulator::Destroy()
    /**
     * Events of the current network by kind (RoceProfile, zeroed when a network is made), then the
     * DATA frames made by NICs: copies hns3_profile_read(NULL, 0) values into `out`.
     */
    int64_t hns3_profile_read(uint64_t* out, int64_t capacity);
    /** Name of entry `kind` of hns3_profile_read (snake_case; "" past the end). */
    const char* hns3_profile_name(uint32_t kind);

    Hns3Network* hns3_network_new(void);
    /** Dispose the network and release the handle. */
    void hns3_network_free(Hns3Network* net);
    int hns3_network_add_nodes(Hns3Network* net,
                               const uint8_t* isHost,
                               const uint64_t* bufferBytes,
                               uint32_t n);
    int hns3_network_add_links(Hns3Network* net,
                               const uint32_t* a,
                               const uint32_t* b,
                               const double* rateBps,
                               const double* delaySeconds,
                               const uint32_t* segment,
                               uint32_t n);
    int hns3_network_cap_port_rates(Hns3Network* net,
                                    const uint32_t* port,
                                    const double* rateBps,
                                    uint32_t n);
    int hns3_network_add_routes(Hns3Network* net,
                                const uint32_t* node,
                                const uint32_t* dst,
                                const uint32_t* link,
                                uint64_t n);
    int hns3_network_build(Hns3Network* net);
    int hns3_network_add_flows(Hns3Network* net,
                               const uint32_t* src,
                               const uint32_t* dst,
                               const uint64_t* bytes,
                               const uint8_t* priority,
                               const double* startSeconds,
                               uint32_t n);
    int hns3_network_sample_queues(Hns3Network* net,
                                   const uint32_t* ports,
                                   uint32_t n,
                                   double intervalSeconds,
                                   double untilSeconds);
    int hns3_network_set_link_rate(Hns3Network* net,
                                   uint32_t link,
                                   double rateBps,
                                   double atSeconds);
    int hns3_network_set_link_up(Hns3Network* net, uint32_t link, int up, double atSeconds);
    /** RdmaNetwork::Run(Seconds(stop)): until no events are left, or until `stop` when > 0. */
    int hns3_network_run(Hns3Network* net, double stopSeconds);
    uint32_t hns3_network_count(const Hns3Network* net,
                                const char* what); //!< nodes, links, ports, flows, completed
    /**
     * Result arrays: flow_start, flow_finish, flow_ack, flow_base_rtt, flow_ideal (double);
     * flow_retransmits, flow_cnps, flow_acks, flow_first_hops (uint32); port_paused (double);
     * port:<counter> (uint64, a counter name of RdmaNetwork::GetPortCounter); sample_time (double),
     * sample_port (uint32), sample_bytes, sample_tx_bytes (uint64).
     */
    int64_t hns3_network_read(const Hns3Network* net,
                              const char* name,
                              void* out,
                              int64_t capacity);

    Hns3Replay* hns3_replay_new(Hns3Network* net);
    void hns3_replay_free(Hns3Replay* replay);
    /** DagReplay::SetTasks (see dag-replay.h). */
    int hns3_replay_set_tasks(Hns3Replay* replay,
                              uint32_t n,
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
    int hns3_replay_set_connections(Hns3Replay* replay, const int64_t* connection, uint32_t n);
    int hns3_replay_start(Hns3Replay* replay);
    uint32_t hns3_replay_completed(const Hns3Replay* replay);
    /** Result arrays: start, finish (double, -1 where not reached), flow_ids (int64, -1: none). */
    int64_t hns3_replay_read(const Hns3Replay* replay,
                             const char* name,
                             void* out,
                             int64_t capacity);

#ifdef __cplusplus
}
#endif

#endif
