"""The C and numpy event loops, incremental or not, compute the same schedule."""

import dataclasses

import numpy as np
import pandas as pd
import pytest

from hetero_ns3.network.analytic import AnalyticConfig, simulate_flows, simulate_plan
from hetero_ns3.plan.builder import PlanBuilder
from hetero_ns3.plan.dag import FLOW
from hetero_ns3.topology import leaf_spine


def contended_plan(n_gpus: int, n_tasks: int, seed: int):
    rng = np.random.default_rng(seed)
    b = PlanBuilder([f"h{i}" for i in range(n_gpus)])
    for i in range(n_tasks):
        deps = rng.choice(i, size=min(i, int(rng.integers(0, 3))), replace=False) if i else []
        if rng.random() < 0.7:
            s, d = rng.choice(n_gpus, 2, replace=False)
            b.add_flow(int(s), int(d), int(rng.integers(1, 4 * 10**6)), deps=deps)
        else:
            b.add_compute(int(rng.integers(n_gpus)), float(rng.uniform(0, 2e-4)), deps=deps)
    return b.build()


@pytest.mark.parametrize("seed", [0, 1])
def test_engines_and_incremental_updates_agree(seed):
    g = leaf_spine(4, 2, 4, 100e9, 1e-6)  # 2:1 oversubscribed: many bottleneck levels
    plan = contended_plan(16, 500, seed)
    ref = simulate_plan(g, plan, AnalyticConfig(engine="numpy", incremental=False), seed=seed)
    for engine in ("numpy", "native"):
        for inc in (True, False):
            r = simulate_plan(g, plan, AnalyticConfig(engine=engine, incremental=inc), seed=seed)
            np.testing.assert_allclose(r.times.finish_s, ref.times.finish_s, rtol=1e-9, err_msg=f"{engine} {inc}")
            np.testing.assert_allclose(r.times.start_s, ref.times.start_s, rtol=1e-9, atol=1e-18)
            assert r.stats.engine == engine
    inc = simulate_plan(g, plan, AnalyticConfig(engine="native"), seed=seed)
    assert inc.stats.reused_rates > 0  # the incremental path was exercised
    assert ref.stats.reused_rates == 0


def test_flows_with_release_times_agree():
    rng = np.random.default_rng(5)
    g = leaf_spine(2, 2, 8, 100e9, 1e-6)
    n = 150
    src = rng.integers(0, 16, n)
    dst = (src + rng.integers(1, 16, n)) % 16
    df = pd.DataFrame(
        {
            "src": [f"h{i}" for i in src],
            "dst": [f"h{i}" for i in dst],
            "size_bytes": rng.integers(10**3, 10**6, n),
            "start_s": rng.uniform(0, 1e-4, n),
        }
    )
    a = simulate_flows(g, df, AnalyticConfig(engine="numpy", incremental=False))
    b = simulate_flows(g, df, AnalyticConfig(engine="native"))
    np.testing.assert_allclose(b.finish_s, a.finish_s, rtol=1e-9)
    np.testing.assert_array_equal(b.start_s, df.start_s)


def test_auto_falls_back_to_numpy_with_a_warning(monkeypatch, tmp_path):
    import hetero_ns3.network.analytic.native as native
    from hetero_ns3.errors import NativeBuildError

    monkeypatch.setattr(native, "_LIB", None)
    monkeypatch.setattr(native, "_TRIED", False)
    monkeypatch.setenv("HETERO_NS3_CACHE", str(tmp_path))
    monkeypatch.setenv("CC", "/nonexistent/cc")
    monkeypatch.setattr(native.shutil, "which", lambda _: None)
    g = leaf_spine(2, 2, 2, 100e9, 1e-6)
    plan = contended_plan(4, 20, 0)
    with pytest.warns(RuntimeWarning, match="numpy engine"):
        r = simulate_plan(g, plan, AnalyticConfig(engine="auto"))
    assert r.stats.engine == "numpy"
    monkeypatch.setattr(native, "_TRIED", False)
    with pytest.raises(NativeBuildError, match="no C compiler"):
        simulate_plan(g, plan, AnalyticConfig(engine="native"))


def test_many_concurrent_flows_grow_the_native_slots():
    # More flows active at once than the C loop's initial 1024 slots.
    rng = np.random.default_rng(9)
    n = 1300
    src = rng.integers(0, 40, n)
    dst = (src + rng.integers(1, 40, n)) % 40
    df = pd.DataFrame(
        {
            "src": [f"h{i}" for i in src],
            "dst": [f"h{i}" for i in dst],
            "size_bytes": rng.choice([10**5, 2 * 10**5, 4 * 10**5], n),
            "start_s": np.where(rng.random(n) < 0.9, 0.0, 1e-5),
        }
    )
    from hetero_ns3.topology import star

    g = star(40, 100e9, 1e-6)
    a = simulate_flows(g, df, AnalyticConfig(engine="numpy"))
    b = simulate_flows(g, df, AnalyticConfig(engine="native"))
    np.testing.assert_allclose(b.finish_s, a.finish_s, rtol=1e-9)


@pytest.mark.parametrize("saf", [True, False])
def test_native_loop_latencies_equal_the_routed_figures(saf):
    """The native loop computes flow latencies and ideal FCTs from the paths as flows start; they are the
    numpy engine's (routes.py figures) bit for bit, on sizes below and above one packet."""
    g = leaf_spine(4, 2, 4, 100e9, 1e-6)
    plan = contended_plan(16, 400, 3)
    sizes = np.resize(np.array([1, 900, 1000, 4096, 10**6], np.int64), len(plan))
    plan = dataclasses.replace(plan, size_bytes=np.where(plan.kind == FLOW, sizes, plan.size_bytes))
    cfg = {"store_and_forward": saf, "incremental": False}
    a = simulate_plan(g, plan, AnalyticConfig(engine="numpy", **cfg), seed=2)
    b = simulate_plan(g, plan, AnalyticConfig(engine="native", **cfg), seed=2)
    np.testing.assert_array_equal(b.flows["ideal_fct_s"].to_numpy(), a.flows["ideal_fct_s"].to_numpy())
    np.testing.assert_allclose(b.times.finish_s, a.times.finish_s, rtol=1e-9)
    np.testing.assert_array_equal(b.link_bytes, a.link_bytes)
    ids = b.flows["id"].to_numpy()  # the loop's per-flow times are its per-task times
    np.testing.assert_array_equal(b.flows["start_s"].to_numpy(), b.times.start_s[ids])
    np.testing.assert_array_equal(b.flows["finish_s"].to_numpy(), b.times.finish_s[ids])
    pd.testing.assert_frame_equal(
        b.flows.drop(columns=["start_s", "finish_s", "fct_s"]), a.flows.drop(columns=["start_s", "finish_s", "fct_s"])
    )
