"""TIMELY (Mittal et al., SIGCOMM 2015, Algorithm 1) against its own update rule (real simulator).

The strategy ``ns3::RdmaTimely`` traces every RTT sample (``Rtt``) and every rate change (``Rate``) through
``ns3::RdmaCcProbe``; the tests replay Algorithm 1 on the traced RTTs and require each traced rate to be
the rule's answer. Incast: TIMELY bounds the bottleneck queue where no CC does not.
"""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pandas as pd
import pytest

from hetero_ns3.network.cc_presets import TIMELY_PRESETS
from hetero_ns3.network.config import CcConfig, NetworkConfig, NicConfig, TimelyConfig
from hetero_ns3.network.ns3.roce import egress_port, simulate_flows
from hetero_ns3.topology import resolve_topology

pytestmark = pytest.mark.ns3

RATE = 100e9
DELAY = 1e-6
# Thresholds scaled to this 1 us-per-link network (base RTT 4.7 us) so that one short 4:1 incast with an
# ACK (RTT sample) per frame visits every branch of Algorithm 1; the paper's constants are used below.
SCALED = TimelyConfig(t_low_s=5.2e-6, t_high_s=100e-6, min_rtt_s=50e-6, rate_ai_bps=1e9)


def _incast(n: int, size: int) -> pd.DataFrame:
    return pd.DataFrame(
        {"src": [f"h{i}" for i in range(1, n + 1)], "dst": ["h0"] * n, "size_bytes": [size] * n, "start_s": [0.0] * n}
    )


def _run(timely: TimelyConfig | None, n: int = 8, size: int = 2_000_000, ack_interval: int | None = None, **kw):
    graph = resolve_topology(f"star:{n + 1}", RATE, DELAY)
    cc = CcConfig(kind="timely", timely=timely) if timely is not None else CcConfig(kind="none")
    port = egress_port(graph, "sw0", "h0")
    cfg = NetworkConfig(cc=cc, nic=NicConfig(ack_interval=ack_interval))
    res = simulate_flows(graph, _incast(n, size), cfg, sample_ports=[port], **kw)
    assert res.completed == n
    return res


def _replay(cfg: TimelyConfig, rec: pd.DataFrame) -> dict[str, int]:
    """Check one flow's trace against Algorithm 1; return how often each branch fired."""
    p = SimpleNamespace(**CcConfig(kind="timely", timely=cfg).timely_params())
    hits = {"low": 0, "high": 0, "hai": 0, "ai": 0, "cut": 0}
    rate: float | None = None
    expected: float | None = None
    prev = diff = None
    neg = 0
    for kind, value in zip(rec["kind"], rec["value"], strict=True):
        if kind == "rate":
            if rate is None:
                assert value == pytest.approx(RATE)  # starts at line rate
            else:
                assert expected is not None and value == pytest.approx(expected, rel=1e-9, abs=1e-3)
            rate, expected = value, None
            continue
        assert kind == "rtt" and rate is not None
        if expected is not None:  # the previous update left the rate unchanged (clamped)
            assert expected == pytest.approx(rate, rel=1e-9)
        if prev is None:
            prev, diff = value, 0.0
            continue
        diff = (1 - p.alpha) * diff + p.alpha * (value - prev)
        prev = value
        grad = diff / p.min_rtt_s
        if value < p.t_low_s:
            r, branch = rate + p.rate_ai_bps, "low"
        elif value > p.t_high_s:
            r, branch, neg = rate * (1 - p.beta * (1 - p.t_high_s / value)), "high", 0
        elif grad <= 0:
            neg += 1
            hai = neg >= p.hai_count
            r, branch = rate + (p.hai_factor if hai else 1) * p.rate_ai_bps, "hai" if hai else "ai"
        else:
            r, branch, neg = rate * (1 - p.beta * grad), "cut", 0
        hits[branch] += 1
        expected = min(max(r, p.min_rate_bps), RATE)
    return hits


def _branches(res) -> dict[str, int]:
    t = res.cc_trace
    total = {"low": 0, "high": 0, "hai": 0, "ai": 0, "cut": 0}
    for _, rec in t[t["kind"].isin(["rate", "rtt"])].groupby("flow_id", sort=True):
        for k, v in _replay(SCALED, rec).items():
            total[k] += v
    return total


def test_timely_rate_follows_algorithm_1_on_the_traced_rtts(native):
    """Every rate change equals Algorithm 1 recomputed from the traced RTT samples; all branches occur,
    with an ACK per frame and with the default coalescing (one RTT sample per 16 frames)."""
    res = _run(SCALED, n=4, ack_interval=1, trace_cc=True)
    total = _branches(res)
    assert all(v > 0 for v in total.values()), total
    # RTT samples are ACK arrival - send time: never below the propagation delay (4 links)
    rtts = res.cc_trace.loc[res.cc_trace["kind"] == "rtt", "value"].to_numpy()
    assert rtts.min() >= 4 * DELAY
    coalesced = _branches(_run(SCALED, n=4, trace_cc=True))
    assert coalesced["cut"] > 0 and coalesced["low"] > 0
    assert sum(coalesced.values()) < sum(total.values()) / 8


def test_timely_below_t_low_only_adds_delta(native):
    """A flow alone sees RTT < T_low on every sample: its rate never drops (it stays at line rate); in the
    incast every update made with an RTT below T_low is exactly +delta (the replay's "low" branch)."""
    graph = resolve_topology("star:2", RATE, DELAY)
    flows = pd.DataFrame({"src": ["h1"], "dst": ["h0"], "size_bytes": [4_000_000], "start_s": [0.0]})
    res = simulate_flows(graph, flows, NetworkConfig(cc=CcConfig(kind="timely")), trace_cc=True)
    t = res.cc_trace
    rtts = t.loc[t["kind"] == "rtt", "value"].to_numpy()
    assert len(rtts) >= 4_000_000 // 4096 // 16 - 1
    assert rtts.max() < TIMELY_PRESETS["paper"]["t_low_s"]
    # no queue: every full-frame sample is the base RTT (the last, shorter frame is faster)
    base = float(res.flows["base_rtt_s"].iloc[0])
    assert np.allclose(rtts[:-1], base, rtol=1e-6)
    assert t.loc[t["kind"] == "rate", "value"].tolist() == [RATE]
    assert _branches(_run(SCALED, n=4, ack_interval=1, trace_cc=True))["low"] > 0


@pytest.mark.parametrize("preset", sorted(TIMELY_PRESETS))
def test_timely_bounds_the_incast_queue_and_changes_results(capi, preset):
    """8:1 incast of 2 MB: TIMELY's peak queue stays well below no CC's (7.8 MB vs 14.2 MB, docs/roce.md);
    the flows finish later than without CC (rate floor and slow additive recovery), so results change."""
    graph = resolve_topology("star:9", RATE, DELAY)
    port = egress_port(graph, "sw0", "h0")
    timely = simulate_flows(
        graph, _incast(8, 2_000_000), NetworkConfig(cc=CcConfig(kind="timely", preset=preset)), sample_ports=[port]
    )
    none = _run(None)
    assert timely.completed == 8
    q_t = timely.queues["bytes"].to_numpy()
    q_n = none.queues["bytes"].to_numpy()
    assert q_t.max() < 0.6 * q_n.max()
    assert float(timely.flows["finish_s"].max()) > 1.5 * float(none.flows["finish_s"].max())
