// RdmaDcqcn, the rate decrease: the periodic checks of DecreaseOnPeriod (one event per
// RateDecreaseInterval, or with LazyDecrease one only when a CNP has armed it, back-dated to the
// uid the periodic check would have had), the deferred cut of the paper's reaction point, and the
// cut. The rest of the reaction point is in rdma-dcqcn.cc.
#include "ns3/log.h"
#include "ns3/simulator.h"
#include "rdma-dcqcn.h"
#include "roce-profile.h"

#include <algorithm>

namespace ns3
{

NS_LOG_COMPONENT_DEFINE("RdmaDcqcnDecrease");

void
RdmaDcqcn::ScheduleDecreaseCheck()
{
    // The next point of the grid m_periodOrigin + k RateDecreaseInterval, k >= 1, after now.
    Time now = Simulator::Now();
    int64_t period = std::max<int64_t>(m_decreaseInterval.GetTimeStep(), 1);
    int64_t k = (now - m_periodOrigin).GetTimeStep() / period + 1;
    Time at = m_periodOrigin + TimeStep(k * period);
    m_decreaseAt = now;
    m_decreaseEvent = Simulator::Schedule(at - now, &RdmaDcqcn::DecreaseCheck, this);
}

bool
RdmaDcqcn::LazyCheckUid(Time at, uint32_t* uid) const
{
    // The periodic check at `at` would have been scheduled by the one a period earlier, at the end
    // of it: known exactly when that one ran as an event, else the uid counter when the simulation
    // reached that time (the check taken as the first event of its time stamp).
    Time before = at - m_decreaseInterval;
    if (before == m_lastCheck)
    {
        *uid = m_lastCheckUid;
        return true;
    }
    return m_scheduler->UidCounterAt(static_cast<uint64_t>(before.GetTimeStep()), uid);
}

void
RdmaDcqcn::ScheduleLazyCheck()
{
    // LazyDecrease: the first periodic check after now that finds the flag just set. A check due
    // at exactly now has not run yet if it comes after the current event.
    Time now = Simulator::Now();
    int64_t period = std::max<int64_t>(m_decreaseInterval.GetTimeStep(), 1);
    int64_t offset = (now - m_periodOrigin).GetTimeStep();
    Time at = m_periodOrigin + TimeStep((offset / period + 1) * period);
    uint32_t uid = 0;
    if (offset % period == 0 && now > m_lastCheck && LazyCheckUid(now, &uid) &&
        uid > m_scheduler->CurrentUid())
    {
        at = now;
    }
    else if (!LazyCheckUid(at, &uid))
    {
        // Older than the scheduler's window (not with the default sizes): ordered as scheduled now.
        uid = m_scheduler->NextUid();
    }
    m_decreaseAt = at - m_decreaseInterval; // when the periodic check would have been scheduled
    m_scheduler->OrderNextInsertAs(uid);
    m_decreaseEvent = Simulator::Schedule(at - now, &RdmaDcqcn::DecreaseCheck, this);
    m_checkPending = true;
}

void
RdmaDcqcn::CancelCheck()
{
    // Only while it is pending: the simulator judges expiry by the check's real uid, not the
    // back-dated one it runs with, so after it ran at this same time it could take it for pending.
    if (m_checkPending)
    {
        Simulator::Remove(m_decreaseEvent);
        m_checkPending = false;
    }
}

void
RdmaDcqcn::DecreaseEvent()
{
    RoceProfile::Count(EV_DCQCN_DECREASE);
    UpdateAlphaTo(m_decreaseAt);
    Decrease();
}

void
RdmaDcqcn::DecreaseCheck()
{
    RoceProfile::Count(EV_DCQCN_DECREASE);
    if (m_cnpSinceDecrease)
    {
        m_cnpSinceDecrease = false;
        UpdateAlphaTo(m_decreaseAt);
        Decrease();
    }
    if (m_scheduler != nullptr)
    {
        // The next periodic check would be scheduled now: remember its uid for ScheduleLazyCheck.
        m_checkPending = false;
        m_lastCheck = Simulator::Now();
        m_lastCheckUid = m_scheduler->NextUid();
        return;
    }
    if (m_active)
    {
        ScheduleDecreaseCheck();
    }
}

void
RdmaDcqcn::Decrease()
{
    m_everDecreased = true;
    m_lastDecrease = Simulator::Now();
    if (m_clampTarget || m_increasedSinceCut)
    {
        m_rt = m_rc.Get();
    }
    m_increasedSinceCut = false;
    m_rc = std::max(m_rc.Get() * (1.0 - m_alpha.Get() / 2.0),
                    static_cast<double>(m_minRate.GetBitRate()));
    m_t = 0;
    m_b = 0;
    m_bytes = 0;
    NS_LOG_DEBUG("flow " << m_qp->flowId << ": CNP cut, rate " << m_rc.Get() << " bit/s, target "
                         << m_rt.Get() << " bit/s, alpha " << m_alpha.Get());
    Apply();
    m_increaseEvent.Cancel();
    m_increaseAt = m_lastDecrease;
    m_increaseEvent = Simulator::Schedule(m_increaseInterval, &RdmaDcqcn::IncreaseTimer, this);
}

} // namespace ns3
