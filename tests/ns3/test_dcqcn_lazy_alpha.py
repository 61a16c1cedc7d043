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
import pandas as pd
import pytest

from hetero_ns3.network.cc_presets import DCQCN_PRESETS, DEFAULT_DCQCN_PRESET
from hetero_ns3.network.config import CcConfig, NetworkConfig
from hetero_ns3.network.ns3.roce import egress_port, simulate_flows
from hetero_ns3.topology import resolve_topology

pytestmark = pytest.mark.ns3


def _incast(n: int, size: int) -> pd.DataFrame:
    return pd.DataFrame(
        {"src": [f"h{i}" for i in range(1, n + 1)], "dst": ["h0"] * n, "size_bytes": [size] * n, "start_s": [0.0] * n}
    )


def _rejoin() -> pd.DataFrame:
    """A 100 MB flow cut by a 2 MB one at t = 0, back at line rate when a second 2 MB one joins at 7 ms."""
    return pd.DataFrame(
        {
            "src": ["h1", "h2", "h3"],
            "dst": ["h0"] * 3,
            "size_bytes": [100_000_000, 2_000_000, 2_000_000],
            "start_s": [0.0, 0.0, 7e-3],
        }
    )


def _pair(preset: str, delay: float, flows: pd.DataFrame, **kw):
    graph = resolve_topology(f"star:{len(flows) + 1}", 100e9, delay)
    port = egress_port(graph, "sw0", "h0")
    out = []
    for lazy in (False, True):
        cfg = NetworkConfig(cc=CcConfig(kind="dcqcn", preset=preset, lazy_alpha=lazy))
        res = simulate_flows(graph, flows, cfg, sample_ports=[port], **kw)
        assert res.completed == len(flows)
        out.append(res)
    return out


@pytest.mark.parametrize("delay", [1e-6, 0.3e-6])
@pytest.mark.parametrize("preset", sorted(DCQCN_PRESETS))
def test_lazy_alpha_gives_the_timer_results_with_fewer_events(capi, preset, delay):
    for flows in (_incast(8, 2_000_000), _rejoin()):
        timer, lazy = _pair(preset, delay, flows)
        pd.testing.assert_frame_equal(lazy.flows, timer.flows, check_exact=True)
        pd.testing.assert_frame_equal(lazy.ports, timer.ports, check_exact=True)
        pd.testing.assert_frame_equal(lazy.queues, timer.queues, check_exact=True)
        assert timer.profile is not None and lazy.profile is not None
        ticks = timer.profile["dcqcn_alpha"]
        assert ticks > 0 and lazy.profile["dcqcn_alpha"] == 0
        assert lazy.events == timer.events - ticks  # the alpha timer events and nothing else
        for kind in ("data_hop", "cnp_hop", "dcqcn_decrease", "dcqcn_increase"):
            assert lazy.profile[kind] == timer.profile[kind]


def test_lazy_alpha_takes_the_same_values_in_the_same_order(native):
    """Every flow's traced alpha sequence is the timer's, up to the last time alpha was used (the timer goes on
    updating it until the flow ends; nothing reads those values); every cut uses the same alpha, so every rate
    change is the same, at the same time."""
    timer, lazy = _pair(DEFAULT_DCQCN_PRESET, 1e-6, _incast(4, 2_000_000), trace_cc=True)
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
