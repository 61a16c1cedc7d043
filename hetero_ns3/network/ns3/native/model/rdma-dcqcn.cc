// RdmaDcqcn: attributes, CNPs, alpha, rate increase, rate limiter. When a cut happens (the
// periodic or lazily scheduled decrease checks, the deferred cut, the cut itself) is in
// rdma-dcqcn-decrease.cc.
#include "rdma-dcqcn.h"

#include "ns3/boolean.h"
#include "ns3/double.h"
#include "ns3/log.h"
#include "ns3/simulator.h"
#include "ns3/uinteger.h"
#include "roce-profile.h"

#include <algorithm>
#include <cmath>

namespace ns3
{

NS_LOG_COMPONENT_DEFINE("RdmaDcqcn");

NS_OBJECT_ENSURE_REGISTERED(RdmaDcqcn);

TypeId
RdmaDcqcn::GetTypeId()
{
    static TypeId tid =
        TypeId("ns3::RdmaDcqcn")
            .SetParent<RdmaCongestionOps>()
            .SetGroupName("HeteroNs3")
            .AddConstructor<RdmaDcqcn>()
            .AddAttribute("G",
                          "Gain g of the alpha moving average (paper: 1/256)",
                          DoubleValue(1.0 / 256),
                          MakeDoubleAccessor(&RdmaDcqcn::m_g),
                          MakeDoubleChecker<double>(0.0, 1.0))
            .AddAttribute("AlphaUpdateInterval",
                          "Alpha decays once per interval without CNP (paper: K = 55 us)",
                          TimeValue(MicroSeconds(55)),
                          MakeTimeAccessor(&RdmaDcqcn::m_alphaInterval),
                          MakeTimeChecker(NanoSeconds(1)))
            .AddAttribute("RateIncreaseInterval",
                          "Rate increase timer T (paper: 55 us)",
                          TimeValue(MicroSeconds(55)),
                          MakeTimeAccessor(&RdmaDcqcn::m_increaseInterval),
                          MakeTimeChecker(NanoSeconds(1)))
            .AddAttribute(
                "ByteCounter",
                "Rate increase byte counter B, bytes (paper: 10 MB); 0 disables it (increase "
                "stages then come from the timer alone, as in NIC implementations)",
                UintegerValue(10000000),
                MakeUintegerAccessor(&RdmaDcqcn::m_byteCounter),
                MakeUintegerChecker<uint64_t>(0))
            .AddAttribute("FastRecoverySteps",
                          "Fast recovery steps F (paper: 5)",
                          UintegerValue(5),
                          MakeUintegerAccessor(&RdmaDcqcn::m_f),
                          MakeUintegerChecker<uint32_t>(1))
            .AddAttribute("RateAi",
                          "Additive increase step R_AI (paper: 40 Mbps)",
                          DataRateValue(DataRate("40Mbps")),
                          MakeDataRateAccessor(&RdmaDcqcn::m_rai),
                          MakeDataRateChecker())
            .AddAttribute("RateHai",
                          "Hyper increase step R_HAI",
                          DataRateValue(DataRate("400Mbps")),
                          MakeDataRateAccessor(&RdmaDcqcn::m_rhai),
                          MakeDataRateChecker())
            .AddAttribute(
                "IncreaseReferenceRate",
                "When non-zero, RateAi and RateHai are given at this line rate and scaled with the "
                "queue pair's line rate (HPCC artifact: 5 / 50 Mbps per 25 Gbps); 0: absolute",
                DataRateValue(DataRate(0)),
                MakeDataRateAccessor(&RdmaDcqcn::m_increaseRef),
                MakeDataRateChecker())
            .AddAttribute("MinRate",
                          "Lower bound of the sending rate",
                          DataRateValue(DataRate("100Mbps")),
                          MakeDataRateAccessor(&RdmaDcqcn::m_minRate),
                          MakeDataRateChecker())
            .AddAttribute("RateDecreaseInterval",
                          "At most one rate decrease per interval",
                          TimeValue(MicroSeconds(4)),
                          MakeTimeAccessor(&RdmaDcqcn::m_decreaseInterval),
                          MakeTimeChecker(Time(0)))
            .AddAttribute("ClampTargetRate",
                          "Set Rt = Rc on every cut (paper); false: only if the rate increased "
                          "since the last cut",
                          BooleanValue(false),
                          MakeBooleanAccessor(&RdmaDcqcn::m_clampTarget),
                          MakeBooleanChecker())
            .AddAttribute(
                "DecreaseOnPeriod",
                "NIC style: CNPs set a flag read by a periodic check every RateDecreaseInterval "
                "from the flow's first CNP (which cuts nothing by itself); false: cut at the CNP",
                BooleanValue(false),
                MakeBooleanAccessor(&RdmaDcqcn::m_decreaseOnPeriod),
                MakeBooleanChecker())
            .AddAttribute("LazyAlpha",
                          "Apply the alpha updates of elapsed periods when alpha is next used "
                          "(same values, no timer event per period); false: one timer event per "
                          "AlphaUpdateInterval while the flow is rate limited",
                          BooleanValue(true),
                          MakeBooleanAccessor(&RdmaDcqcn::m_lazyAlpha),
                          MakeBooleanChecker())
            .AddAttribute("LazyDecrease",
                          "DecreaseOnPeriod: schedule a periodic check only when a CNP has set "
                          "the flag, ordered as the periodic check would have been (same results, "
                          "no event for checks without a CNP; needs ns3::RoceScheduler, else "
                          "periodic); false: one event per RateDecreaseInterval while rate limited",
                          BooleanValue(true),
                          MakeBooleanAccessor(&RdmaDcqcn::m_lazyDecrease),
                          MakeBooleanChecker())
            .AddTraceSource("Rate",
                            "Current sending rate Rc, bit/s",
                            MakeTraceSourceAccessor(&RdmaDcqcn::m_rc),
                            "ns3::TracedValueCallback::Double")
            .AddTraceSource("TargetRate",
                            "Target rate Rt, bit/s",
                            MakeTraceSourceAccessor(&RdmaDcqcn::m_rt),
                            "ns3::TracedValueCallback::Double")
            .AddTraceSource("Alpha",
                            "Congestion estimate alpha",
                            MakeTraceSourceAccessor(&RdmaDcqcn::m_alpha),
                            "ns3::TracedValueCallback::Double");
    return tid;
}

RdmaDcqcn::RdmaDcqcn() = default;

std::string
RdmaDcqcn::GetName() const
{
    return "dcqcn";
}

double
RdmaDcqcn::GetAlpha() const
{
    return m_alpha;
}

double
RdmaDcqcn::GetTargetRate() const
{
    return m_rt;
}

void
RdmaDcqcn::Init(RdmaQueuePair* qp)
{
    NS_LOG_FUNCTION(this << qp);
    m_qp = qp;
    m_rc = qp->lineRateBps;
    m_rt = qp->lineRateBps;
    m_alpha = 1.0;
    m_idleSince = Simulator::Now();
    double ref = static_cast<double>(m_increaseRef.GetBitRate());
    m_increaseScale = ref > 0 ? qp->lineRateBps / ref : 1.0;
    qp->windowBytes = 0;
    m_scheduler = m_decreaseOnPeriod && m_lazyDecrease ? RoceScheduler::Current() : nullptr;
    if (m_scheduler != nullptr)
    {
        m_scheduler->KeepHistory(m_decreaseInterval.GetTimeStep());
    }
    Apply();
}

void
RdmaDcqcn::Apply()
{
    // A rate change rescales the pacing gap still owed (SetPacedRate). Without this, a frame sent
    // at the floor (33 ms for 4 KiB at ConnectX's 1 Mb/s) holds the queue pair long after the
    // timer has raised its rate.
    SetPacedRate(m_rc.Get(), !m_sending);
}

void
RdmaDcqcn::OnCnp()
{
    Time now = Simulator::Now();
    bool first = !m_everDecreased && !m_cnpSinceDecrease;
    bool wasActive = m_active;
    if (m_active)
    {
        // The CNP's arrival event was scheduled ctrlLead before now (when its last hop began).
        UpdateAlphaTo(now - m_qp->ctrlLead);
    }
    else
    {
        if (m_everDecreased)
        {
            // Alpha kept decaying (once per AlphaUpdateInterval without CNP) while the timers were
            // idle. Before the first CNP there is no history: alpha keeps its initial value 1.
            double periods =
                std::floor((now - m_idleSince).GetSeconds() / m_alphaInterval.GetSeconds());
            m_alpha = m_alpha.Get() * std::pow(1.0 - m_g, periods);
        }
        m_active = true;
        NS_LOG_DEBUG("flow " << m_qp->flowId << ": first CNP since idle, alpha " << m_alpha.Get());
        if (m_lazyAlpha)
        {
            m_alphaOrigin = now;
            m_alphaDone = 0;
        }
        else
        {
            m_alphaEvent = Simulator::Schedule(m_alphaInterval, &RdmaDcqcn::AlphaTimer, this);
        }
    }
    m_cnpSinceAlphaUpdate = true;
    if (m_decreaseOnPeriod)
    {
        // NIC style (HPCC artifact cnp_received_mlx; ConnectX rate_to_set_on_first_cnp = 0): the
        // CNP sets a flag; the cut waits for the next periodic check, on a grid that starts at the
        // flow's first CNP (the artifact's checks never stop; ours stop at line rate and resume on
        // the same grid).
        if (first)
        {
            m_periodOrigin = now;
        }
        bool wasSet = m_cnpSinceDecrease;
        m_cnpSinceDecrease = true;
        if (m_scheduler != nullptr)
        {
            // The periodic checks run from the first CNP while the flow is rate limited: started
            // here as an event when the flow was not; otherwise one event for the next check, the
            // first one that finds the flag.
            if (!wasActive)
            {
                ScheduleDecreaseCheck();
                m_checkPending = true;
            }
            else if (!wasSet && !m_checkPending)
            {
                ScheduleLazyCheck();
            }
            return;
        }
        if (!m_decreaseEvent.IsPending())
        {
            ScheduleDecreaseCheck();
        }
        return;
    }
    if (m_everDecreased && now - m_lastDecrease < m_decreaseInterval)
    {
        // One cut per RateDecreaseInterval: this CNP is served at the end of the interval.
        if (!m_decreaseEvent.IsPending())
        {
            m_decreaseAt = now;
            m_decreaseEvent = Simulator::Schedule(
                m_lastDecrease + m_decreaseInterval - now, &RdmaDcqcn::DecreaseEvent, this);
        }
        return;
    }
    Decrease();
}

void
RdmaDcqcn::AlphaStep()
{
    // alpha = (1 - g) alpha + g if a CNP arrived during the interval, else (1 - g) alpha.
    m_alpha = (1.0 - m_g) * m_alpha.Get() + (m_cnpSinceAlphaUpdate ? m_g : 0.0);
    m_cnpSinceAlphaUpdate = false;
}

void
RdmaDcqcn::UpdateAlphaTo(Time scheduledAt)
{
    // LazyAlpha: apply the updates of the periods that ended before now, in order, as the timer
    // would have. The timer event of the period ending exactly now would have been scheduled one
    // interval earlier (when the previous one ran, or at the first CNP): it runs before the
    // current event if the current event was scheduled after that (same-time events run in the
    // order they were scheduled). Exact equality of the two scheduling times would need their
    // own order: the current event is then taken to go first.
    if (!m_lazyAlpha || !m_active)
    {
        return;
    }
    Time now = Simulator::Now();
    int64_t period = m_alphaInterval.GetTimeStep();
    int64_t elapsed = (now - m_alphaOrigin).GetTimeStep();
    uint64_t due = static_cast<uint64_t>(elapsed / period);
    if (due > m_alphaDone && elapsed % period == 0 && !(scheduledAt > now - m_alphaInterval))
    {
        --due; // the update due now has not run yet
    }
    for (; m_alphaDone < due; ++m_alphaDone)
    {
        AlphaStep();
    }
}

void
RdmaDcqcn::AlphaTimer()
{
    RoceProfile::Count(EV_DCQCN_ALPHA);
    AlphaStep();
    if (m_active)
    {
        m_alphaEvent = Simulator::Schedule(m_alphaInterval, &RdmaDcqcn::AlphaTimer, this);
    }
}

void
RdmaDcqcn::IncreaseTimer()
{
    RoceProfile::Count(EV_DCQCN_INCREASE);
    Time scheduledAt = m_increaseAt;
    ++m_t;
    m_increaseAt = Simulator::Now();
    Increase(scheduledAt);
    if (m_active)
    {
        m_increaseEvent = Simulator::Schedule(m_increaseInterval, &RdmaDcqcn::IncreaseTimer, this);
    }
}

void
RdmaDcqcn::OnSent(uint32_t bytes)
{
    if (!m_active || m_byteCounter == 0)
    {
        return;
    }
    m_bytes += bytes;
    if (m_bytes >= m_byteCounter)
    {
        m_bytes -= m_byteCounter;
        ++m_b;
        m_sending = true;
        // The port event sending this frame was scheduled about one frame time at this rate ago.
        Increase(Simulator::Now() - Seconds(bytes * 8.0 / m_qp->rateBps));
        m_sending = false;
    }
}

void
RdmaDcqcn::Increase(Time scheduledAt)
{
    double line = m_qp->lineRateBps;
    double rt = m_rt.Get();
    m_increasedSinceCut = true;
    if (m_byteCounter == 0)
    {
        // Timer only (NIC style, HPCC artifact rdma-hw.cc RateIncEventMlx): the stage is the number
        // of timer events before this one (m_t - 1): stages 0..F-1 fast recovery, F additive, above
        // F hyper. With F = 1: fast recovery, additive, then hyper.
        uint32_t stage = m_t - 1;
        if (stage == m_f)
        {
            rt += m_increaseScale * static_cast<double>(m_rai.GetBitRate());
        }
        else if (stage > m_f)
        {
            rt += m_increaseScale * static_cast<double>(m_rhai.GetBitRate());
        }
    }
    else if (std::max(m_t, m_b) < m_f)
    {
        // fast recovery: Rt unchanged
    }
    else if (std::min(m_t, m_b) >= m_f)
    {
        uint32_t i = std::min(m_t, m_b) - m_f + 1;
        rt += i * m_increaseScale * static_cast<double>(m_rhai.GetBitRate());
    }
    else
    {
        rt += m_increaseScale * static_cast<double>(m_rai.GetBitRate());
    }
    m_rt = std::min(rt, line);
    m_rc = std::min((m_rt.Get() + m_rc.Get()) / 2.0, line);
    if (line - m_rc.Get() < 1e-6 * line && !m_cnpSinceDecrease)
    {
        // back at line rate: stop the timers until the next CNP
        UpdateAlphaTo(scheduledAt);
        m_rc = line;
        m_active = false;
        m_idleSince = Simulator::Now();
        Simulator::Remove(m_alphaEvent);
        Simulator::Remove(m_increaseEvent);
        if (m_scheduler != nullptr)
        {
            CancelCheck(); // none is pending: one is only while a CNP is
        }
        else if (m_decreaseOnPeriod)
        {
            Simulator::Remove(m_decreaseEvent); // no CNP is pending: the periodic check stops too
        }
        NS_LOG_DEBUG("flow " << m_qp->flowId << ": back at line rate " << line << " bit/s");
    }
    NS_LOG_LOGIC("flow " << m_qp->flowId << ": increase (T " << m_t << ", BC " << m_b << "), rate "
                         << m_rc.Get() << " bit/s, target " << m_rt.Get() << " bit/s");
    Apply();
}

void
RdmaDcqcn::Stop()
{
    m_active = false;
    Simulator::Remove(m_alphaEvent);
    Simulator::Remove(m_increaseEvent);
    if (m_scheduler != nullptr)
    {
        CancelCheck();
    }
    else
    {
        Simulator::Remove(m_decreaseEvent);
    }
}

} // namespace ns3
