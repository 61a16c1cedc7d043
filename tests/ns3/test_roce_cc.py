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

from hetero_ns3.network.cc_presets import DCQCN_PRESETS, DEFAULT_DCQCN_PRESET, HPCC_PRESETS
from hetero_ns3.network.config import CcConfig, DctcpConfig, EcnConfig, HpccConfig, NetworkConfig
from hetero_ns3.network.ns3.base_rtt import network_base_rtt
from hetero_ns3.network.ns3.roce import egress_port, simulate_flows
from hetero_ns3.topology import resolve_topology
from hetero_ns3.topology.graph import GraphLink, GraphNode, make_graph

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
    # The first cut of a flow: the paper's reaction point cuts at the first CNP itself with alpha = 1 (its
    # initial value): half the line rate. NIC style (decrease_on_period) cuts at the first periodic check,
    # one RateDecreaseInterval after that CNP, with alpha between 1 and (1 - g)^k for the k alpha updates
    # of that interval (periods without a CNP decay it).
    first = t[(t["kind"] == "cnp_received") & (t["flow_id"] == 0)]["time_s"].min()
    cut = t[(t["kind"] == "rate") & (t["flow_id"] == 0) & (t["time_s"] >= first)].iloc[0]
    if p["decrease_on_period"]:
        assert cut["time_s"] == pytest.approx(first + p["rate_decrease_interval_s"], abs=1e-12)
        k = round(p["rate_decrease_interval_s"] / p["alpha_update_interval_s"])
        assert RATE / 2 * (1 - 1e-9) <= cut["value"] <= RATE * (1 - (1 - p["g"]) ** k / 2) * (1 + 1e-9)
    else:
        assert cut["time_s"] == pytest.approx(first, abs=1e-12)
        assert cut["value"] == pytest.approx(RATE / 2, rel=1e-9)


@pytest.mark.parametrize("preset", sorted(p for p, v in DCQCN_PRESETS.items() if v["decrease_on_period"]))
def test_dcqcn_nic_style_cuts_only_on_the_period_grid(native, preset):
    """HPCC artifact (CheckRateDecreaseMlx) and ConnectX (rate_reduce_monitor_period): a CNP only flags the flow;
    cuts happen at first CNP + k x RateDecreaseInterval (k >= 1), at most one per period, each after a CNP
    received in the period that ends there."""
    period = DCQCN_PRESETS[preset]["rate_decrease_interval_s"]
    _, res = _run(CcConfig(kind="dcqcn", preset=preset), n=4, size=2_000_000, trace_cc=True)
    t = res.cc_trace
    n_cuts = 0
    for _, rec in t.groupby("flow_id", sort=True):
        cnp = np.sort(rec.loc[rec["kind"] == "cnp_received", "time_s"].to_numpy())
        rate = rec[rec["kind"] == "rate"]
        times, values = rate["time_s"].to_numpy(), rate["value"].to_numpy()
        cut_times = times[1:][values[1:] < values[:-1]]  # Rt >= Rc always: every decrease is a cut
        k = np.round((cut_times - cnp[0]) / period)
        assert np.allclose(cut_times, cnp[0] + k * period, rtol=0, atol=1e-12)
        assert (k >= 1).all() and len(np.unique(k)) == len(k)
        # a CNP arrived in (t - period, t] before each cut (inclusive at the previous check: same-time order)
        lo = np.searchsorted(cnp, cut_times - period - 1e-12, side="left")
        hi = np.searchsorted(cnp, cut_times + 1e-12, side="right")
        assert (hi > lo).all()
        n_cuts += len(cut_times)
    assert n_cuts > 0


