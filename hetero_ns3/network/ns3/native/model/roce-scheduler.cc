#include "roce-scheduler.h"

#include "ns3/assert.h"
#include "ns3/event-impl.h"
#include "ns3/log.h"

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

RoceScheduler::RoceScheduler() = default;

RoceScheduler::~RoceScheduler()
{
    // Removed entries still in the heap hold a reference (the simulator empties the queue of live
    // events through RemoveNext before it drops the scheduler).
    for (const Event& ev : m_heap)
    {
        if (m_removed.count(ev.key.m_uid) != 0)
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
        auto it = m_removed.find(m_heap.front().key.m_uid);
        if (it == m_removed.end())
        {
            return;
        }
        m_removed.erase(it);
        EventImpl* impl = m_heap.front().impl;
        PopTop();
        impl->Unref(); // the reference taken by Remove
    }
}

void
RoceScheduler::Insert(const Event& ev)
{
    m_heap.push_back(ev);
    SiftUp(m_heap.size() - 1);
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
    return next;
}

void
RoceScheduler::Remove(const Event& ev)
{
    // The simulator only removes pending events (it checks IsExpired first), so ev is in the heap.
    // It cancels and unreferences ev.impl after this call.
    if (!m_heap.empty() && m_heap.front().key.m_uid == ev.key.m_uid)
    {
        PopTop();
        DropRemovedTop();
    }
    else
    {
        // Left in place until it reaches the top; keep its EventImpl alive until then.
        ev.impl->Ref();
        m_removed.insert(ev.key.m_uid);
    }
}

} // namespace ns3
