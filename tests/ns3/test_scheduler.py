"""ns3::RoceScheduler (the default event scheduler of our runs) gives the results of ns-3's own schedulers.

Every ns-3 scheduler hands out events in (time stamp, insertion uid) order, a total order, so a run must
be the same bit for bit whichever scheduler holds the queue; ours differs in cost only (O(1) removal of
pending events, a 4-ary heap). The cases exercise removals: finished queue pairs remove their
retransmit timers, PFC resumes remove their refresh timers. Under ours, DCQCN's periodic decrease checks are
scheduled only when a CNP arms them, back-dated to the uid the periodic check would have had (``cc.lazy_decrease``;
under the others they stay periodic): the replay's results are again identical, with fewer ``dcqcn_decrease``
events.
"""

from __future__ import annotations

import pandas as pd
import pytest

from hetero_ns3.collectives import CollectiveCall, CollectiveEnv, plan_collective
from hetero_ns3.network.config import BufferConfig, CcConfig, NetworkConfig
from hetero_ns3.network.ns3.profile import KINDS
from hetero_ns3.plan.builder import PlanBuilder
from hetero_ns3.topology import resolve_topology

pytestmark = pytest.mark.ns3

SCHEDULERS = ("ns3::RoceScheduler", "ns3::PriorityQueueScheduler", "ns3::MapScheduler", "ns3::CalendarScheduler")


def _replay(monkeypatch, scheduler: str):
    from hetero_ns3.network.ns3 import roce
    from hetero_ns3.network.ns3.replay import run_plan

    monkeypatch.setattr(roce, "FAST_SCHEDULER", scheduler)
    graph = resolve_topology("leafspine:2,2,4", 100e9, 1e-6)
    env = CollectiveEnv.from_graph(graph)
    b = PlanBuilder(env.gpus)
    last: dict[str, tuple[int, ...]] = {}
    for i in range(2):
        call = CollectiveCall("all_reduce", env.gpus, 2 << 20, algo="ring", channels=4, name=f"ar{i}")
        res = plan_collective(b, call, env, last)
        last = dict(res.exits)
    return run_plan(graph, b.build(), NetworkConfig(), profile=True)


def _dcqcn_incast(monkeypatch, scheduler: str):
    from hetero_ns3.network.ns3 import roce

    monkeypatch.setattr(roce, "FAST_SCHEDULER", scheduler)
    graph = resolve_topology("star:9", 100e9, 1e-6)
    n = 8
    flows = pd.DataFrame(
        {"src": [f"h{i}" for i in range(1, n + 1)], "dst": ["h0"] * n, "size_bytes": [2_000_000] * n,
         "start_s": [1e-6 * i for i in range(n)]}
    )  # fmt: skip
    return roce.simulate_flows(graph, flows, NetworkConfig())


def _incast(monkeypatch, scheduler: str):
    from hetero_ns3.network.ns3 import roce

    monkeypatch.setattr(roce, "FAST_SCHEDULER", scheduler)
    graph = resolve_topology("star:9", 100e9, 1e-6)
    n = 8
    flows = pd.DataFrame(
        {"src": [f"h{i}" for i in range(1, n + 1)], "dst": ["h0"] * n, "size_bytes": [800_000] * n,
         "start_s": [0.0] * n}
    )  # fmt: skip
    cfg = NetworkConfig(cc=CcConfig(kind="none"), buffer=BufferConfig(switch_buffer_bytes=2_000_000))
    return roce.simulate_flows(graph, flows, cfg)


def test_replay_is_the_same_under_every_scheduler(capi, monkeypatch):
    runs = {s: _replay(monkeypatch, s) for s in SCHEDULERS}
    ref = runs[SCHEDULERS[0]]
    assert ref.completed
    for s, r in runs.items():
        assert (r.times.start_s == ref.times.start_s).all(), s
        assert (r.times.finish_s == ref.times.finish_s).all(), s
        pd.testing.assert_frame_equal(r.flows, ref.flows, check_exact=True)
        pd.testing.assert_frame_equal(r.ports, ref.ports, check_exact=True)
        assert {k: r.profile[k] for k in KINDS} == {k: ref.profile[k] for k in KINDS}, s


def test_incast_with_pfc_is_the_same_under_every_scheduler(capi, monkeypatch):
    runs = {s: _incast(monkeypatch, s) for s in SCHEDULERS}
    ref = runs[SCHEDULERS[0]]
    assert ref.ports["pfc_pause_sent"].sum() > 0  # PAUSE / RESUME and refresh timers were exercised
    for s, r in runs.items():
        pd.testing.assert_frame_equal(r.flows, ref.flows, check_exact=True)
        pd.testing.assert_frame_equal(r.ports, ref.ports, check_exact=True)
        assert r.events == ref.events, s
        assert r.sim_time_s == ref.sim_time_s, s


def test_dcqcn_incast_is_the_same_under_every_scheduler(capi, monkeypatch):
    """Ours schedules DCQCN's periodic decrease checks only when a CNP arms them, back-dated (``cc.lazy_decrease``);
    the others run every check: same flows, ports and events of every other kind."""
    runs = {s: _dcqcn_incast(monkeypatch, s) for s in SCHEDULERS}
    ref = runs[SCHEDULERS[0]]
    assert ref.profile is not None and ref.profile["cnp_hop"] > 0
    kinds = [k for k in KINDS if k != "dcqcn_decrease"]
    for s, r in runs.items():
        pd.testing.assert_frame_equal(r.flows, ref.flows, check_exact=True)
        pd.testing.assert_frame_equal(r.ports, ref.ports, check_exact=True)
        assert {k: r.profile[k] for k in kinds} == {k: ref.profile[k] for k in kinds}, s
        if s != SCHEDULERS[0]:
            assert 0 < ref.profile["dcqcn_decrease"] < r.profile["dcqcn_decrease"] / 2, s