def test_dcqcn_timer_stages_follow_the_artifact(native):
    """Timer-only increase (HPCC artifact RateIncEventMlx, F = 1): after a cut, the first timer event is fast
    recovery (Rt unchanged), the second additive (Rt += R_AI), later ones hyper (Rt += R_HAI), each capped at
    line rate, and each sets Rc = (Rt + Rc) / 2."""
    p = DCQCN_PRESETS[DEFAULT_DCQCN_PRESET]
    assert p["byte_counter_bytes"] == 0 and p["fast_recovery_steps"] == 1
    scale = RATE / p["increase_reference_rate_bps"]
    step = {1: 0.0, 2: p["rate_ai_bps"] * scale}
    _, res = _run(CcConfig(kind="dcqcn"), n=8, size=10_000_000, trace_cc=True)
    t = res.cc_trace
    seen: dict[int, int] = {}
    for _, rec in t[t["kind"].isin(["rate", "target_rate"])].groupby("flow_id", sort=True):
        rc, rt, since_cut = RATE, RATE, 0
        rt_before = RATE
        for kind, value in zip(rec["kind"], rec["value"], strict=True):
            if kind == "target_rate":
                rt = value
                continue
            if value < rc:  # a cut (Rt >= Rc always)
                since_cut = 0
            else:
                since_cut += 1
                expect_rt = min(rt_before + step.get(since_cut, p["rate_hai_bps"] * scale), RATE)
                assert rt == pytest.approx(expect_rt, rel=1e-9)
                assert value == pytest.approx(min((rt + rc) / 2, RATE), abs=1e-6 * RATE)  # snapped at line rate
                seen[min(since_cut, 3)] = seen.get(min(since_cut, 3), 0) + 1
            rc, rt_before = value, rt
    assert set(seen) == {1, 2, 3}  # every stage occurs


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


# (preset, makespan / ideal range) on the 8:1 incast of 10 MB flows, 100 Gbps, 32 MiB buffer; measured with seed 1
# 1.151, 1.259 and 2.282 (docs/roce.md, "The 8-to-1 incast"), over seeds 1-6 (ECN draws) 1.151-1.178, 1.240-1.281
# and 2.269-2.309: each range is that spread widened by 0.03 on both sides. Bounded below too: each preset loses
# link time for a known reason (the over-cut and the 300 us timer; the paper's clamp with its 40 Gbps-era steps),
# and a change that removes it must show up here. The 1.10x for the default is not met (docs/roce.md).
DCQCN_INCAST = [("hpcc-artifact", 1.12, 1.21), ("connectx", 1.21, 1.31), ("paper", 2.24, 2.34)]
KMIN_100G = 400_000  # the artifact's Kmin, 100 KB per 25 Gb/s, at 100 Gb/s


@pytest.mark.parametrize(("preset", "min_ratio", "max_ratio"), DCQCN_INCAST)
def test_dcqcn_incast_utilisation_fairness_and_queue_per_preset(native, preset, min_ratio, max_ratio):
    """DCQCN on an incast (Zhu et al.; HPCC paper's comparisons): fair shares that converge (every flow
    finishes within 15 % of the others, Jain >= 0.99), the CC and not PFC bounding the queue (no PAUSE, no
    drop), and a standing queue above Kmin while congested: its known weakness is queueing."""
    graph = resolve_topology("star:9", RATE, DELAY)
    port = egress_port(graph, "sw0", "h0")
    res = simulate_flows(
        graph, _incast(8, 10_000_000), NetworkConfig(cc=CcConfig(kind="dcqcn", preset=preset)), sample_ports=[port]
    )
    assert res.completed == 8
    f, ports = res.flows, res.ports
    ideal = 8 * 10_000_000 * WIRE * 8 / RATE
    ratio = float(f["finish_s"].max()) / ideal
    assert min_ratio <= ratio <= max_ratio
    assert _jain((f["size_bytes"] / f["fct_s"]).to_numpy()) >= 0.99
    assert float(f["fct_s"].max()) <= 1.15 * float(f["fct_s"].min())
    assert ports["pfc_pause_sent"].sum() == 0 and ports["drops_total"].sum() == 0  # the CC, not PFC, did it
    p99 = float(np.percentile(res.queues["bytes"].to_numpy(), 99))
    assert KMIN_100G < p99 < 16 * 1024 * 1024  # above Kmin, below half the buffer (no CC: 16.7 MB with PFC)


