"""DCQCN's periodic rate-decrease checks scheduled only when a CNP arms them (``cc.lazy_decrease``, default on).

With ``dcqcn.decrease_on_period`` (presets ``hpcc-artifact``, ``connectx``) a check runs every 4 us from a flow's
first CNP while it is rate limited, and cuts only if a CNP arrived since the previous one. The lazy mode schedules
a check only when a CNP sets that flag, at the next point of the same grid, and orders it among the events of its
nanosecond with the uid the periodic check would have had (``RoceScheduler::UidCounterAt``). It must change
nothing but the number of ``dcqcn_decrease`` events: every flow, port and queue sample and every rate change
identical. Cases as in ``test_dcqcn_lazy_alpha.py``: an 8:1 incast (cuts, alpha and increase timers on common
grids) and a flow that returns to line rate and is cut again (checks stopped, restarted on the grid), with 1 us
and 0.3 us links, for each preset (``paper`` cuts at the CNP: nothing to skip, same events).
"""

from __future__ import annotations

import numpy as np
import pytest

from hetero_ns3.network.cc_presets import DCQCN_PRESETS, DEFAULT_DCQCN_PRESET
from tests.ns3.dcqcn_lazy_cases import assert_same_tables, eager_and_lazy, incast, rejoin

pytestmark = pytest.mark.ns3


def _pair(preset: str, delay: float, flows, **kw):
    return eager_and_lazy("lazy_decrease", preset, delay, flows, **kw)


@pytest.mark.parametrize("delay", [1e-6, 0.3e-6])
@pytest.mark.parametrize("preset", sorted(DCQCN_PRESETS))
def test_lazy_decrease_gives_the_periodic_results_with_fewer_events(capi, preset, delay):
    periodic_preset = DCQCN_PRESETS[preset].get("decrease_on_period", False)
    for flows in (incast(8, 2_000_000), rejoin()):
        timer, lazy = _pair(preset, delay, flows)
        assert_same_tables(timer, lazy)
        saved = timer.profile["dcqcn_decrease"] - lazy.profile["dcqcn_decrease"]
        if periodic_preset:
            # most checks find no CNP: at least half of them cost no event now
            assert lazy.profile["dcqcn_decrease"] > 0 and saved > timer.profile["dcqcn_decrease"] // 2
        else:
            assert saved == 0
        for kind in ("data_hop", "cnp_hop", "ack_hop", "dcqcn_alpha", "dcqcn_increase", "tx_complete"):
            assert lazy.profile[kind] == timer.profile[kind], kind
        assert lazy.events == timer.events - saved  # the skipped checks and nothing else


def test_lazy_decrease_makes_the_same_cuts_at_the_same_times(native):
    """Every rate and target-rate change of every flow, value and time, is the periodic checks'."""
    timer, lazy = _pair(DEFAULT_DCQCN_PRESET, 1e-6, incast(4, 2_000_000), trace_cc=True)
    for kind in ("rate", "target_rate", "alpha"):
        a = timer.cc_trace[timer.cc_trace["kind"] == kind]
        b = lazy.cc_trace[lazy.cc_trace["kind"] == kind]
        assert len(a) > 0
        for fid in range(4):
            for col in ("value", "time_s"):
                va = a.loc[a["flow_id"] == fid, col].to_numpy()
                vb = b.loc[b["flow_id"] == fid, col].to_numpy()
                assert np.array_equal(va, vb), (kind, fid, col)
