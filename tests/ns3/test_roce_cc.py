"""Congestion control against its analytic laws and the published incast behaviour (real simulator).

DCQCN (Zhu et al., SIGCOMM'15): every cut is Rc <- Rc (1 - alpha/2), every increase event Rc <- (Rt + Rc)/2,
alpha an EWMA of "a CNP arrived in the period" with gain g; read from the TracedValues Rate / TargetRate /
Alpha of ``ns3::RdmaDcqcn`` through ``ns3::RdmaCcProbe``. Incast bounds per preset are the measured
figures of docs/roce.md ("Presets") with their tolerance.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from hetero_ns3.network.ns3.roce import egress_port, simulate_flows

from hetero_ns3.network.cc_presets import DCQCN_PRESETS, DEFAULT_DCQCN_PRESET, HPCC_PRESETS
from hetero_ns3.network.config import CcConfig, DctcpConfig, EcnConfig, NetworkConfig
from hetero_ns3.topology import resolve_topology

pytestmark = pytest.mark.ns3

RATE = 100e9
DELAY = 1e-6
WIRE = (4096 + 62) / 4096  # DATA wire bytes per payload byte


def _incast(n: int, size: int) -> pd.DataFrame:
    return pd.DataFrame(
        {"src": [f"h{i}" for i in range(1, n + 1)], "dst": ["h0"] * n, "size_bytes": [size] * n, "start_s": [0.0] * n}
    )


def _jain(x: np.ndarray) -> float:
    return float(x.sum() ** 2 / (len(x) * (x**2).sum()))


def _run(cc: CcConfig, n: int = 8, size: int = 10_000_000, **kw):
    graph = resolve_topology(f"star:{n + 1}", RATE, DELAY)
    res = simulate_flows(graph, _incast(n, size), NetworkConfig(cc=cc), **kw)
    assert res.completed == n
    return graph, res


def test_trace_sources_count_every_mark_and_cnp(native):
    _, res = _run(CcConfig(kind="dcqcn"), n=4, size=2_000_000, trace_cc=True)
    t = res.cc_trace
    assert (t["kind"] == "ecn_mark").sum() == res.ports["ecn_marks"].sum() > 0
    sent = t[t["kind"] == "cnp_sent"].groupby("flow_id").size()
    assert sent.reindex(range(4), fill_value=0).tolist() == res.flows["cnps"].tolist()
    assert (t["kind"] == "cnp_received").sum() == (t["kind"] == "cnp_sent").sum()


@pytest.mark.parametrize("preset", sorted(DCQCN_PRESETS))
def test_dcqcn_rate_follows_cut_and_recovery_laws(native, preset):
    """Every Rc change is a cut Rc(1 - alpha/2) (floored at the min rate) or an increase (Rt + Rc)/2."""
    p = DCQCN_PRESETS[preset]
    _, res = _run(CcConfig(kind="dcqcn", preset=preset), n=4, size=2_000_000, trace_cc=True)
    t = res.cc_trace
    cuts = recoveries = 0
    for _, rec in t[t["kind"].isin(["rate", "target_rate", "alpha"])].groupby("flow_id", sort=True):
        rc = rt = None
        alpha = 1.0
        for kind, value in zip(rec["kind"], rec["value"], strict=True):
            if kind == "alpha":
                alpha = value
            elif kind == "target_rate":
                rt = value
            elif rc is None:
                rc = value
                assert rc == pytest.approx(RATE)  # starts at line rate
            else:
                if value < rc and not np.isclose(value, (rt + rc) / 2, rtol=1e-9):
                    assert value == pytest.approx(max(rc * (1 - alpha / 2), p["min_rate_bps"]), rel=1e-9)
                    cuts += 1
                else:
                    assert value == pytest.approx(min((rt + rc) / 2, RATE), rel=1e-9)
                    recoveries += 1
                rc = value
    assert cuts > 0 and recoveries > 0
    # after the first CNP of a flow, its rate is Rc (1 - alpha/2) with alpha = 1: half the line rate
    first = t[(t["kind"] == "cnp_received") & (t["flow_id"] == 0)]["time_s"].min()
    after = t[(t["kind"] == "rate") & (t["flow_id"] == 0) & (t["time_s"] >= first)]["value"].iloc[0]
    assert after == pytest.approx(RATE / 2, rel=1e-9)


def test_dcqcn_alpha_is_an_ewma_of_cnp_arrivals(native):
    """Each alpha update is (1-g) alpha + g (a CNP arrived in the period) or (1-g) alpha (none did)."""
    g = DCQCN_PRESETS[DEFAULT_DCQCN_PRESET]["g"]
    _, res = _run(CcConfig(kind="dcqcn"), n=4, size=2_000_000, trace_cc=True)
    t = res.cc_trace
    rises = decays = 0
    for _, a in t[t["kind"] == "alpha"].groupby("flow_id"):
        prev = np.concatenate([[1.0], a["value"].to_numpy()[:-1]])
        now = a["value"].to_numpy()
        up = np.isclose(now, (1 - g) * prev + g, rtol=1e-9)
        down = np.isclose(now, (1 - g) * prev, rtol=1e-9)
        # back from idle (rate at line rate, timers stopped): the k missed decays at once, k integer
        k = np.log(now / prev) / np.log(1 - g)
        idle = (k > 1.5) & np.isclose(k, np.round(k), atol=1e-6)
        assert (up | down | idle).all()
        rises += int(up.sum())
        decays += int(down.sum())
    assert rises > 0 and decays > rises  # marks stop once the queue drains: alpha decays afterwards


def test_cc_orders_the_bottleneck_queue(native):
    """HPCC holds the incast queue far below DCQCN's (p99 and peak), and DCQCN below no CC at all."""
    graph = resolve_topology("star:9", RATE, DELAY)
    port = egress_port(graph, "sw0", "h0")
    p99, peak = {}, {}
    for kind in ("none", "dcqcn", "hpcc"):
        res = simulate_flows(graph, _incast(8, 2_000_000), NetworkConfig(cc=CcConfig(kind=kind)), sample_ports=[port])
        assert res.completed == 8
        q = res.queues["bytes"].to_numpy()
        p99[kind], peak[kind] = float(np.percentile(q, 99)), float(q.max())
    assert peak["hpcc"] < 0.25 * peak["dcqcn"] and p99["hpcc"] < 0.25 * p99["dcqcn"]
    assert peak["dcqcn"] < 0.8 * peak["none"]


