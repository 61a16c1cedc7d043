"""Host gaps after synchronisations (``[compute] host_sync_gap``; :mod:`hetero_ns3.workload.host`, docs/compute.md
"Host issue model"): after each dropless MoE routing step every rank's host spends its own exponential draw before
it issues the dispatch, and the expert-parallel exchange that follows waits for the group's slowest host.
Checked against the draws the plan holds: one per rank and synchronisation, their mean, and the iteration's
growth by the largest draw of each synchronising group."""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path

import numpy as np
import pytest

from hetero_ns3.compute.config import ComputeConfig
from hetero_ns3.network.analytic.times_only import replay_times
from hetero_ns3.pipeline import load_run_cluster, lower_scenario
from hetero_ns3.plan.dag import COMPUTE
from hetero_ns3.plan.lower import SyncGaps
from hetero_ns3.scenario.loader import scenario_from_dict
from hetero_ns3.topology import build_graph
from hetero_ns3.workload.host import HOST_SYNC_GAP_S

FOUR_GPU = Path(__file__).resolve().parent.parent / "data" / "one-node-4gpu.toml"
RANKS, LAYERS, MICRO_BATCHES = 4, 2, 2


def _scenario(**compute):
    """Two MoE layers of Qwen1.5-MoE-A2.7B on one node of 4 H100, expert parallelism 4, two micro-batches."""
    return scenario_from_dict(
        {
            "model": {"name": "qwen1.5-moe-a2.7b", "layers": LAYERS, "seq_len": 1024},
            "parallelism": {"tp": 1, "pp": 1, "ep": RANKS, "global_batch": RANKS * MICRO_BATCHES, "micro_batch": 1},
            "cluster": {"topology": str(FOUR_GPU)},
            "compute": compute,
        }
    )


def _run(sc):
    cluster = load_run_cluster(sc, "analytic")
    graph = build_graph(cluster)
    _, low = lower_scenario(sc, graph, cluster)
    plan = low.plan
    return plan, float(np.max(replay_times(graph, plan).times.finish_s))


def _gap_tasks(plan) -> dict[str, list[float]]:
    """Host tasks that carry a gap, by the op they issue (one per rank of the synchronising group)."""
    host = plan.categories.index("host")
    tasks = np.flatnonzero((plan.kind == COMPUTE) & (plan.category == host) & (plan.duration_s > 0))
    by_op: dict[str, list[float]] = defaultdict(list)
    for t in tasks:
        by_op[plan.labels[plan.label[t]]].append(float(plan.duration_s[t]))
    return by_op


def test_one_gap_per_rank_and_synchronisation_before_the_dispatch() -> None:
    """With only ``host_sync_gap`` set, the host tasks with a duration are the gaps: one per rank, MoE layer and
    micro-batch (forward), each issuing that layer's dispatch exchange."""
    plan, _ = _run(_scenario(host_sync_gap="1ms"))
    by_op = _gap_tasks(plan)
    assert len(by_op) == LAYERS * MICRO_BATCHES
    assert all(label.endswith("moe.dispatch.a2a") for label in by_op)
    assert all(len(d) == RANKS for d in by_op.values())
    assert len({d for ds in by_op.values() for d in ds}) == RANKS * LAYERS * MICRO_BATCHES  # independent draws


def test_the_exchange_waits_for_the_slowest_host() -> None:
    """Gaps far above the exchange: the iteration grows by the largest gap of each synchronising group, summed
    over the synchronisations (every rank leaves the exchange together, so the lag does not carry over), less at
    most one exchange each (the last rank's flows meet no others)."""
    _, base = _run(_scenario(host_sync_gap="0s"))
    plan, t = _run(_scenario(host_sync_gap="20ms"))
    by_op = _gap_tasks(plan)
    slowest = sum(max(d) for d in by_op.values())
    assert slowest > 0.02  # several draws of 20 ms mean
    assert base < t <= base + slowest * (1 + 1e-9)
    assert t - base == pytest.approx(slowest, rel=1e-3)


def test_the_draws_are_exponential_with_the_given_mean() -> None:
    """Mean within 3% (its standard error is 0.7% over 20,000 draws), median ln 2 of the mean within 3%."""
    gaps = SyncGaps(5e-4)
    x = np.array([gaps.draw() for _ in range(20_000)])
    assert x.min() >= 0
    assert x.mean() == pytest.approx(5e-4, rel=0.03)
    assert np.median(x) == pytest.approx(5e-4 * np.log(2), rel=0.03)


def test_the_default_gap_acts_on_moe_layers_only() -> None:
    """The default (the profile's 0.616 ms, ``HOST_SYNC_GAP_S``) gives an MoE layer its gaps, and leaves a dense
    model's plan as with the gap off (no step synchronises its host): no host task, every array equal."""
    assert ComputeConfig().host_sync_gap == HOST_SYNC_GAP_S == pytest.approx(1.893 / 3072, rel=1e-3)
    plan, t = _run(_scenario())
    assert len(_gap_tasks(plan)) == LAYERS * MICRO_BATCHES
    plan_off, t_off = _run(_scenario(host_sync_gap="0s"))
    assert "host" not in plan_off.categories and t_off < t
    dense = {"model": {"name": "gpt3-1.3b", "layers": 2, "seq_len": 1024}, "cluster": {"topology": str(FOUR_GPU)}}
    dense["parallelism"] = {"tp": 2, "global_batch": 4, "micro_batch": 1}
    default = _run(scenario_from_dict(dense))[0]
    zero = _run(scenario_from_dict({**dense, "compute": {"host_sync_gap": "0s"}}))[0]
    assert "host" not in default.categories
    for name in ("kind", "gpu", "dst", "size_bytes", "duration_s", "stream", "dep_ptr", "dep_idx"):
        assert np.array_equal(getattr(default, name), getattr(zero, name)), name
