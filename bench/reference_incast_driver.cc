// The 8-to-1 incast of issue 14 (docs/roce.md, "The 8-to-1 incast", "Reference implementation") as
// a scratch program of the reference RDMA model: the HPCC artifact's rdma-hw / qbb-net-device /
// switch-node / switch-mmu as carried by aliyun/ns-3-alibabacloud (SimAI) at c2bfbf4. Our own code:
// it only drives the reference's classes the way its scratch/third.cc configures them from the
// artifact's `run.py --cc dcqcn` (CC_MODE 1, alpha period 1 us, decrease check 4 us, timer 300 us,
// F = 1, g = 1/256, R_AI / R_HAI 5 / 50 Mb/s x bw/25, min rate 1 Gb/s, clamp off, ACK per packet,
// ACKs high priority, ECN Kmin/Kmax 100/400 KB x bw/25 with Pmax 0.2, dynamic PFC alpha 1/8, buffer
// 16 x bw/50 MB), on a star of one switch and N+1 hosts (100 Gb/s, 1 us links). Built and run by
// bench/reference_incast.sh; never part of hetero_ns3's own build.
// --cc=hp configures it as `run.py --cc hp --bw 100` does instead (CC_MODE 3, eta 0.95 (--utgt),
// MI_THRESH 0 (--mi; third.cc's own default is 5), RATE_AI 10 x bw/25 = 40 Mb/s (--hpai), INT_MULTI
// bw/25, HAS_WIN 1 with the largest BDP, VAR_WIN 1, FAST_REACT 1, MULTI_RATE 0, SAMPLE_FEEDBACK 0,
// GLOBAL_T 1, ACKs in the data class (ACK_HIGH_PRIO 0)); --cc=none is CC_MODE 1 with ECN marking
// off (no CNP, so every QP stays at line rate and only PFC holds the queue). --buffer-kib sets the
// switch buffer (run.py: 16 x bw/50 MB); PFC is always on, with third.cc's dynamic threshold.
//
// Usage: refcc-incast [--payload=1000] [--senders=8] [--size=10000000] [--seed=1] [--out=PREFIX]
//                     [--cc=dcqcn|hp|none] [--utgt=0.95] [--mi=0] [--hpai=40] [--buffer-kib=32768]
//                     [--jitter-ns=0] [--int-multi=0]
// Prints one line per flow and a `summary` line (the keys of bench/reference_incast.py); with
// --out, PREFIX.rates.csv (per QP: rate, target rate, alpha) and PREFIX.queue.csv (bottleneck queue
// bytes and bytes sent) hold samples every 1 us. Ideal = the wire bytes the bottleneck port sent /
// line rate.
#include "ns3/applications-module.h"
#include "ns3/core-module.h"
#include "ns3/internet-module.h"
#include "ns3/network-module.h"
#include "ns3/point-to-point-module.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <ns3/qbb-helper.h>
#include <ns3/rdma-driver.h>
#include <ns3/rdma-hw.h>
#include <ns3/rdma-queue-pair.h>
#include <ns3/switch-node.h>
#include <vector>

using namespace ns3;