# (preset, makespan / ideal range, min Jain) on the 8:1 incast of 10 MB flows, 100 Gbps, 32 MiB buffer; measured
# 1.188 / 1.000 and 2.280 / 1.000 (docs/roce.md, "Presets"). The paper's clamp (Rt = Rc on every cut) with its
# 40 Gbps-era increase steps recovers slowly from the first over-cut: its range is bounded below too.
# connectx is left out: its outcome swings (2.3x to 5.5x, one flow starved at 1 Mb/s) with tiny model changes.
DCQCN_INCAST = [("hpcc-artifact", 1.0, 1.25, 0.99), ("paper", 2.0, 2.45, 0.99)]


@pytest.mark.parametrize(("preset", "min_ratio", "max_ratio", "min_jain"), DCQCN_INCAST)
def test_dcqcn_incast_utilisation_and_fairness_per_preset(native, preset, min_ratio, max_ratio, min_jain):
    _, res = _run(CcConfig(kind="dcqcn", preset=preset))
    f, ports = res.flows, res.ports
    ideal = 8 * 10_000_000 * WIRE * 8 / RATE
    ratio = float(f["finish_s"].max()) / ideal
    assert min_ratio <= ratio <= max_ratio
    assert _jain((f["size_bytes"] / f["fct_s"]).to_numpy()) >= min_jain
    assert ports["pfc_pause_sent"].sum() == 0 and ports["drops_total"].sum() == 0  # the CC, not PFC, did it


