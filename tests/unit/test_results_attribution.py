"""Issue 19: straggler wait only from a slower GPU's compute; a lagging equally fast peer is communication.

Hand-built plans replayed exactly (``critical_path_s``) give analytic answers; the planner + collective
planner + flow-level backend runs check that homogeneous clusters report no straggler wait for TP, PP,
DP and mixed plans, and that a slowed GPU (``faults.gpus``) raises it on its peers by what it computes
longer.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from hetero_ns3.collectives.emit import comm_stream
from hetero_ns3.network.analytic import simulate_plan
from hetero_ns3.pipeline import gpu_meta, load_run_cluster, lower_scenario
from hetero_ns3.plan.builder import PlanBuilder
from hetero_ns3.plan.dag import COMPUTE, critical_path_s
from hetero_ns3.results import GpuMeta, summarize
from hetero_ns3.results.breakdown import TERMS
from hetero_ns3.scenario.loader import scenario_from_dict
from hetero_ns3.topology import build_graph

DATA = Path(__file__).resolve().parent.parent / "data"
TOY = {"name": "toy", "layers": 8, "hidden": 1024, "heads": 16, "ffn_hidden": 4096, "vocab": 512, "seq_len": 512}


def closure(s):
    for g, bd in s.per_gpu.items():
        assert bd.total_s == pytest.approx(s.iteration_time_s, rel=1e-9, abs=1e-15), g
        assert all(getattr(bd, t) >= -1e-12 for t in TERMS), (g, bd)


def lagging_peer(delay_s: float, slow: float):
    """a (node 0) and b (node 1) compute 1 s of work each, exchange 0.1 s DP flows, then an optimizer step.

    b first waits ``delay_s`` for an input flow from a (TP, inter-node) and computes ``slow`` x longer.
    """
    b = PlanBuilder(["a", "b"])
    inp = b.add_flow("a", "b", 1, [], label="tp input", category="tp")
    ka = b.add_compute("a", 1.0, label="bwd")
    kb = b.add_compute("b", slow, [inp], label="bwd")
    fab = b.add_flow("a", "b", 1, [ka], label="dp.ar", category="dp")
    fba = b.add_flow("b", "a", 1, [kb], label="dp.ar", category="dp")
    b.add_compute("a", 0.01, [fba], label="opt")
    b.add_compute("b", 0.01 * slow, [fab], label="opt")
    plan = b.build()
    flow_time = np.where(np.asarray(plan.labels)[plan.label] == "tp input", delay_s, 0.1)
    meta = {"a": GpuMeta("X", 0), "b": GpuMeta("X", 1, slow)}
    return summarize(plan, critical_path_s(plan, flow_time), meta)


def test_waiting_on_a_peer_held_up_by_the_network_is_communication():
    # a idles [1.0, 1.6]: 0.5 s on b's kernel (b does a's work late: it waited 0.5 s on an inter-node
    # flow before) and 0.1 s on b's DP flow. Both inter-node communication; no straggler, no bubble.
    s = lagging_peer(0.5, 1.0)
    closure(s)
    a = s.per_gpu["a"]
    assert s.iteration_time_s == pytest.approx(1.61)
    assert a.exposed_inter_node_comm_s == pytest.approx(0.6, rel=1e-12)
    assert a.straggler_wait_s == 0.0 and a.pipeline_bubble_s == 0.0 and a.other_s == 0.0


def test_waiting_on_a_slower_peer_is_straggler_wait_by_the_work_it_computes_longer():
    # b computes the same 1 s of work in 2 s: a waits 1.0 s of b's compute (straggler) and 0.1 s of flow.
    s = lagging_peer(0.0, 2.0)
    closure(s)
    assert s.per_gpu["a"].straggler_wait_s == pytest.approx(1.0, rel=1e-12)
    assert s.per_gpu["a"].exposed_inter_node_comm_s == pytest.approx(0.1, rel=1e-12)
    assert s.per_gpu["b"].straggler_wait_s == 0.0
    # both causes: b starts 0.5 s late and computes 2 s; a waits 1.5 s on b's kernel, 1.0 s of it is
    # b's extra compute (straggler), 0.5 s the delay that held b up (inter-node), plus the 0.1 s flow
    s = lagging_peer(0.5, 2.0)
    closure(s)
    assert s.per_gpu["a"].straggler_wait_s == pytest.approx(1.0, rel=1e-12)
    assert s.per_gpu["a"].exposed_inter_node_comm_s == pytest.approx(0.6, rel=1e-12)


def _run(topology: str, par: dict, faults: dict | None = None):
    raw = {"model": TOY, "parallelism": par, "cluster": {"topology": str(DATA / topology)}}
    if faults:
        raw["faults"] = faults
    sc = scenario_from_dict(raw)
    cluster = load_run_cluster(sc)
    graph = build_graph(cluster)
    wplan, low = lower_scenario(sc, graph, cluster)
    res = simulate_plan(graph, low.plan, seed=1)
    meta = gpu_meta(cluster, wplan, sc.faults)
    return low.plan, res.times, meta, summarize(low.plan, res.times, meta)


PLANS = {
    "tp": ("one-node-4gpu.toml", {"tp": 4, "pp": 1, "global_batch": 2}),
    "pp": ("one-node-4gpu.toml", {"tp": 1, "pp": 4, "global_batch": 8, "schedule": "1f1b"}),
    "dp": ("one-node-4gpu.toml", {"tp": 1, "pp": 1, "global_batch": 8}),
    "mixed": ("two-node-h100.toml", {"tp": 4, "pp": 2, "global_batch": 8, "zero_stage": 1}),
}


@pytest.mark.parametrize("kind", sorted(PLANS))
def test_homogeneous_cluster_without_faults_has_no_straggler_wait(kind):
    topology, par = PLANS[kind]
    _, _, meta, s = _run(topology, {**par, "micro_batch": 1})
    closure(s)
    assert {m.slowdown for m in meta.values()} == {1.0}
    assert s.overall_max.straggler_wait_s <= 1e-9 * s.iteration_time_s
    assert s.overall_max.other_s <= 1e-9 * s.iteration_time_s
    if kind == "pp":
        assert s.overall.pipeline_bubble_s > 0.1 * s.iteration_time_s  # (p-1)/(m+p-1) = 3/11 of it


def test_slowed_gpu_raises_its_peers_straggler_wait_by_what_it_computes_longer():
    """DP on 4 GPUs of one node, GPU n0.g1 slowed by f = 1.5 (``faults.gpus``); two gradient buckets.

    Derivation, from the unslowed run: a peer finishes its forward + backward at ``C_fb`` and then waits
    for the buckets' all-reduces. The first bucket (b0) needs the slowed GPU's gradients, ready at
    ``f T_b0`` (``T_b0``: when the kernel that completes b0 ends unslowed; the slowed GPU computes without
    a break, so every time scales by f); the second bucket's all-reduce queues behind b0's on the DP
    stream, so the rest of the slowed backward is hidden. Then both optimizer steps start together, the
    slowed one lasts f x as long. Straggler wait of each peer: ``(f T_b0 - C_fb) + (f - 1) t_opt``; the
    slowed GPU has none. (Tolerance 0.5%, 6.5 us: the rings end a few microseconds apart on different
    ranks, and that skew of the optimizer steps is communication; measured 0.17%.)"""
    f = 1.5
    par = {"tp": 1, "pp": 1, "global_batch": 8, "micro_batch": 1}
    plan0, times0, _, base = _run("one-node-4gpu.toml", par)
    _, _, meta, s = _run("one-node-4gpu.toml", par, {"gpus": [{"gpu": "n0.g1", "factor": f}]})
    closure(s)
    assert meta["n0.g1"].slowdown == f and meta["n0.g0"].slowdown == 1.0
    labels = np.asarray(plan0.labels)[plan0.label]
    g0, g1 = plan0.gpus.index("n0.g0"), plan0.gpus.index("n0.g1")
    kern = (plan0.kind == COMPUTE) & (plan0.stream == 0)
    opt = kern & (labels == "optimizer")
    c_fb = float(times0.finish_s[kern & ~opt & (plan0.gpu == g0)].max())
    t_opt = float(plan0.duration_s[opt & (plan0.gpu == g1)].sum())
    first_bucket = [i for i in np.nonzero(plan0.gpu == g1)[0] if labels[i].split()[0] == "dp.grad.dense.c0.b0"]
    entry = [i for i in first_bucket if labels[i].endswith(" entry")]  # 'dp.grad.dense.c0.b0 ring/Simple ch0 entry'
    assert len(entry) == 1
    t_b0 = max(float(times0.finish_s[d]) for d in plan0.deps(entry[0]) if kern[d])
    expected = (f * t_b0 - c_fb) + (f - 1.0) * t_opt
    assert f * t_b0 > c_fb  # the peers do wait for the slowed GPU's first bucket
    assert base.overall_max.straggler_wait_s == 0.0
    for g in ("n0.g0", "n0.g2", "n0.g3"):
        assert s.per_gpu[g].straggler_wait_s == pytest.approx(expected, rel=5e-3), g
    assert s.per_gpu["n0.g1"].straggler_wait_s == 0.0


def test_each_parallel_dimension_has_its_own_comm_streams():
    """A TP collective is never queued behind a DP bucket on one stream (each NCCL communicator has its
    own CUDA stream): the comm-stream kernels of the tp and dp categories use disjoint streams."""
    plan, _, _, _ = _run("two-node-h100.toml", {"tp": 4, "pp": 2, "global_batch": 8, "micro_batch": 1})
    cats = np.asarray(plan.categories)[plan.category]
    kern = (plan.kind == COMPUTE) & (plan.stream >= 1)
    streams = {c: set(np.unique(plan.stream[kern & (cats == c)]).tolist()) for c in ("tp", "dp", "pp")}
    assert streams["tp"] and streams["dp"] and streams["pp"]
    assert not streams["tp"] & streams["dp"] and not streams["tp"] & streams["pp"] and not streams["dp"] & streams["pp"]
    assert min(streams["dp"]) == comm_stream("dp") and min(streams["tp"]) == comm_stream("tp")
    # PP: one stream set per ordered (sender, receiver) pair; a first-stage GPU sends activations to
    # and receives gradients from its next-stage peer on two different streams
    labels = np.asarray(plan.labels)[plan.label]
    entries = kern & (cats == "pp") & (plan.gpu == 0) & np.char.endswith(labels.astype(str), " entry")
    assert len(set(plan.stream[entries].tolist())) == 2