namespace
{

struct Setup
{
    uint32_t payload = 1000; // PACKET_PAYLOAD_SIZE (run.py: 1000)
    uint32_t senders = 8;
    uint64_t size = 10000000;
    uint32_t seed = 1;
    std::string out = "";
    double rateGbps = 100;          // link rate
    double delayUs = 1;             // one-way link delay
    uint32_t bufferKiB = 32 * 1024; // run.py: BUFFER_SIZE = 16 * bw / 50 MB -> 32 at 100 Gb/s
    std::string cc = "dcqcn";       // dcqcn (run.py --cc dcqcn), hp (run.py --cc hp), none
    double utgt = 0.95;             // run.py --utgt 95
    uint32_t mi = 0;                // run.py --mi (default 0)
    uint64_t jitterNs = 0;          // flows start at a seed-drawn offset in [0, jitterNs)
    uint32_t intMulti = 0;          // INT_MULTI (0: bw / 25, as run.py)
    double hpaiMbps = 0;            // run.py --hpai (0: 10 x bw / 25)
};

struct Stats
{
    std::vector<Ptr<Node>> hosts;
    Ptr<SwitchNode> sw;
    uint32_t bottleneckIf = 0;
    std::map<uint16_t, double> fct;       // by sport
    std::map<uint16_t, double> finish;    // by sport, absolute (s)
    std::map<uint16_t, uint32_t> cnps;    // CNP-flagged ACKs per QP
    std::map<uint16_t, uint32_t> cuts;    // rate decreases seen in the 1 us samples
    std::map<uint16_t, double> floorTime; // seconds at the minimum rate
    std::map<uint16_t, uint64_t> lastRate;
    uint64_t peakQueue = 0;
    std::vector<uint64_t> queueSamples;
    uint64_t lastTx = 0;
    FILE* rates = nullptr;
    FILE* queue = nullptr;
    uint64_t minRate = 0;
} g;

Ipv4Address
HostIp(uint32_t id)
{
    return Ipv4Address(0x0b000001 + ((id / 256) * 0x00010000) + ((id % 256) * 0x00000100));
}

void
OnQpDone(Ptr<RdmaQueuePair> q)
{
    double fct = (Simulator::Now() - q->startTime).GetSeconds();
    g.fct[q->sport] = fct;
    g.finish[q->sport] = Simulator::Now().GetSeconds();
}

void
Noop()
{
}

uint64_t g_txBytes =
    0; // bytes the bottleneck port finished sending (all DATA: ACKs go the other way)
uint64_t g_txFrames = 0;
uint64_t g_pfcPauses = 0;                // PAUSE frames the hosts received from the switch
std::map<uint32_t, double> g_pauseStart; // host -> time of the PAUSE that holds it (s)
double g_pausedTime = 0;                 // seconds hosts spent paused, summed over hosts

void
OnPfc(uint32_t host, uint32_t type)
{
    double now = Simulator::Now().GetSeconds();
    if (type == 1)
    {
        g_pfcPauses++;
        if (g_pauseStart.find(host) == g_pauseStart.end())
        {
            g_pauseStart[host] = now;
        }
    }
    else if (g_pauseStart.find(host) != g_pauseStart.end())
    {
        g_pausedTime += now - g_pauseStart[host];
        g_pauseStart.erase(host);
    }
}

void
OnBottleneckTx(Ptr<const Packet> p)
{
    g_txBytes += p->GetSize();
    g_txFrames++;
}

void
Sample()
{
    uint64_t qbytes = 0;
    for (uint32_t k = 0; k < SwitchMmu::qCnt; k++)
    {
        qbytes += g.sw->m_mmu->egress_bytes[g.bottleneckIf][k];
    }
    g.peakQueue = std::max(g.peakQueue, qbytes);
    g.queueSamples.push_back(qbytes);
    uint64_t tx = g_txBytes;
    if (g.queue)
    {
        fprintf(g.queue, "%.6f,%lu,%lu\n", Simulator::Now().GetSeconds() * 1e6, qbytes, tx);
    }
    g.lastTx = tx;
    for (uint32_t h = 1; h <= g.hosts.size() - 1; h++)
    {
        Ptr<RdmaDriver> drv = g.hosts[h]->GetObject<RdmaDriver>();
        for (auto& kv : drv->m_rdma->m_qpMap)
        {
            Ptr<RdmaQueuePair> qp = kv.second;
            uint64_t r = qp->m_rate.GetBitRate();
            auto it = g.lastRate.find(qp->sport);
            if (it != g.lastRate.end() && r < it->second)
            {
                g.cuts[qp->sport]++;
            }
            g.lastRate[qp->sport] = r;
            if (r <= g.minRate)
            {
                g.floorTime[qp->sport] += 1e-6;
            }
            g.cnps[qp->sport] = drv->m_rdma->qp_cnp[kv.first];
            if (g.rates)
            {
                fprintf(g.rates,
                        "%.6f,%u,%lu,%lu,%.6f\n",
                        Simulator::Now().GetSeconds() * 1e6,
                        qp->sport,
                        r,
                        qp->mlx.m_targetRate.GetBitRate(),
                        qp->mlx.m_alpha);
            }
        }
    }
    if (g.fct.size() < g.hosts.size() - 1)
    {
        Simulator::Schedule(MicroSeconds(1), &Sample);
    }
    else
    {
        Simulator::Stop();
    }
}

void
StartQp(uint32_t i, uint16_t sport, uint64_t size, uint32_t win, uint64_t baseRtt)
{
    g.hosts[i]->GetObject<RdmaDriver>()->AddQueuePair(i,
                                                      0,
                                                      0,
                                                      size,
                                                      3,
                                                      HostIp(i),
                                                      HostIp(0),
                                                      sport,
                                                      100,
                                                      win,
                                                      baseRtt,
                                                      MakeCallback(&Noop),
                                                      MakeCallback(&Noop));
}

} // namespace

