#ifndef HETERO_NS3_RDMA_DCQCN_H
#define HETERO_NS3_RDMA_DCQCN_H

#include "ns3/data-rate.h"
#include "ns3/event-id.h"
#include "ns3/nstime.h"
#include "ns3/traced-value.h"
#include "rdma-congestion-ops.h"
#include "roce-scheduler.h"

namespace ns3
{

/**
 * \brief DCQCN reaction point (Zhu et al., SIGCOMM 2015).
 *
 * Rate decrease on CNP: Rt = Rc, Rc = Rc (1 - alpha/2), alpha = (1-g) alpha + g (at most once
 * per RateDecreaseInterval). With ClampTargetRate false, Rt is only reset when a rate increase
 * happened since the previous cut (so back-to-back CNPs keep the pre-congestion target, as in
 * Mellanox NICs' clamp_tgt_rate = 0 mode). Alpha decays as alpha = (1-g) alpha every
 * AlphaUpdateInterval without CNP. Rate increase events come from a timer (RateIncreaseInterval, T)
 * and a byte counter (ByteCounter, B); with counters t and b since the last decrease: fast recovery
 * while max(t, b) < F (Rc = (Rt + Rc)/2), additive increase (Rt += R_AI) when one exceeds
 * F, hyper increase (Rt += i R_HAI) when both do. Timers only run while Rc is below line
 * rate; alpha decay over idle periods is applied when the next CNP arrives.
 *
 * LazyAlpha (default): no alpha timer event. The updates of the periods that ended since the last
 * one are applied, one by one with the same arithmetic, when the flow next reads or changes alpha
 * state (a CNP, a cut, going idle); an update due at exactly that time goes first if the timer
 * event would have been scheduled before the event that reads it (see UpdateAlphaTo).
 *
 * DecreaseOnPeriod (NIC style: HPCC ns-3 artifact rdma-hw.cc cnp_received_mlx /
 * CheckRateDecreaseMlx; ConnectX rate_to_set_on_first_cnp = 0 and rate_reduce_monitor_period): a
 * CNP only sets a flag; the first CNP of a flow allocates the rate limiter at the current rate and
 * starts a periodic check every RateDecreaseInterval from that CNP; at each check with the flag
 * set, one cut. Without it (the paper's reaction point), a CNP cuts at once, at most once per
 * RateDecreaseInterval.
 *
 * LazyDecrease (default, DecreaseOnPeriod only, with RoceScheduler): a check is scheduled only
 * when a CNP has set the flag (a check without it does nothing), for the next point of the grid,
 * ordered among the events of its time stamp as the periodic check would have been (the uid it
 * would have had: RoceScheduler::UidCounterAt); the checks in between cost no event.
 */
class RdmaDcqcn : public RdmaCongestionOps
{
public:
    /** \return the TypeId. */
    static TypeId GetTypeId();
    RdmaDcqcn();

    void Init(RdmaQueuePair* qp) override;
    void OnCnp() override;
    void OnSent(uint32_t bytes) override;
    void Stop() override;
    std::string GetName() const override;

    /** \return alpha as last updated (LazyAlpha: at the flow's last CNP, cut or return to line
     * rate). */
    double GetAlpha() const;
    /** \return the target rate Rt, bit/s. */
    double GetTargetRate() const;

private:
    void AlphaTimer();
    void AlphaStep();
    void UpdateAlphaTo(Time scheduledAt);
    void DecreaseEvent();
    void IncreaseTimer();
    void Increase(Time scheduledAt);
    void Decrease();
    void DecreaseCheck();
    void ScheduleDecreaseCheck();
    void ScheduleLazyCheck();
    bool LazyCheckUid(Time at, uint32_t* uid) const;
    void CancelCheck();
    void Apply();

    double m_g;
    Time m_alphaInterval;
    Time m_increaseInterval;
    uint64_t m_byteCounter;
    uint32_t m_f;
    DataRate m_rai;
    DataRate m_rhai;
    DataRate m_increaseRef;
    double m_increaseScale{1.0};
    DataRate m_minRate;
    Time m_decreaseInterval;
    bool m_clampTarget;
    bool m_decreaseOnPeriod{false};
    bool m_sending{false};          //!< inside OnSent (the port is building a frame: no wake-up)
    bool m_cnpSinceDecrease{false}; //!< DecreaseOnPeriod: a CNP arrived since the last check
    Time m_periodOrigin; //!< DecreaseOnPeriod: the first CNP's time (phase of the checks)
    bool m_increasedSinceCut{true};

    TracedValue<double> m_alpha{1.0}; //!< congestion estimate alpha (trace source Alpha)
    TracedValue<double> m_rc{0};      //!< current rate Rc, bit/s (trace source Rate)
    TracedValue<double> m_rt{0};      //!< target rate Rt, bit/s (trace source TargetRate)
    uint32_t m_t{0};
    uint32_t m_b{0};
    uint64_t m_bytes{0};
    bool m_active{false};
    Time m_lastDecrease;
    Time m_idleSince;
    bool m_everDecreased{false};
    EventId m_alphaEvent;
    EventId m_increaseEvent;
    EventId m_decreaseEvent;
    bool m_cnpSinceAlphaUpdate{false};
    bool m_lazyAlpha{true};
    Time m_alphaOrigin; //!< LazyAlpha: the periods end at m_alphaOrigin + k AlphaUpdateInterval
    uint64_t m_alphaDone{0}; //!< LazyAlpha: periods applied since m_alphaOrigin
    Time m_decreaseAt;       //!< when m_decreaseEvent was scheduled
    Time m_increaseAt;       //!< when m_increaseEvent was scheduled
    bool m_lazyDecrease{true};
    RoceScheduler* m_scheduler{nullptr}; //!< LazyDecrease in use: the run's scheduler
    bool m_checkPending{false};          //!< LazyDecrease: m_decreaseEvent is to run
    Time m_lastCheck{Time::Min()};       //!< LazyDecrease: time of the last check that ran
    uint32_t m_lastCheckUid{0};          //!< LazyDecrease: uid counter at its end
};

} // namespace ns3

#endif
