"""ns3::RoceScheduler's back-dated insertion, the mechanism behind ``cc.lazy_decrease``.

A periodic timer left unscheduled (``RdmaDcqcn::LazyDecrease``) is scheduled only when a tick has work; that event
must run where the tick would have run among the events of its nanosecond, i.e. with the uid it would have had
(the uid counter when the simulation reached the time the tick would have been scheduled:
``UidCounterAt``, given to the event by ``OrderNextInsertAs``). Checked directly on the simulator: three events
at 10 ns, one scheduled at 0, one at 4 ns, one at 6 ns but back-dated to 4 ns (it takes the uid of the one
scheduled at 4 ns and goes before it); the window of kept time stamps; and that without back-dating the order is
the plain scheduling order (so the check can fail).
"""

from __future__ import annotations

import pytest

pytestmark = pytest.mark.ns3

_CODE = r"""
#include "hetero-ns3-module.h"
#include "ns3/object-factory.h"
#include "ns3/simulator.h"
#include <string>
#include <vector>

namespace hetero_backdate_test
{
using namespace ns3;

struct Probe
{
    std::string order;
    bool backdate{true};
    uint32_t uidAt4{0};
    bool known{false};

    void Mark(const char* name) { order += std::string(name) + " "; }
    void At4() { Simulator::Schedule(NanoSeconds(6), &Probe::Mark, this, "scheduled_at_4"); }
    void At6()
    {
        RoceScheduler* s = RoceScheduler::Current();
        known = s->UidCounterAt(NanoSeconds(4).GetTimeStep(), &uidAt4);
        if (backdate)
        {
            s->OrderNextInsertAs(uidAt4);
        }
        Simulator::Schedule(NanoSeconds(4), &Probe::Mark, this, "backdated_to_4");
    }
};

inline void UseRoceScheduler(int64_t window)
{
    ObjectFactory f;
    f.SetTypeId("ns3::RoceScheduler");
    Simulator::SetScheduler(f);
    RoceScheduler::Current()->KeepHistory(window);
}

inline std::string RunThree(bool backdate)
{
    UseRoceScheduler(100);
    Probe p;
    p.backdate = backdate;
    Simulator::Schedule(NanoSeconds(10), &Probe::Mark, &p, "scheduled_at_0");
    Simulator::Schedule(NanoSeconds(4), &Probe::At4, &p);
    Simulator::Schedule(NanoSeconds(6), &Probe::At6, &p);
    Simulator::Run();
    Simulator::Destroy();
    return std::string(p.known ? "" : "unknown ") + p.order;
}

struct Window
{
    std::vector<int> known;
    void Ask()
    {
        for (int t = 0; t <= 10; ++t)
        {
            uint32_t uid = 0;
            known.push_back(RoceScheduler::Current()->UidCounterAt(NanoSeconds(t).GetTimeStep(), &uid));
        }
    }
};

inline std::vector<int> RunWindow()
{
    UseRoceScheduler(1); // at least 4 time stamps kept
    Window w;
    for (int t = 1; t <= 9; ++t)
    {
        Simulator::Schedule(NanoSeconds(t), &Window::Ask, &w); // time stamps reached: 1..9
    }
    Simulator::Run();
    Simulator::Destroy();
    return std::vector<int>(w.known.end() - 11, w.known.end()); // as asked at 9 ns
}
} // namespace hetero_backdate_test
"""


@pytest.fixture(scope="module")
def backdate(native):
    import cppyy

    if not hasattr(cppyy.gbl, "hetero_backdate_test"):
        cppyy.cppdef(_CODE)
    return cppyy.gbl.hetero_backdate_test


def test_a_backdated_event_runs_where_it_would_have_been_scheduled(backdate):
    assert str(backdate.RunThree(True)).split() == ["scheduled_at_0", "backdated_to_4", "scheduled_at_4"]


def test_without_backdating_the_order_is_the_scheduling_order(backdate):
    assert str(backdate.RunThree(False)).split() == ["scheduled_at_0", "scheduled_at_4", "backdated_to_4"]


def test_uid_counters_are_known_for_the_kept_window_only(backdate):
    known = list(backdate.RunWindow())
    # asked at 9 ns with 4 time stamps kept (6, 7, 8, 9): 0..5 are older than the window, 10 not reached yet
    assert known == [0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 0]
