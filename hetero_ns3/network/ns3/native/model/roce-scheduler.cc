#include "roce-scheduler.h"

#include "ns3/assert.h"
#include "ns3/event-impl.h"
#include "ns3/log.h"

#include <algorithm>

namespace ns3
{

NS_LOG_COMPONENT_DEFINE("RoceScheduler");

NS_OBJECT_ENSURE_REGISTERED(RoceScheduler);

TypeId
RoceScheduler::GetTypeId()
{
    static TypeId tid = TypeId("ns3::RoceScheduler")
                            .SetParent<Scheduler>()
                            .SetGroupName("HeteroNs3")
                            .AddConstructor<RoceScheduler>();
    return tid;
}

RoceScheduler* RoceScheduler::s_current = nullptr;

RoceScheduler::RoceScheduler()
{
    s_current = this;
}

RoceScheduler*
RoceScheduler::Current()
{
    return s_current;
}

RoceScheduler::~RoceScheduler()
{
    if (s_current == this)
    {
        s_current = nullptr;
    }
    // Removed entries still in the heap hold a reference (the simulator empties the queue of live
    // events through RemoveNext before it drops the scheduler).
    for (const Event& ev : m_heap)
    {
        if (m_removed.count(ev.impl) != 0)
        {
            ev.impl->Unref();
        }
    }
}

void
RoceScheduler::SiftUp(std::size_t i)
{
    Event ev = m_heap[i];
    while (i > 0)
    {
        std::size_t parent = (i - 1) / ARITY;
        if (!Before(ev, m_heap[parent]))
        {
            break;
        }
        m_heap[i] = m_heap[parent];
        i = parent;
    }
    m_heap[i] = ev;
}

void
RoceScheduler::SiftDown(std::size_t i)
{
    std::size_t n = m_heap.size();
    Event ev = m_heap[i];
    while (true)
    {
        std::size_t first = i * ARITY + 1;
        if (first >= n)
        {
            break;
        }
        std::size_t last = first + ARITY < n ? first + ARITY : n;
        std::size_t best = first;
        for (std::size_t c = first + 1; c < last; ++c)
        {
            if (Before(m_heap[c], m_heap[best]))
            {
                best = c;
            }
        }
        if (!Before(m_heap[best], ev))
        {
            break;
        }
        m_heap[i] = m_heap[best];
        i = best;
    }
    m_heap[i] = ev;
}

void
RoceScheduler::PopTop()
{
    m_heap.front() = m_heap.back();
    m_heap.pop_back();
    if (!m_heap.empty())
    {
        SiftDown(0);
    }
}

void
RoceScheduler::DropRemovedTop()
{
    // A removed event is cancelled (the simulator cancels it right after Remove; our reference
    // keeps it alive), so the set is looked up only for cancelled tops: plain Cancel()ed events,
    // which stay queued and go back to the simulator, are rare.
    while (!m_removed.empty() && !m_heap.empty() && m_heap.front().impl->IsCancelled())
    {
        auto it = m_removed.find(m_heap.front().impl);
        if (it == m_removed.end())
        {
            return;
        }
        m_removed.erase(it);
        EventImpl* impl = m_heap.front().impl;
        m_backdated.erase(impl);
        PopTop();
        impl->Unref(); // the reference taken by Remove
    }
}

void
RoceScheduler::Insert(const Event& ev)
{
    m_nextUid = ev.key.m_uid + 1;
    m_heap.push_back(ev);
    if (m_orderAs)
    {
        m_orderAs = false;
        m_heap.back().key.m_uid = m_orderUid;
        m_backdated.insert(ev.impl);
    }
    SiftUp(m_heap.size() - 1);
}

void
RoceScheduler::KeepHistory(int64_t steps)
{
    // At most one entry per time step: twice the window, as a power of two.
    std::size_t want = 2;
    while (want < static_cast<std::size_t>(2 * std::max<int64_t>(steps, 1) + 2))
    {
        want *= 2;
    }
    if (want <= m_history.size())
    {
        return;
    }
    std::vector<Reached> grown(want);
    uint64_t keep = std::min<uint64_t>(m_historyCount, m_history.size());
    for (uint64_t i = m_historyCount - keep; i < m_historyCount; ++i)
    {
        grown[i & (want - 1)] = m_history[i & (m_history.size() - 1)];
    }
    m_history.swap(grown);
}

bool
RoceScheduler::UidCounterAt(uint64_t ts, uint32_t* uid) const
{
    std::size_t size = m_history.size();
    uint64_t n = std::min<uint64_t>(m_historyCount, size);
    if (n == 0)
    {
        return false;
    }
    // Entries are in increasing time order: the first one at or after ts.
    uint64_t lo = m_historyCount - n;
    uint64_t hi = m_historyCount;
    while (lo < hi)
    {
        uint64_t mid = lo + (hi - lo) / 2;
        if (m_history[mid & (size - 1)].ts < ts)
        {
            lo = mid + 1;
        }
        else
        {
            hi = mid;
        }
    }
    if (lo == m_historyCount)
    {
        return false; // ts is later than anything reached
    }
    if (lo == m_historyCount - n && m_historyCount > size && m_history[lo & (size - 1)].ts > ts)
    {
        return false; // older than the window: what happened at ts was overwritten
    }
    *uid = m_history[lo & (size - 1)].uid;
    return true;
}

bool
RoceScheduler::IsEmpty() const
{
    return m_heap.empty();
}

Scheduler::Event
RoceScheduler::PeekNext() const
{
    NS_ASSERT(!m_heap.empty());
    return m_heap.front();
}

Scheduler::Event
RoceScheduler::RemoveNext()
{
    NS_ASSERT(!m_heap.empty());
    Event next = m_heap.front();
    PopTop();
    DropRemovedTop();
    m_currentUid = next.key.m_uid;
    if (!m_backdated.empty())
    {
        m_backdated.erase(next.impl);
    }
    if (next.key.m_ts != m_lastTs && !m_history.empty())
    {
        m_history[m_historyCount & (m_history.size() - 1)] = Reached{next.key.m_ts, m_nextUid};
        ++m_historyCount;
    }
    m_lastTs = next.key.m_ts;
    return next;
}

void
RoceScheduler::Remove(const Event& ev)
{
    // The simulator only removes pending events (it checks IsExpired first), so ev is in the heap.
    // It cancels and unreferences ev.impl after this call.
    // Matched by EventImpl, not uid: a back-dated event (OrderNextInsertAs) may carry the uid of
    // another one.
    if (!m_heap.empty() && m_heap.front().impl == ev.impl)
    {
        m_backdated.erase(ev.impl);
        PopTop();
        DropRemovedTop();
    }
    else
    {
        // Left in place until it reaches the top; keep its EventImpl alive until then.
        ev.impl->Ref();
        m_removed.insert(ev.impl);
    }
}

} // namespace ns3