def test_hpcc_ignores_ecn_thresholds(native):
    """HPCC sets its window from INT, not ECN: switches still mark its frames, but the receiver sends no CNP
    (only DCQCN reacts to them), so the FCTs are identical whatever the thresholds. Before, every marked
    frame sent a CNP frame on the reverse path; 147 of them moved every FCT of this incast by up to 25 %."""
    fcts, marks = [], []
    for kmin, kmax in ((5_000, 20_000), (100_000, 400_000)):  # at 25 Gb/s; the low pair marks, the default not
        cfg = NetworkConfig(cc=CcConfig(kind="hpcc"), ecn=EcnConfig(kmin_bytes=kmin, kmax_bytes=kmax))
        res = simulate_flows(resolve_topology("star:9", RATE, DELAY), _incast(8, 2_000_000), cfg)
        assert res.completed == 8 and res.flows["cnps"].sum() == 0
        fcts.append(res.flows["fct_s"].tolist())
        marks.append(int(res.ports["ecn_marks"].sum()))
    assert marks[0] > 0 and marks[1] == 0  # the low pair did mark: the equality below is not vacuous
    assert fcts[0] == fcts[1]


@pytest.mark.parametrize("preset", sorted(HPCC_PRESETS))
def test_hpcc_presets_hold_utilisation_near_eta(native, preset):
    """HPCC keeps the bottleneck busy at about eta: the incast makespan is within [1, 1.1/eta] x ideal."""
    eta = HPCC_PRESETS[preset]["eta"]
    _, res = _run(CcConfig(kind="hpcc", preset=preset), size=2_000_000)
    ideal = 8 * 2_000_000 * (4096 + 62 + 42) / 4096 * 8 / RATE
    ratio = float(res.flows["finish_s"].max()) / ideal
    assert 1.0 <= ratio <= 1.1 / eta
    assert _jain((res.flows["size_bytes"] / res.flows["fct_s"]).to_numpy()) >= 0.95


def _hpcc_rates(base_rtt: str) -> tuple[float, float, float]:
    """Two 20 MB flows into h0 through one switch, the far sender's link 20 us long (base RTTs 4.7 and 42.7 us).

    Returns each flow's time-averaged pacing rate W / T over [0.3, 1.5] ms (both active) and the T used."""
    nodes = [GraphNode(n, "host") for n in ("h0", "near", "far")] + [GraphNode("sw0", "switch")]
    links = [GraphLink(h, "sw0", RATE, d) for h, d in (("h0", DELAY), ("near", DELAY), ("far", 20e-6))]
    g = make_graph(nodes, links)
    flows = pd.DataFrame(
        {"src": ["near", "far"], "dst": ["h0"] * 2, "size_bytes": [20_000_000] * 2, "start_s": [0.0] * 2}
    )
    cfg = NetworkConfig(cc=CcConfig(kind="hpcc", hpcc=HpccConfig(base_rtt=base_rtt)))
    res = simulate_flows(g, flows, cfg, trace_cc=True)
    assert res.completed == 2
    t_global = network_base_rtt(g, cfg)
    # same hop cost as C++ (which rounds each hop to whole ns)
    assert t_global == pytest.approx(float(res.flows["base_rtt_s"].max()), abs=5e-9)
    rates = []
    for fid in (0, 1):
        w = res.cc_trace[(res.cc_trace["flow_id"] == fid) & (res.cc_trace["kind"] == "window")]
        t, v = w["time_s"].to_numpy(), w["value"].to_numpy()
        keep = (t > 0.3e-3) & (t < 1.5e-3)
        t_flow = t_global if base_rtt == "global" else float(res.flows["base_rtt_s"][fid])
        dt = np.diff(t[keep])
        rates.append(float((v[keep][:-1] * 8 / t_flow * dt).sum() / dt.sum()))
    return rates[0], rates[1], t_global


def test_hpcc_global_base_rtt_shares_a_bottleneck_equally_across_path_lengths(native):
    """Paper section 5 / artifact GLOBAL_T: with one T the window law is the same for every flow, so two flows
    of different RTT on one bottleneck converge to equal rates (measured 48.5 / 46.1 Gb/s). With each flow's own
    T the far flow gets about T_far / T_near times the near one's rate (measured 86.7 / 8.2 Gb/s, 10.6x; T ratio
    9.1): its queue term q / (B T) is 9x smaller and its W_AI 9x larger."""
    near, far, _ = _hpcc_rates("global")
    assert 0.8 <= far / near <= 1.25
    assert 0.9 * 0.95 * RATE <= near + far <= RATE
    near, far, _ = _hpcc_rates("per_flow")
    assert far / near >= 5


