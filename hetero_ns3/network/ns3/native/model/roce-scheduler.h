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

private:
    static constexpr std::size_t ARITY = 4; //!< children per heap node

    /** \return true when \p a comes out before \p b. */
    static bool
    Before(const Event& a, const Event& b)
    {
        return a.key.m_ts < b.key.m_ts || (a.key.m_ts == b.key.m_ts && a.key.m_uid < b.key.m_uid);
    }

    void SiftUp(std::size_t i);
    void SiftDown(std::size_t i);
    void PopTop();
    /** Drop removed entries from the top until it is a live event (or the heap is empty). */
    void DropRemovedTop();

    std::vector<Event> m_heap;              //!< 4-ary heap, m_heap[0] is the next event
    std::unordered_set<uint32_t> m_removed; //!< uids removed while still in the heap
};

} // namespace ns3

#endif
