"""DCQCN's alpha without a timer event per period (``cc.lazy_alpha``, default on) gives the timer's results.

The lazy mode applies the elapsed periods' updates, in order and with the same arithmetic, when alpha is next
used (CNP, cut, return to line rate). It must change nothing but the event count: every flow, port and queue
sample identical, and exactly the timer's ``dcqcn_alpha`` events fewer. Cases: each preset on an 8:1 incast
(cuts on the 4 us grid fall on the 1 us alpha grid: same-time order matters) with 1 us links (a CNP's arrival
is scheduled more than one alpha period ahead) and 0.3 us links (less), plus flows that start late and
return to line rate in between (timers stopped, idle decay at the next CNP).
"""

from __future__ import annotations

import numpy as np
import pytest

from hetero_ns3.network.cc_presets import DCQCN_PRESETS, DEFAULT_DCQCN_PRESET
from tests.ns3.dcqcn_lazy_cases import assert_same_tables, eager_and_lazy, incast, rejoin

pytestmark = pytest.mark.ns3


def _pair(preset: str, delay: float, flows, **kw):
    return eager_and_lazy("lazy_alpha", preset, delay, flows, **kw)


@pytest.mark.parametrize("delay", [1e-6, 0.3e-6])
@pytest.mark.parametrize("preset", sorted(DCQCN_PRESETS))
def test_lazy_alpha_gives_the_timer_results_with_fewer_events(capi, preset, delay):
    for flows in (incast(8, 2_000_000), rejoin()):
        timer, lazy = _pair(preset, delay, flows)
        assert_same_tables(timer, lazy)
        ticks = timer.profile["dcqcn_alpha"]
        assert ticks > 0 and lazy.profile["dcqcn_alpha"] == 0
        assert lazy.events == timer.events - ticks  # the alpha timer events and nothing else
        for kind in ("data_hop", "cnp_hop", "dcqcn_decrease", "dcqcn_increase"):
            assert lazy.profile[kind] == timer.profile[kind]


def test_lazy_alpha_takes_the_same_values_in_the_same_order(native):
    """Every flow's traced alpha sequence is the timer's, up to the last time alpha was used (the timer goes on
    updating it until the flow ends; nothing reads those values); every cut uses the same alpha, so every rate
    change is the same, at the same time."""
    timer, lazy = _pair(DEFAULT_DCQCN_PRESET, 1e-6, incast(4, 2_000_000), trace_cc=True)
    for kind in ("alpha", "rate", "target_rate"):
        a = timer.cc_trace[timer.cc_trace["kind"] == kind]
        b = lazy.cc_trace[lazy.cc_trace["kind"] == kind]
        for fid in range(4):
            va = a.loc[a["flow_id"] == fid, "value"].to_numpy()
            vb = b.loc[b["flow_id"] == fid, "value"].to_numpy()
            if kind == "alpha":
                assert 0 < len(vb) <= len(va) and np.array_equal(va[: len(vb)], vb), fid
            else:
                assert np.array_equal(va, vb), (kind, fid)
                ta = a.loc[a["flow_id"] == fid, "time_s"].to_numpy()
                assert np.array_equal(ta, b.loc[b["flow_id"] == fid, "time_s"].to_numpy()), (kind, fid)