def test_hpcc_window_never_exceeds_the_slowest_link_of_the_path(native):
    """A host whose own port (400 Gb/s, as a GPU's PCIe link) is faster than its path (100 Gb/s): from the first
    INT stack on, W <= 100 Gb/s x T. Before, W was capped at the port's 400 Gb/s x T, so a flow could keep up
    to 4 BDPs in flight and pace at 4x the path (cc-ecn: HPCC 27.35 -> 24.80 ms with this cap)."""
    nodes = [GraphNode(n, "host") for n in ("src", "dst")] + [GraphNode("sw0", "switch")]
    g = make_graph(nodes, [GraphLink("src", "sw0", 4 * RATE, DELAY), GraphLink("dst", "sw0", RATE, DELAY)])
    flows = pd.DataFrame({"src": ["src"], "dst": ["dst"], "size_bytes": [5_000_000], "start_s": [0.0]})
    cfg = NetworkConfig(cc=CcConfig(kind="hpcc"))
    res = simulate_flows(g, flows, cfg, trace_cc=True)
    assert res.completed == 1
    t_base = network_base_rtt(g, cfg)  # the T HPCC uses (global = this flow's own here, within C++'s ns rounding)
    w = res.cc_trace[res.cc_trace["kind"] == "window"]
    assert float(w["value"].iloc[0]) == pytest.approx(4 * RATE * t_base / 8, rel=1e-3)  # its port rate (T in whole ns)
    after = w[w["time_s"] > 1.01 * t_base]["value"].to_numpy()
    assert len(after) > 100 and after.max() <= RATE * t_base / 8 * (1 + 1e-9)


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


@pytest.mark.parametrize("preset", sorted(p for p, v in DCQCN_PRESETS.items() if v["decrease_on_period"]))
def test_dcqcn_incast_loses_link_time_only_with_an_empty_queue(native, preset):
    """Where the incast's lost time is (docs/roce.md, "The 8-to-1 incast"): the bottleneck carries DATA only, so
    makespan - ideal is time the link idled (sum of (1 - utilisation) over the 1 us samples, within 3 %); at least
    95 % of it falls in samples whose queue holds at most one frame, after the queue drained (at least 5 times:
    cycles), never with a backlog. At the first drain every flow has been cut far below its fair share (12.5
    Gb/s): to the floor (1 Gb/s, the artifact) or under 5 % of it (ConnectX's floor is 1 Mb/s), because the
    queue kept marking while it drained and the 4 us checks kept cutting; the link then runs below 10 % until
    the first increase timer fires, >= 150 us later (T = 300 us after each flow's last cut)."""
    graph = resolve_topology("star:9", RATE, DELAY)
    port = egress_port(graph, "sw0", "h0")
    cfg = NetworkConfig(cc=CcConfig(kind="dcqcn", preset=preset))
    res = simulate_flows(graph, _incast(8, 10_000_000), cfg, sample_ports=[port], trace_cc=True)
    q = res.queues
    t, b, tx = q["time_s"].to_numpy(), q["bytes"].to_numpy(), q["tx_bytes"].to_numpy()
    util = np.minimum(np.diff(tx) * 8 / RATE / np.diff(t), 1.0)
    lost = (1 - util) * np.diff(t)
    ideal = 8 * 10_000_000 * WIRE * 8 / RATE
    assert lost.sum() == pytest.approx(float(res.flows["finish_s"].max()) - ideal, rel=0.03)
    frame = 4096 + 62
    empty = b[1:] <= frame
    assert lost[empty].sum() >= 0.95 * lost.sum()
    assert int((b[:-1] > frame).astype(int) @ (b[1:] <= frame).astype(int)) >= 5
    built = int(np.argmax(b > KMIN_100G))  # the first sample above Kmin, then the first empty one after it
    drain = float(t[built + int(np.argmax(b[built:] <= frame))])
    rates = res.cc_trace[res.cc_trace["kind"] == "rate"]
    at_drain = rates[rates["time_s"] <= drain].groupby("flow_id")["value"].last()
    floor = DCQCN_PRESETS[preset]["min_rate_bps"]
    assert len(at_drain) == 8 and (at_drain <= max(floor * (1 + 1e-9), 0.05 * RATE / 8)).all()
    first_increase = float(rates[rates["time_s"] > drain]["time_s"].min())
    assert first_increase - drain >= 150e-6
    between = (t[1:] > drain) & (t[1:] <= first_increase)
    assert util[between].mean() < 0.10
