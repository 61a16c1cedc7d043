#include "hns3-capi.h"

#include "dag-replay.h"
#include "ns3/config.h"
#include "ns3/log.h"
#include "ns3/object-factory.h"
#include "ns3/rng-seed-manager.h"
#include "ns3/simulator.h"
#include "ns3/string.h"
#include "ns3/type-id.h"
#include "rdma-network.h"
#include "roce-profile.h"

#include <cstring>
#include <exception>
#include <string>
#include <vector>

using namespace ns3;

NS_LOG_COMPONENT_DEFINE("Hns3Capi");

struct Hns3Network
{
    Ptr<RdmaNetwork> net;
};

struct Hns3Replay
{
    Ptr<DagReplay> replay;
};

namespace
{
constexpr int kAbiVersion = 2;
thread_local std::string g_error;

int
Fail(const std::string& what)
{
    g_error = what;
    NS_LOG_DEBUG("C ABI call failed: " << what);
    return -1;
}

/** Run \p body, turning a C++ exception into -1 and a message. */
template<typename F>
int
Guard(const char* where, F&& body)
{
    try
    {
        body();
        g_error.clear();
        return 0;
    }
    catch (const std::exception& e)
    {
        return Fail(std::string(where) + ": " + e.what());
    }
    catch (...)
    {
        return Fail(std::string(where) + ": unknown C++ exception");
    }
}

template<typename T>
int64_t
CopyOut(const std::vector<T>& v, void* out, int64_t capacity)
{
    auto n = static_cast<int64_t>(v.size());
    if (out != nullptr && capacity >= n && n > 0)
    {
        std::memcpy(out, v.data(), v.size() * sizeof(T));
    }
    return n;
}
} // namespace