int
main(int argc, char* argv[])
{
    Setup s;
    CommandLine cmd;
    cmd.AddValue("payload", "payload bytes per DATA packet (PACKET_PAYLOAD_SIZE)", s.payload);
    cmd.AddValue("senders", "number of senders", s.senders);
    cmd.AddValue("size", "bytes per flow", s.size);
    cmd.AddValue("seed", "ns-3 run number (ECN marking draws)", s.seed);
    cmd.AddValue("out", "prefix of the sample files (empty: none)", s.out);
    cmd.AddValue("cc", "dcqcn, hp or none", s.cc);
    cmd.AddValue("utgt", "HPCC eta (run.py --utgt / 100)", s.utgt);
    cmd.AddValue("mi", "HPCC MI_THRESH (maxStage; run.py default 0)", s.mi);
    cmd.AddValue("hpai", "HPCC RATE_AI in Mb/s (0: 10 x bw / 25, as run.py)", s.hpaiMbps);
    cmd.AddValue("buffer-kib", "switch buffer in KiB", s.bufferKiB);
    cmd.AddValue("int-multi", "INT_MULTI: INT byte / queue units x this (0: bw / 25)", s.intMulti);
    cmd.AddValue("jitter-ns", "start offsets drawn from the seed in [0, jitter) ns", s.jitterNs);
    cmd.Parse(argc, argv);
    RngSeedManager::SetSeed(1);
    RngSeedManager::SetRun(s.seed);

    // run.py --cc dcqcn (or hp), --bw 100
    NS_ABORT_MSG_UNLESS(s.cc == "dcqcn" || s.cc == "hp" || s.cc == "none",
                        "--cc must be dcqcn, hp or none");
    const bool hp = s.cc == "hp";
    const uint32_t ccMode = hp ? 3 : 1;
    const uint64_t bps = static_cast<uint64_t>(s.rateGbps * 1e9);
    const uint32_t bw = static_cast<uint32_t>(s.rateGbps);
    Config::SetDefault("ns3::QbbNetDevice::PauseTime", UintegerValue(5));
    Config::SetDefault("ns3::QbbNetDevice::QcnEnabled", BooleanValue(true));
    Config::SetDefault("ns3::QbbNetDevice::DynamicThreshold", BooleanValue(true));
    IntHop::multi = hp ? (s.intMulti > 0 ? s.intMulti : bw / 25) : 1; // INT_MULTI
    IntHeader::mode = hp ? IntHeader::NORMAL : IntHeader::NONE;       // CC_MODE 3: INT stack

    const uint32_t nHosts = s.senders + 1;
    NodeContainer all;
    for (uint32_t i = 0; i < nHosts; i++)
    {
        Ptr<Node> h = CreateObject<Node>();
        all.Add(h);
        g.hosts.push_back(h);
    }
    g.sw = CreateObject<SwitchNode>();
    g.sw->SetAttribute("EcnEnabled", BooleanValue(s.cc != "none"));
    all.Add(g.sw);
    InternetStackHelper internet;
    internet.Install(all);

    QbbHelper qbb;
    qbb.SetDeviceAttribute("DataRate", DataRateValue(DataRate(bps)));
    qbb.SetChannelAttribute("Delay", TimeValue(MicroSeconds(s.delayUs)));
    Ipv4AddressHelper ipv4;
    std::vector<uint32_t> swIfOfHost(nHosts), hostIf(nHosts);
    for (uint32_t i = 0; i < nHosts; i++)
    {
        NetDeviceContainer d = qbb.Install(g.hosts[i], g.sw);
        Ptr<Ipv4> ip = g.hosts[i]->GetObject<Ipv4>();
        ip->AddInterface(d.Get(0));
        ip->AddAddress(1, Ipv4InterfaceAddress(HostIp(i), Ipv4Mask(0xff000000)));
        hostIf[i] = DynamicCast<QbbNetDevice>(d.Get(0))->GetIfIndex();
        swIfOfHost[i] = DynamicCast<QbbNetDevice>(d.Get(1))->GetIfIndex();
        char base[16];
        snprintf(base, sizeof(base), "10.%u.%u.0", i / 254 + 1, i % 254 + 1);
        ipv4.SetBase(base, "255.255.255.0");
        ipv4.Assign(d);
    }
    g.bottleneckIf = swIfOfHost[0];
    g.sw->GetDevice(g.bottleneckIf)
        ->TraceConnectWithoutContext("PhyTxEnd", MakeCallback(&OnBottleneckTx));
    for (uint32_t i = 0; i < nHosts; i++)
    {
        // a PAUSE from the switch, as its receiver sees it (QbbPfc fires on reception)
        g.hosts[i]->GetDevice(hostIf[i])->TraceConnectWithoutContext("QbbPfc",
                                                                     MakeBoundCallback(&OnPfc, i));
    }

    // switch MMU as third.cc: ECN per port (KB units), PFC headroom 3 x rate x delay, alpha 1/8,
    // buffer
    const uint32_t kmin = 100 * bw / 25, kmax = 400 * bw / 25;
    for (uint32_t j = 1; j < g.sw->GetNDevices(); j++)
    {
        g.sw->m_mmu->ConfigEcn(j, kmin, kmax, 0.2);
        uint64_t delayNs = static_cast<uint64_t>(s.delayUs * 1000);
        g.sw->m_mmu->ConfigHdrm(j, bps * delayNs / 8 / 1000000000 * 3);
        g.sw->m_mmu->pfc_a_shift[j] = 3;
    }
    g.sw->m_mmu->ConfigNPort(g.sw->GetNDevices() - 1);
    g.sw->m_mmu->ConfigBufferSize(s.bufferKiB * 1024);
    g.sw->m_mmu->node_id = g.sw->GetId();

    // RDMA NICs: run.py --cc dcqcn (CC_MODE 1, mlx) or --cc hp (CC_MODE 3)
    double ai = 5.0 * bw / 25, hai = 50.0 * bw / 25;
    if (hp)
    {
        ai = s.hpaiMbps > 0 ? s.hpaiMbps : 10.0 * bw / 25;
        hai = ai;
    }
    g.minRate = 1000000000ULL;
    for (uint32_t i = 0; i < nHosts; i++)
    {
        Ptr<RdmaHw> hw = CreateObject<RdmaHw>();
        hw->SetAttribute("ClampTargetRate", BooleanValue(false));
        hw->SetAttribute("AlphaResumInterval", DoubleValue(1));
        hw->SetAttribute("RPTimer", DoubleValue(300));
        hw->SetAttribute("FastRecoveryTimes", UintegerValue(1));
        hw->SetAttribute("EwmaGain", DoubleValue(0.00390625));
        hw->SetAttribute("RateAI", DataRateValue(DataRate(static_cast<uint64_t>(ai * 1e6))));
        hw->SetAttribute("RateHAI", DataRateValue(DataRate(static_cast<uint64_t>(hai * 1e6))));
        hw->SetAttribute("L2BackToZero", BooleanValue(false));
        hw->SetAttribute("L2ChunkSize", UintegerValue(4000));
        hw->SetAttribute("L2AckInterval", UintegerValue(1));
        hw->SetAttribute("CcMode", UintegerValue(ccMode));
        hw->SetAttribute("RateDecreaseInterval", DoubleValue(4));
        hw->SetAttribute("MinRate", DataRateValue(DataRate(g.minRate)));
        hw->SetAttribute("Mtu", UintegerValue(s.payload));
        hw->SetAttribute("MiThresh", UintegerValue(s.mi));
        hw->SetAttribute("TargetUtil", DoubleValue(s.utgt));
        hw->SetAttribute("VarWin", BooleanValue(hp));
        hw->SetAttribute("FastReact", BooleanValue(hp));
        hw->SetAttribute("MultiRate", BooleanValue(false));
        hw->SetAttribute("SampleFeedback", BooleanValue(false));
        hw->SetAttribute("RateBound", BooleanValue(true));
        hw->SetAttribute("DctcpRateAI", DataRateValue(DataRate("1000Mb/s")));
        Ptr<RdmaDriver> drv = CreateObject<RdmaDriver>();
        drv->SetNode(g.hosts[i]);
        drv->SetRdmaHw(hw);
        g.hosts[i]->AggregateObject(drv);
        drv->Init();
        drv->TraceConnectWithoutContext("QpComplete", MakeCallback(&OnQpDone));
    }
    RdmaEgressQueue::ack_q_idx = hp ? 3 : 0; // ACK_HIGH_PRIO 0 for hp, 1 for dcqcn

    // routes: every host reaches every other through its one port; the switch has one port per host
    for (uint32_t i = 0; i < nHosts; i++)
    {
        Ipv4Address a = HostIp(i);
        g.sw->AddTableEntry(a, swIfOfHost[i]);
        for (uint32_t j = 0; j < nHosts; j++)
        {
            if (j != i)
            {
                g.hosts[j]->GetObject<RdmaDriver>()->m_rdma->AddTableEntry(a, hostIf[j], false);
            }
        }
    }
    // base RTT as third.cc (2 x path delay + one packet's serialization per hop), window off
    // (HAS_WIN 0) for dcqcn, the matching BDP for hp (HAS_WIN 1, GLOBAL_T 1: maxBdp, maxRtt)
    uint64_t delayNs = static_cast<uint64_t>(s.delayUs * 1000);
    uint64_t txNs = 2 * (static_cast<uint64_t>(s.payload) * 8 * 1000000000ULL / bps);
    uint64_t baseRtt = 2 * 2 * delayNs + txNs;
    uint32_t win = hp ? static_cast<uint32_t>(baseRtt * bps / 1000000000ULL / 8) : 0;
    g.sw->SetAttribute("CcMode", UintegerValue(ccMode));
    g.sw->SetAttribute("MaxRtt", UintegerValue(baseRtt));

    for (uint32_t i = 1; i < nHosts; i++)
    {
        uint16_t sport = static_cast<uint16_t>(10000 + i);
        // start offset: 0, or the seed's draw in [0, jitter) ns (bench/reference_incast.py
        // start_offset_ns: same formula), so that a deterministic CC (HPCC) gets a spread of runs
        uint64_t offset =
            s.jitterNs > 0 ? (((s.seed * 1000003ULL + i) * 2654435761ULL) >> 16) % s.jitterNs : 0;
        Simulator::Schedule(NanoSeconds(offset), &StartQp, i, sport, s.size, win, baseRtt);
    }
    if (!s.out.empty())
    {
        g.rates = fopen((s.out + ".rates.csv").c_str(), "w");
        g.queue = fopen((s.out + ".queue.csv").c_str(), "w");
        fprintf(g.rates, "t_us,sport,rate_bps,target_bps,alpha\n");
        fprintf(g.queue, "t_us,queue_bytes,tx_bytes\n");
    }
    Simulator::Schedule(MicroSeconds(1), &Sample);
    Simulator::Stop(Seconds(1.0));
    Simulator::Run();

    double makespan = 0, sumThr = 0, sumThr2 = 0;
    for (auto& kv : g_pauseStart)
    {
        g_pausedTime += Simulator::Now().GetSeconds() - kv.second; // still paused at the end
    }
    for (auto& kv : g.fct)
    {
        makespan = std::max(makespan, g.finish[kv.first]);
        double thr = s.size / kv.second;
        sumThr += thr;
        sumThr2 += thr * thr;
        printf("flow sport=%u fct_ms=%.4f cnps=%u cuts=%u floor_us=%.0f\n",
               kv.first,
               kv.second * 1e3,
               g.cnps[kv.first],
               g.cuts[kv.first],
               g.floorTime[kv.first] * 1e6);
    }
    uint64_t wire = g_txBytes;
    double ideal = wire * 8.0 / bps;
    uint64_t frames = g_txFrames;
    std::vector<uint64_t> q = g.queueSamples;
    std::sort(q.begin(), q.end());
    uint64_t p99 = q.empty() ? 0 : q[static_cast<size_t>(0.99 * (q.size() - 1))];
    uint64_t totalCnp = 0;
    for (auto& kv : g.cnps)
    {
        totalCnp += kv.second;
    }
    printf("summary payload=%u seed=%u flows_done=%zu makespan_ms=%.4f wire_bytes=%lu frames=%lu "
           "wire_per_frame=%.2f ideal_ms=%.4f ratio=%.4f jain=%.4f cnps=%lu queue_p99_MB=%.3f "
           "queue_max_MB=%.3f fct_min_ms=%.4f pfc_pauses=%lu paused_us=%.1f cc=%s\n",
           s.payload,
           s.seed,
           g.fct.size(),
           makespan * 1e3,
           wire,
           frames,
           static_cast<double>(wire) / frames,
           ideal * 1e3,
           makespan / ideal,
           sumThr * sumThr / (g.fct.size() * sumThr2),
           totalCnp,
           p99 / 1e6,
           g.peakQueue / 1e6,
           std::min_element(
               g.fct.begin(), g.fct.end(), [](auto& a, auto& b) { return a.second < b.second; })
                   ->second *
               1e3,
           g_pfcPauses,
           g_pausedTime * 1e6,
           s.cc.c_str());
    if (g.rates)
    {
        fclose(g.rates);
        fclose(g.queue);
    }
    Simulator::Destroy();
    return 0;
}