@pytest.mark.parametrize("preset", sorted(HPCC_PRESETS))
def test_hpcc_presets_hold_utilisation_near_eta(native, preset):
    """HPCC keeps the bottleneck busy at about eta: the incast makespan is within [1, 1.1/eta] x ideal."""
    eta = HPCC_PRESETS[preset]["eta"]
    _, res = _run(CcConfig(kind="hpcc", preset=preset), size=2_000_000)
    ideal = 8 * 2_000_000 * (4096 + 62 + 42) / 4096 * 8 / RATE
    ratio = float(res.flows["finish_s"].max()) / ideal
    assert 1.0 <= ratio <= 1.1 / eta
    assert _jain((res.flows["size_bytes"] / res.flows["fct_s"]).to_numpy()) >= 0.95


def _dctcp_incast(step_k: int, size: int = 2_000_000, n: int = 8):
    """DCTCP on an n:1 incast with the switch's step marking at K bytes (DCTCP's switch setting)."""
    graph = resolve_topology(f"star:{n + 1}", RATE, DELAY)
    port = egress_port(graph, "sw0", "h0")
    ecn = EcnConfig(kmin_bytes=step_k, kmax_bytes=step_k, pmax=1.0, scale_with_rate=False)
    cfg = NetworkConfig(cc=CcConfig(kind="dctcp"), ecn=ecn)
    res = simulate_flows(graph, _incast(n, size), cfg, sample_ports=[port], trace_cc=True)
    assert res.completed == n
    return res


def test_dctcp_cuts_its_window_by_alpha_over_two(native):
    """Per window: alpha <- (1-g) alpha + g F with F the marked fraction in [0, 1]; a marked window is cut
    to W (1 - alpha/2), an unmarked one grows by one segment (or stays clamped at one BDP)."""
    g = DctcpConfig().g
    res = _dctcp_incast(step_k=40_000)
    t = res.cc_trace
    cuts = grows = 0
    for fid, rec in t[t["kind"].isin(["window", "alpha"])].groupby("flow_id"):
        rtt = float(res.flows["base_rtt_s"][fid])
        wmin, wmax = DctcpConfig().min_rate_bps * rtt / 8, RATE * rtt / 8
        w = None
        alpha = 1.0
        for kind, value in zip(rec["kind"], rec["value"], strict=True):
            if kind == "alpha":
                f = (value - (1 - g) * alpha) / g
                assert -1e-9 <= f <= 1 + 1e-9
                alpha = value
            elif w is None:
                w = value
                assert w == pytest.approx(wmax)  # starts at one BDP
            else:
                if value < w:
                    assert value == pytest.approx(max(w * (1 - alpha / 2), wmin), rel=1e-9)
                    cuts += 1
                else:
                    assert value == pytest.approx(min(w + 4096, wmax), rel=1e-9)
                    grows += 1
                w = value
    assert cuts > 0 and grows > 0


def test_dctcp_holds_the_queue_near_its_marking_threshold(native):
    """With step marking at K, DCTCP keeps the incast queue within a few K (no CC: megabytes) at full rate."""
    k = 100_000
    res = _dctcp_incast(step_k=k)
    q = res.queues["bytes"].to_numpy()
    assert np.percentile(q, 99) < 4 * k
    ideal = 8 * 2_000_000 * WIRE * 8 / RATE
    assert float(res.flows["finish_s"].max()) / ideal <= 1.05
    assert _jain((res.flows["size_bytes"] / res.flows["fct_s"]).to_numpy()) >= 0.95
    none = simulate_flows(
        resolve_topology("star:9", RATE, DELAY),
        _incast(8, 2_000_000),
        NetworkConfig(cc=CcConfig(kind="none"), ecn=EcnConfig(kmin_bytes=k, kmax_bytes=k, pmax=1.0)),
        sample_ports=[egress_port(resolve_topology("star:9", RATE, DELAY), "sw0", "h0")],
    )
    assert np.percentile(none.queues["bytes"], 99) > 10 * np.percentile(q, 99)