extern "C"
{
    int
    hns3_abi_version(void)
    {
        return kAbiVersion;
    }

    const char*
    hns3_last_error(void)
    {
        return g_error.c_str();
    }

    int
    hns3_set_default(const char* name, const char* value)
    {
        NS_LOG_FUNCTION(name << value);
        if (!Config::SetDefaultFailSafe(name, StringValue(value)))
        {
            return Fail(std::string("Config::SetDefault(") + name + ", " + value +
                        "): no such attribute, or the value is not accepted");
        }
        return 0;
    }

    int
    hns3_attribute_exists(const char* name)
    {
        std::string full(name);
        auto sep = full.rfind("::");
        if (sep == std::string::npos || sep == 0)
        {
            return 0;
        }
        TypeId tid;
        if (!TypeId::LookupByNameFailSafe(full.substr(0, sep), &tid))
        {
            return 0;
        }
        TypeId::AttributeInformation info;
        return tid.LookupAttributeByName(full.substr(sep + 2), &info) ? 1 : 0;
    }

    void
    hns3_set_seed(uint32_t seed, uint64_t run)
    {
        NS_LOG_FUNCTION(seed << run);
        RngSeedManager::SetSeed(seed);
        RngSeedManager::SetRun(run);
    }

    int
    hns3_set_scheduler(const char* typeId)
    {
        NS_LOG_FUNCTION(typeId);
        TypeId tid;
        if (!TypeId::LookupByNameFailSafe(typeId, &tid))
        {
            return Fail(std::string("no scheduler TypeId ") + typeId);
        }
        ObjectFactory factory;
        factory.SetTypeId(tid);
        Simulator::SetScheduler(factory);
        return 0;
    }

    void
    hns3_simulator_run_for(double durationSeconds)
    {
        NS_LOG_FUNCTION(durationSeconds);
        Simulator::Stop(Seconds(durationSeconds));
        Simulator::Run();
    }

    double
    hns3_simulator_now(void)
    {
        return Simulator::Now().GetSeconds();
    }

    uint64_t
    hns3_simulator_event_count(void)
    {
        return Simulator::GetEventCount();
    }

    int64_t
    hns3_profile_read(uint64_t* out, int64_t capacity)
    {
        int64_t n = EV_KIND_COUNT + 1;
        if (out != nullptr && capacity >= n)
        {
            for (uint32_t k = 0; k < EV_KIND_COUNT; ++k)
            {
                out[k] = RoceProfile::Get(k);
            }
            out[EV_KIND_COUNT] = RoceProfile::GetDataFrames();
        }
        return n;
    }

    const char*
    hns3_profile_name(uint32_t kind)
    {
        return kind < EV_KIND_COUNT ? RoceProfile::Name(kind)
                                    : (kind == EV_KIND_COUNT ? "data_frames" : "");
    }

    void
    hns3_simulator_destroy(void)
    {
        NS_LOG_FUNCTION_NOARGS();
        Simulator::Destroy();
    }

    Hns3Network*
    hns3_network_new(void)
    {
        return new Hns3Network{CreateObject<RdmaNetwork>()};
    }

    void
    hns3_network_free(Hns3Network* net)
    {
        if (net != nullptr)
        {
            net->net->Dispose();
            delete net;
        }
    }

    int
    hns3_network_add_nodes(Hns3Network* net,
                           const uint8_t* isHost,
                           const uint64_t* bufferBytes,
                           uint32_t n)
    {
        return Guard("AddNodes", [&] { net->net->AddNodes(isHost, bufferBytes, n); });
    }

    int
    hns3_network_add_links(Hns3Network* net,
                           const uint32_t* a,
                           const uint32_t* b,
                           const double* rateBps,
                           const double* delaySeconds,
                           const uint32_t* segment,
                           uint32_t n)
    {
        return Guard("AddLinks",
                     [&] { net->net->AddLinks(a, b, rateBps, delaySeconds, segment, n); });
    }

    int
    hns3_network_cap_port_rates(Hns3Network* net,
                                const uint32_t* port,
                                const double* rateBps,
                                uint32_t n)
    {
        return Guard("CapPortRates", [&] { net->net->CapPortRates(port, rateBps, n); });
    }

    int
    hns3_network_add_routes(Hns3Network* net,
                            const uint32_t* node,
                            const uint32_t* dst,
                            const uint32_t* link,
                            uint64_t n)
    {
        return Guard("AddRoutes", [&] { net->net->AddRoutes(node, dst, link, n); });
    }

    int
    hns3_network_build(Hns3Network* net)
    {
        return Guard("Build", [&] { net->net->Build(); });
    }

    int
    hns3_network_add_flows(Hns3Network* net,
                           const uint32_t* src,
                           const uint32_t* dst,
                           const uint64_t* bytes,
                           const uint8_t* priority,
                           const double* startSeconds,
                           uint32_t n)
    {
        return Guard("AddFlows",
                     [&] { net->net->AddFlows(src, dst, bytes, priority, startSeconds, n); });
    }

    int
    hns3_network_sample_queues(Hns3Network* net,
                               const uint32_t* ports,
                               uint32_t n,
                               double intervalSeconds,
                               double untilSeconds)
    {
        return Guard("SampleQueues", [&] {
            net->net->SampleQueues(ports, n, Seconds(intervalSeconds), Seconds(untilSeconds));
        });
    }

    int
    hns3_network_set_link_rate(Hns3Network* net, uint32_t link, double rateBps, double atSeconds)
    {
        return Guard("SetLinkRate",
                     [&] { net->net->SetLinkRate(link, rateBps, Seconds(atSeconds)); });
    }

    int
    hns3_network_set_link_up(Hns3Network* net, uint32_t link, int up, double atSeconds)
    {
        return Guard("SetLinkUp", [&] { net->net->SetLinkUp(link, up != 0, Seconds(atSeconds)); });
    }

    int
    hns3_network_run(Hns3Network* net, double stopSeconds)
    {
        NS_LOG_FUNCTION(net << stopSeconds);
        return Guard("Run", [&] { net->net->Run(Seconds(stopSeconds)); });
    }

    uint32_t
    hns3_network_count(const Hns3Network* net, const char* what)
    {
        const RdmaNetwork& n = *net->net;
        std::string w(what);
        if (w == "nodes")
        {
            return n.GetNNodes();
        }
        if (w == "links")
        {
            return n.GetNLinks();
        }
        if (w == "ports")
        {
            return n.GetNPorts();
        }
        if (w == "flows")
        {
            return n.GetNFlows();
        }
        if (w == "completed")
        {
            return n.GetNFlowsCompleted();
        }
        return 0;
    }

    int64_t
    hns3_network_read(const Hns3Network* net, const char* name, void* out, int64_t capacity)
    {
        const RdmaNetwork& n = *net->net;
        std::string w(name);
        if (w == "flow_start")
        {
            return CopyOut(n.GetFlowStartTimes(), out, capacity);
        }
        if (w == "flow_finish")
        {
            return CopyOut(n.GetFlowFinishTimes(), out, capacity);
        }
        if (w == "flow_ack")
        {
            return CopyOut(n.GetFlowAckTimes(), out, capacity);
        }
        if (w == "flow_base_rtt")
        {
            return CopyOut(n.GetFlowBaseRtts(), out, capacity);
        }
        if (w == "flow_ideal")
        {
            return CopyOut(n.GetFlowIdealFcts(), out, capacity);
        }
        if (w == "flow_retransmits")
        {
            return CopyOut(n.GetFlowRetransmits(), out, capacity);
        }
        if (w == "flow_cnps")
        {
            return CopyOut(n.GetFlowCnps(), out, capacity);
        }
        if (w == "flow_acks")
        {
            return CopyOut(n.GetFlowAcks(), out, capacity);
        }
        if (w == "flow_first_hops")
        {
            return CopyOut(n.GetFlowFirstHops(), out, capacity);
        }
        if (w == "port_paused")
        {
            return CopyOut(n.GetPortPausedSeconds(), out, capacity);
        }
        if (w.rfind("port:", 0) == 0)
        {
            return CopyOut(n.GetPortCounter(w.substr(5)), out, capacity);
        }
        if (w == "sample_time")
        {
            return CopyOut(n.GetQueueSampleTimes(), out, capacity);
        }
        if (w == "sample_port")
        {
            return CopyOut(n.GetQueueSamplePorts(), out, capacity);
        }
        if (w == "sample_bytes")
        {
            return CopyOut(n.GetQueueSampleBytes(), out, capacity);
        }
        if (w == "sample_tx_bytes")
        {
            return CopyOut(n.GetQueueSampleTxBytes(), out, capacity);
        }
        Fail("hns3_network_read: unknown array " + w);
        return -1;
    }

    Hns3Replay*
    hns3_replay_new(Hns3Network* net)
    {
        auto* r = new Hns3Replay{CreateObject<DagReplay>()};
        if (net != nullptr)
        {
            r->replay->SetNetwork(net->net);
        }
        return r;
    }

    void
    hns3_replay_free(Hns3Replay* replay)
    {
        if (replay != nullptr)
        {
            replay->replay->Dispose();
            delete replay;
        }
    }

    int
    hns3_replay_set_tasks(Hns3Replay* replay,
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
                          uint32_t nGpus)
    {
        return Guard("SetTasks", [&] {
            replay->replay->SetTasks(n,
                                     kind,
                                     gpu,
                                     dst,
                                     bytes,
                                     durationSeconds,
                                     priority,
                                     depPtr,
                                     depIdx,
                                     gpuNode,
                                     nGpus);
        });
    }

    int
    hns3_replay_set_connections(Hns3Replay* replay, const int64_t* connection, uint32_t n)
    {
        return Guard("SetConnections", [&] { replay->replay->SetConnections(connection, n); });
    }

    int
    hns3_replay_start(Hns3Replay* replay)
    {
        NS_LOG_FUNCTION(replay);
        return Guard("Start", [&] { replay->replay->Start(); });
    }

    uint32_t
    hns3_replay_completed(const Hns3Replay* replay)
    {
        return replay->replay->GetNCompleted();
    }

    int64_t
    hns3_replay_read(const Hns3Replay* replay, const char* name, void* out, int64_t capacity)
    {
        const DagReplay& r = *replay->replay;
        std::string w(name);
        if (w == "start")
        {
            return CopyOut(r.GetStartTimes(), out, capacity);
        }
        if (w == "finish")
        {
            return CopyOut(r.GetFinishTimes(), out, capacity);
        }
        if (w == "flow_ids")
        {
            return CopyOut(r.GetFlowIds(), out, capacity);
        }
        Fail("hns3_replay_read: unknown array " + w);
        return -1;
    }
}
