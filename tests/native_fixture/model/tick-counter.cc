#include "tick-counter.h"

#include "ns3/simulator.h"
#include "ns3/uinteger.h"

namespace ns3
{

NS_OBJECT_ENSURE_REGISTERED(TickCounter);

TypeId
TickCounter::GetTypeId()
{
    static TypeId tid =
        TypeId("ns3::TickCounter")
            .SetParent<Application>()
            .SetGroupName("HeteroNs3Fixture")
            .AddConstructor<TickCounter>()
            .AddAttribute("Interval",
                          "Time between two ticks",
                          TimeValue(NanoSeconds(1)),
                          MakeTimeAccessor(&TickCounter::m_interval),
                          MakeTimeChecker(Time(0)))
            .AddAttribute("Limit",
                          "Number of ticks to count",
                          UintegerValue(1000),
                          MakeUintegerAccessor(&TickCounter::m_limit),
                          MakeUintegerChecker<uint64_t>())
            .AddTraceSource("Ticks",
                            "Ticks counted so far",
                            MakeTraceSourceAccessor(&TickCounter::m_ticks),
                            "ns3::TracedValueCallback::Uint64");
    return tid;
}

TickCounter::TickCounter()
    : m_limit(0),
      m_ticks(0)
{
}

uint64_t
TickCounter::GetTicks() const
{
    return m_ticks;
}

void
TickCounter::StartApplication()
{
    Simulator::Schedule(m_interval, &TickCounter::Tick, this);
}

void
TickCounter::Tick()
{
    m_ticks = m_ticks + 1;
    if (m_ticks < m_limit)
    {
        Simulator::Schedule(m_interval, &TickCounter::Tick, this);
    }
}

} // namespace ns3
