#include "roce-scheduler.h"

#include "ns3/assert.h"
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

RoceScheduler::~RoceScheduler() = default;

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
    while (!m_removed.empty() && !m_heap.empty())
    {
        auto it = m_removed.find(m_heap.front().key.m_uid);
        if (it == m_removed.end())
        {
            return;
        }
        m_removed.erase(it);
        PopTop();
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
    if (!m_heap.empty() && m_heap.front().key.m_uid == ev.key.m_uid)
    {
        PopTop();
    }
    else
    {
        m_removed.insert(ev.key.m_uid);
    }
    DropRemovedTop();
}

} // namespace ns3
