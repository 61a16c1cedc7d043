#ifndef HETERO_NS3_ROCE_SCHEDULER_H
#define HETERO_NS3_ROCE_SCHEDULER_H

#include "ns3/scheduler.h"

#include <cstdint>
#include <unordered_set>
#include <vector>

namespace ns3
{

/**
 * \brief Event scheduler: an implicit 4-ary min-heap on (time, uid) with lazy removal.
 *
 * Events come out in the order of every ns-3 scheduler (time stamp, then insertion uid, a total
 * order), so a run gives the same results as with MapScheduler or PriorityQueueScheduler. What
 * differs is the cost: Remove (Simulator::Remove of a pending event, e.g. a finished queue pair's
 * retransmit timer) is O(1) here (the uid goes into a set and the entry is dropped when it reaches
 * the top) instead of PriorityQueueScheduler's linear search of the whole queue, and a 4-ary heap
 * touches fewer cache lines per operation than a binary one. The top of the heap is always a live
 * event, so IsEmpty and PeekNext stay exact.
 *
 * Back-dated timers (for RdmaDcqcn::LazyDecrease): a periodic timer whose ticks do nothing most of
 * the time can be left unscheduled and scheduled only when a tick has work, as long as that event
 * runs where the tick would have run among the events of its time stamp, i.e. with the uid it would
 * have had. The scheduler keeps, for a window of recent time stamps, the uid counter at the moment
 * the simulation reached each (UidCounterAt), and OrderNextInsertAs gives the next inserted event
 * that uid for ordering (before the event that really has it, if any: it stands for one scheduled
 * just before). Removal matches the EventImpl, not the uid; the simulator judges expiry by the real
 * uid, so the owner removes such an event only while it knows it pending.
 */
class RoceScheduler : public Scheduler
{
public:
    /** \return the TypeId. */
    static TypeId GetTypeId();
    RoceScheduler();
    ~RoceScheduler() override;

    void Insert(const Event& ev) override;
    bool IsEmpty() const override;
    Event PeekNext() const override;
    Event RemoveNext() override;
    void Remove(const Event& ev) override;

    /** \return the RoceScheduler of the running simulation, or nullptr when it uses another one. */
    static RoceScheduler* Current();
    /** \return the uid of the event being executed (the last one taken out). */
    uint32_t
    CurrentUid() const
    {
        return m_currentUid;
    }

    /** \return the uid the simulator gives the next event it schedules (as seen by Insert). */
    uint32_t
    NextUid() const
    {
        return m_nextUid;
    }

    /** Keep the uid counter of the time stamps of at least the last \p steps time steps. */
    void KeepHistory(int64_t steps);
    /**
     * \param ts a time stamp (time steps) in the kept window, at most the current time.
     * \param uid set to the uid counter when the simulation first reached \p ts (before it ran
     * any event at or after \p ts): events scheduled earlier have smaller uids.
     * \return false when \p ts is older than the kept window.
     */
    bool UidCounterAt(uint64_t ts, uint32_t* uid) const;
    /** Order the next inserted event as if its uid were \p uid (see the class description). */
    void
    OrderNextInsertAs(uint32_t uid)
    {
        m_orderAs = true;
        m_orderUid = uid;
    }

private:
    static constexpr std::size_t ARITY = 4; //!< children per heap node

    /** \return true when \p a comes out before \p b. */
    bool
    Before(const Event& a, const Event& b) const
    {
        // Equal keys only when a back-dated event took the uid of a real one: it goes first (it
        // stands for an event scheduled just before that one).
        return a.key.m_ts < b.key.m_ts ||
               (a.key.m_ts == b.key.m_ts &&
                (a.key.m_uid < b.key.m_uid ||
                 (a.key.m_uid == b.key.m_uid && m_backdated.count(a.impl) != 0)));
    }

    void SiftUp(std::size_t i);
    void SiftDown(std::size_t i);
    void PopTop();
    /** Drop removed entries from the top until it is a live event (or the heap is empty). */
    void DropRemovedTop();

    std::vector<Event> m_heap;                      //!< 4-ary heap, m_heap[0] is the next event
    std::unordered_set<const EventImpl*> m_removed; //!< events removed while still in the heap

    static RoceScheduler* s_current; //!< the live instance (nullptr when none)
    uint32_t m_currentUid{0};        //!< uid of the last event taken out
    uint32_t m_nextUid{0};           //!< uid of the last event inserted + 1
    bool m_orderAs{false};           //!< OrderNextInsertAs is pending
    uint32_t m_orderUid{0};          //!< its uid
    uint64_t m_lastTs{UINT64_MAX};   //!< time stamp of the last event taken out

    /** A time stamp reached and the uid counter at that moment. */
    struct Reached
    {
        uint64_t ts;
        uint32_t uid;
    };

    std::unordered_set<const EventImpl*> m_backdated; //!< queued events inserted back-dated
    std::vector<Reached> m_history; //!< ring of the last time stamps reached (power-of-2 size)
    uint64_t m_historyCount{0};     //!< entries ever written
};

} // namespace ns3

#endif
