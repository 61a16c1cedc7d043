#ifndef HETERO_NS3_TICK_COUNTER_H
#define HETERO_NS3_TICK_COUNTER_H

#include "ns3/application.h"
#include "ns3/nstime.h"
#include "ns3/traced-value.h"

#include <cstdint>

namespace ns3
{

/**
 * \brief Test fixture: an Application that schedules itself every Interval until it has
 * counted Limit ticks. Proves that a module compiled against the ns3 wheel registers its
 * TypeId, can be created by ObjectFactory from Python and runs events in the simulator.
 */
class TickCounter : public Application
{
  public:
    /** \return the TypeId of this class. */
    static TypeId GetTypeId();
    TickCounter();
    /** \return the number of ticks counted so far. */
    uint64_t GetTicks() const;

  private:
    void StartApplication() override;
    void Tick();

    Time m_interval;             //!< time between ticks
    uint64_t m_limit;            //!< ticks to count before stopping
    TracedValue<uint64_t> m_ticks; //!< ticks counted
};

} // namespace ns3

#endif
