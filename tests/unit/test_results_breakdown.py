"""Breakdown attribution against analytic answers (pure Python, fixed flow times)."""

from __future__ import annotations

import numpy as np
import pytest

from hetero_ns3.plan.builder import PlanBuilder
from hetero_ns3.plan.dag import TaskTimes, critical_path_s
from hetero_ns3.results import GpuMeta, summarize
from hetero_ns3.results.breakdown import TERMS


def one_f_one_b(pp: int, m: int, tf: float, tb: float, stage_scale=None, slowed=True):
    """A pure-compute 1F1B pipeline (PipeDream-Flush order): stage i warms up with pp-i-1 forwards.

    ``stage_scale[i]`` multiplies stage i's kernel times; ``slowed``: the GPU is that much slower (its
    GpuMeta slowdown), else it has that much more work on a GPU as fast as the others."""
    scale = stage_scale or [1.0] * pp
    gpus = [f"n{i}.g0" for i in range(pp)]
    b = PlanBuilder(gpus)
    orders = []
    for i in range(pp):
        w = min(pp - i - 1, m)
        ops = [("F", k) for k in range(w)]
        for j in range(m - w):
            ops += [("F", w + j), ("B", j)]
        ops += [("B", k) for k in range(m - w, m)]
        orders.append(ops)
    act, grad = {}, {}  # (stage, mb) -> flow id into that stage
    pos = [0] * pp
    while any(pos[i] < len(orders[i]) for i in range(pp)):
        progressed = False
        for i in range(pp):
            while pos[i] < len(orders[i]):
                op, k = orders[i][pos[i]]
                if op == "F":
                    deps = [act[(i, k)]] if i > 0 and (i, k) in act else []
                    if i > 0 and (i, k) not in act:
                        break
                    t = b.add_compute(gpus[i], tf * scale[i], deps, label=f"fwd mb{k}")
                    if i + 1 < pp:
                        act[(i + 1, k)] = b.add_flow(
                            gpus[i], gpus[i + 1], 1 << 20, [t], label=f"pp act mb{k}", category="pp"
                        )
                else:
                    if i + 1 < pp and (i, k) not in grad:
                        break
                    deps = [grad[(i, k)]] if i + 1 < pp else []
                    t = b.add_compute(gpus[i], tb * scale[i], deps, label=f"bwd mb{k}")
                    if i > 0:
                        grad[(i - 1, k)] = b.add_flow(
                            gpus[i], gpus[i - 1], 1 << 20, [t], label=f"pp grad mb{k}", category="pp"
                        )
                pos[i] += 1
                progressed = True
        assert progressed, "schedule deadlocked"
    meta = {g: GpuMeta("A100", i, scale[i] if slowed else 1.0) for i, g in enumerate(gpus)}
    return b.build(), meta


def check_closure(s, tol=1e-9):
    for g, bd in s.per_gpu.items():
        assert bd.total_s == pytest.approx(s.iteration_time_s, rel=tol, abs=1e-12), g
        assert all(getattr(bd, t) >= -1e-12 for t in TERMS), (g, bd)


@pytest.mark.parametrize(("pp", "m"), [(4, 8), (2, 3), (8, 32), (4, 1)])
def test_1f1b_bubble_fraction_is_textbook(pp, m):
    plan, meta = one_f_one_b(pp, m, tf=1.0, tb=2.0)
    s = summarize(plan, critical_path_s(plan, 0.0), meta)
    check_closure(s)
    expected = (pp - 1) / (m + pp - 1)
    assert s.iteration_time_s == pytest.approx((m + pp - 1) * 3.0)
    for g, bd in s.per_gpu.items():
        assert bd.pipeline_bubble_s / s.iteration_time_s == pytest.approx(expected, rel=0.01), g
        assert bd.straggler_wait_s == pytest.approx(0.0, abs=1e-9)
        assert bd.other_s == pytest.approx(0.0, abs=1e-9)
        assert bd.compute_s == pytest.approx(3.0 * m)
    assert s.overall.pipeline_bubble_s / s.iteration_time_s == pytest.approx(expected, rel=0.01)


@pytest.mark.parametrize("slow", [2.0, 1.05])
def test_unbalanced_pipeline_straggler_wait_is_the_load_excess(slow):
    """Stage 2 computes `slow` x as long: the others' straggler wait is C_slow - C_fast, the rest bubble."""
    plan, meta = one_f_one_b(4, 8, 1.0, 2.0, stage_scale=[1.0, 1.0, slow, 1.0])
    s = summarize(plan, critical_path_s(plan, 0.0), meta)
    check_closure(s)
    excess = 24.0 * (slow - 1.0)
    assert s.per_gpu["n2.g0"].straggler_wait_s == pytest.approx(0.0, abs=1e-9)
    for g in ("n0.g0", "n1.g0", "n3.g0"):
        assert s.per_gpu[g].straggler_wait_s == pytest.approx(excess, rel=1e-9)
        assert s.per_gpu[g].other_s == pytest.approx(0.0, abs=1e-9)
    # the bubble that is left is the same on every stage, and within one stage time of the balanced one
    bubbles = [b.pipeline_bubble_s for b in s.per_gpu.values()]
    assert max(bubbles) - min(bubbles) < 1e-9
    assert abs(bubbles[0] - 9.0) <= 3.0 * (slow - 1.0) + 1e-9


@pytest.mark.parametrize("more", [2.0, 1.05])
def test_unbalanced_pipeline_on_equal_gpus_is_bubble(more):
    """Stage 2 has `more` x the work on a GPU as fast as the others: no straggler, the waits are bubble."""
    plan, meta = one_f_one_b(4, 8, 1.0, 2.0, stage_scale=[1.0, 1.0, more, 1.0], slowed=False)
    s = summarize(plan, critical_path_s(plan, 0.0), meta)
    check_closure(s)
    for g, bd in s.per_gpu.items():
        assert bd.straggler_wait_s == pytest.approx(0.0, abs=1e-9), g
        assert bd.other_s == pytest.approx(0.0, abs=1e-9), g
        assert bd.pipeline_bubble_s == pytest.approx(s.iteration_time_s - bd.compute_s, rel=1e-9), g


def _longest_path(plan, flow_time):
    """Independent longest path: memoised recursion from every task over its dependencies."""
    import functools

    dur = np.where(plan.kind == 1, flow_time, plan.duration_s)

    @functools.cache
    def finish(i):
        deps = plan.deps(i)
        return (max(finish(int(d)) for d in deps) if len(deps) else 0.0) + float(dur[i])

    return max(finish(i) for i in range(len(plan)))


def ring_dp(n_gpus, compute, flow_chunk=1 << 20, nodes=None, fwd_bwd_split=True, slowdown=None):
    """DP: fwd+bwd per GPU, then a ring all-reduce (2(n-1) steps of flows), then an optimizer step.

    ``slowdown[i]``: GPU i's GpuMeta slowdown (default 1: all as fast; give compute[i] / compute[j]
    when GPU i computes the same work more slowly)."""
    gpus = [f"g{i}" for i in range(n_gpus)]
    nodes = nodes or [0] * n_gpus
    b = PlanBuilder(gpus)
    bwd = []
    for i, g in enumerate(gpus):
        b.add_compute(g, compute[i] / 3, label="fwd")
        bwd.append(b.add_compute(g, 2 * compute[i] / 3, label="bwd"))
    recv = {}
    for step in range(2 * (n_gpus - 1)):
        new = {}
        for i in range(n_gpus):
            j = (i + 1) % n_gpus
            deps = [bwd[i]] + ([recv[i]] if step else [])
            new[j] = b.add_flow(
                gpus[i], gpus[j], flow_chunk, deps, label=f"dp.all_reduce ch0 step{step}", category="dp"
            )
        recv = new
    for i, g in enumerate(gpus):
        b.add_compute(g, 0.01, [recv[i]], label="opt")
    slowdown = slowdown or [1.0] * n_gpus
    meta = {g: GpuMeta("H100" if i else "A100", nodes[i], slowdown[i]) for i, g in enumerate(gpus)}
    return b.build(), meta


def test_infinitely_fast_network_gives_compute_critical_path():
    plan, meta = ring_dp(4, [1.0, 1.3, 0.7, 1.0])
    times = critical_path_s(plan, 0.0)
    s = summarize(plan, times, meta)
    assert s.iteration_time_s == pytest.approx(_longest_path(plan, 0.0))
    assert s.iteration_time_s == pytest.approx(1.3 + 0.01)
    assert s.overall.exposed_intra_node_comm_s == s.overall.exposed_inter_node_comm_s == 0.0
    check_closure(s)


def test_slow_gpu_raises_straggler_wait_on_the_others():
    base_plan, meta = ring_dp(4, [1.0] * 4)
    slow_plan, slow_meta = ring_dp(4, [2.0, 1.0, 1.0, 1.0], slowdown=[2.0, 1.0, 1.0, 1.0])
    base = summarize(base_plan, critical_path_s(base_plan, 0.1), meta)
    slow = summarize(slow_plan, critical_path_s(slow_plan, 0.1), slow_meta)
    check_closure(base)
    check_closure(slow)
    assert base.overall.straggler_wait_s == pytest.approx(0.0, abs=1e-9)
    for g in ("g1", "g2", "g3"):
        # 2.0 - 1.0, give or take the 0.01 s optimizer step by which the ring's ends are skewed
        assert slow.per_gpu[g].straggler_wait_s == pytest.approx(1.0, abs=0.011)
        assert slow.per_gpu[g].exposed_intra_node_comm_s == pytest.approx(0.6, abs=0.011)  # 6 ring steps
    assert slow.per_gpu["g0"].straggler_wait_s == pytest.approx(0.0, abs=0.011)
    assert slow.per_gpu_type["H100"].straggler_wait_s > base.per_gpu_type["H100"].straggler_wait_s + 0.9


def test_exposed_comm_split_by_node():
    # two nodes: g0,g1 on node 0; g2,g3 on node 1. Ring 0->1 intra, 1->2 inter, 2->3 intra, 3->0 inter.
    plan, meta = ring_dp(4, [1.0] * 4, nodes=[0, 0, 1, 1])
    flow_time = np.where(plan.kind == 1, 0.1, 0.0)
    labels = np.asarray(plan.labels)[plan.label]
    # make the inter-node flows 3x slower: they are now the last-finishing deps
    inter = (plan.kind == 1) & (
        np.asarray([meta[plan.gpus[s]].node for s in plan.gpu])
        != np.asarray([meta[plan.gpus[d]].node if d >= 0 else -1 for d in plan.dst])
    )
    flow_time = np.where(inter, 0.3, flow_time)
    assert labels.size == len(plan)
    s = summarize(plan, critical_path_s(plan, flow_time), meta)
    check_closure(s)
    assert s.overall.exposed_inter_node_comm_s > 0
    assert s.overall.exposed_intra_node_comm_s > 0
    exposed = s.overall.exposed_inter_node_comm_s + s.overall.exposed_intra_node_comm_s
    assert exposed == pytest.approx(s.iteration_time_s - 1.0 - 0.01, rel=1e-9)

    # all on one node: everything is intra
    plan1, meta1 = ring_dp(4, [1.0] * 4, nodes=[0, 0, 0, 0])
    s1 = summarize(plan1, critical_path_s(plan1, 0.1), meta1)
    assert s1.overall.exposed_inter_node_comm_s == 0.0
    assert s1.overall.exposed_intra_node_comm_s == pytest.approx(0.6)
    # one GPU per node: everything is inter
    plan2, meta2 = ring_dp(4, [1.0] * 4, nodes=[0, 1, 2, 3])
    s2 = summarize(plan2, critical_path_s(plan2, 0.1), meta2)
    assert s2.overall.exposed_intra_node_comm_s == 0.0
    assert s2.overall.exposed_inter_node_comm_s == pytest.approx(0.6)


def test_hidden_comm_is_not_exposed_and_reductions_count_as_comm():
    b = PlanBuilder(["a", "b"])
    c0 = b.add_compute("a", 1.0, label="bwd layer2")
    f = b.add_flow("a", "b", 100, [c0], category="dp")
    b.add_compute("a", 2.0, label="bwd layer1")  # overlaps the flow
    red = b.add_compute("b", 0.5, [f], stream=1, label="reduce", category="dp")
    b.add_compute("b", 1.0, [red], label="opt")
    plan = b.build()
    meta = {"a": GpuMeta("X", 0), "b": GpuMeta("X", 1)}
    s = summarize(plan, critical_path_s(plan, 0.25), meta)
    check_closure(s)
    a, bb = s.per_gpu["a"], s.per_gpu["b"]
    assert s.iteration_time_s == pytest.approx(3.0)
    assert a.compute_s == pytest.approx(3.0) and a.exposed_inter_node_comm_s == 0.0
    # b waits 1.0 on a's compute (reached through a dp flow), 0.25 flow, 0.5 reduction, then from 2.75
    # to 3.0 on a's last kernel. a is as fast as b (same type, no slowdown) and nothing held it up: it
    # has more work, a load imbalance, counted as bubble (not straggler wait: no slower GPU).
    assert bb.straggler_wait_s == 0.0
    assert bb.pipeline_bubble_s == pytest.approx(1.25)
    assert bb.exposed_inter_node_comm_s == pytest.approx(0.75)
    assert bb.compute_s == pytest.approx(1.0)
    assert bb.other_s == pytest.approx(0.0)


def test_unknown_category_and_nan_times():
    b = PlanBuilder(["a"])
    b.add_compute("a", 1.0, category="mystery")
    b.add_compute("a", 1.0)
    plan = b.build()
    s = summarize(plan, critical_path_s(plan), None)
    assert s.per_gpu["a"].other_s == pytest.approx(1.0)
    assert s.per_gpu["a"].compute_s == pytest.approx(1.0)
    assert s.gpu_types == {"a": "gpu"}
    from hetero_ns3.errors import SimulationError

    with pytest.raises(SimulationError, match="NaN"):
        summarize(plan, TaskTimes(np.array([0.0, np.nan]), np.array([1.0, np.nan])), None)


def random_plan(rng, n_gpus=6, n_tasks=250):
    gpus = [f"n{i // 2}.g{i % 2}" for i in range(n_gpus)]
    b = PlanBuilder(gpus)
    comm_cats = ["tp", "pp", "dp", "ep", "comm"]
    for t in range(n_tasks):
        k = int(rng.integers(0, 3)) if t else 0
        deps = rng.choice(t, size=min(t, int(rng.integers(0, 4))), replace=False).tolist() if t else []
        g = int(rng.integers(0, n_gpus))
        if k == 0:
            b.add_compute(g, float(rng.uniform(0, 1)), deps, label="fwd")
        elif k == 1:
            h = (g + 1 + int(rng.integers(0, n_gpus - 1))) % n_gpus
            b.add_flow(g, h, 1000, deps, category=str(rng.choice(comm_cats)))
        elif rng.uniform() < 0.5:
            b.add_compute(g, float(rng.uniform(0, 0.3)), deps, stream=1, label="reduce", category="dp")
        else:
            b.add_barrier(g, deps)
    meta = {g: GpuMeta("A" if i % 3 else "B", i // 2) for i, g in enumerate(gpus)}
    return b.build(), meta


@pytest.mark.parametrize("seed", range(12))
def test_random_plans_terms_sum_to_iteration_time_and_nothing_is_unexplained(seed):
    rng = np.random.default_rng(seed)
    plan, meta = random_plan(rng)
    flow_time = rng.uniform(0, 0.5, size=len(plan))
    times = critical_path_s(plan, flow_time)
    s = summarize(plan, times, meta)
    check_closure(s)
    for g, bd in s.per_gpu.items():
        assert bd.other_s == pytest.approx(0.0, abs=1e-9), g  # exact replay, known categories
        # compute_s is the union of this GPU's compute-kernel intervals (independent check by sampling)
        gi = plan.gpus.index(g)
        sel = (plan.kind == 0) & (plan.gpu == gi) & (plan.category == plan.categories.index("compute"))
        grid = np.linspace(0, s.iteration_time_s, 20001)[:-1] + s.iteration_time_s / 40000
        busy = np.zeros(grid.size, dtype=bool)
        for a, z in zip(times.start_s[sel], times.finish_s[sel], strict=True):
            busy |= (grid >= a) & (grid < z)
        assert bd.compute_s == pytest.approx(busy.mean() * s.iteration_time_s, abs=2e-3 * s.iteration_time_s)
    for t, bd in s.per_gpu_type.items():
        rows = [s.per_gpu[g].as_array() for g in plan.gpus if s.gpu_types[g] == t]
        assert np.allclose(bd.as_array(), np.mean(rows, axis=0))
    assert np.allclose(s.overall_max.as_array(), np.max([b.as_array() for b in s.per_gpu.values()], axis=0))


def test_slow_link_raises_exposed_comm_not_straggler_wait():
    plan, meta = ring_dp(4, [1.0] * 4, nodes=[0, 0, 1, 1])
    base = summarize(plan, critical_path_s(plan, 0.1), meta)
    # link n0.g1 -> n1.g0 (GPU 1 -> GPU 2) at a quarter of the rate: its flows take 0.4 s
    slow = np.where((plan.kind == 1) & (plan.gpu == 1) & (plan.dst == 2), 0.4, 0.1)
    s = summarize(plan, critical_path_s(plan, slow), meta)
    check_closure(s)
    assert s.iteration_time_s > base.iteration_time_s + 0.3
    assert s.overall_max.straggler_wait_s == pytest.approx(0.0, abs=0.011)  # at most the ring's end skew
    assert s.overall.exposed_inter_node_comm_s > base.overall.exposed_inter_node_comm_s + 0.3


def test_collective_entry_latency_takes_the_class_of_the_flow_after_it():
    b = PlanBuilder(["a", "b"])
    ca = b.add_compute("a", 1.0, label="bwd")
    cb = b.add_compute("b", 1.0, label="bwd")
    entry = b.add_compute("b", 0.2, [cb], stream=1, label="dp.ar ring/simple ch0 entry", category="dp")
    f = b.add_flow("b", "a", 100, [entry], label="dp.ar ring/simple ch0 send", category="dp")
    b.add_compute("a", 1.0, [ca, f], label="opt")
    plan = b.build()
    s = summarize(plan, critical_path_s(plan, 0.3), {"a": GpuMeta("X", 0), "b": GpuMeta("X", 1)})
    check_closure(s)
    # a waits 0.5 s: 0.2 s entry latency on b then a 0.3 s inter-node flow, all inter-node comm
    assert s.per_gpu["a"].exposed_inter_node_comm_s == pytest.approx(0.5)
    assert s.per_gpu["a"].exposed_intra_node_comm_s == 0.0


def schedule_dag(kind, pp, m, v, tf, tb):
    """A pure-compute pipeline DAG from the workload package's schedule generator (zero-time PP flows).

    Virtual stage ``c * pp + r`` is chunk ``c`` on rank ``r``; a forward needs the previous virtual
    stage's forward, a backward the next one's backward (the last needs its own forward)."""
    from hetero_ns3.workload.schedule import pipeline_schedule

    gpus = [f"n{i}.g0" for i in range(pp)]
    b = PlanBuilder(gpus)
    orders = [list(pipeline_schedule(kind, pp, r, m, v)) for r in range(pp)]
    done, pos, nv = {}, [0] * pp, pp * v
    while any(pos[r] < len(orders[r]) for r in range(pp)):
        progressed = False
        for r in range(pp):
            while pos[r] < len(orders[r]):
                st = orders[r][pos[r]]
                vs = st.chunk * pp + r
                fwd = st.phase == "F"
                need = (
                    (("F", st.microbatch, vs - 1) if vs > 0 else None)
                    if fwd
                    else (("B", st.microbatch, vs + 1) if vs < nv - 1 else ("F", st.microbatch, vs))
                )
                if need is not None and need not in done:
                    break
                t = b.add_compute(gpus[r], (tf if fwd else tb) / v, [done[need]] if need else [], label=str(st))
                nxt = vs + 1 if fwd else vs - 1
                if 0 <= nxt < nv and nxt % pp != r:
                    t = b.add_flow(gpus[r], gpus[nxt % pp], 1, [t], label=f"pp {st}", category="pp")
                done[(st.phase, st.microbatch, vs)] = t
                pos[r] += 1
                progressed = True
        assert progressed, "schedule deadlocked"
    return b.build(), {g: GpuMeta("X", i) for i, g in enumerate(gpus)}


@pytest.mark.parametrize(
    ("kind", "pp", "m", "v"),
    [
        ("gpipe", 4, 8, 1),
        ("1f1b", 4, 8, 1),
        ("interleaved", 4, 8, 2),
        ("interleaved", 4, 16, 2),
        ("interleaved", 4, 8, 3),
    ],
)
def test_project_schedules_give_the_published_bubble(kind, pp, m, v):
    """Narayanan et al. SC'21: bubble (p-1)/m of ideal for GPipe/1F1B, (p-1)/(v m) interleaved."""
    plan, meta = schedule_dag(kind, pp, m, v, 1.0, 2.0)
    s = summarize(plan, critical_path_s(plan, 0.0), meta)
    check_closure(s)
    expected = (pp - 1) / (v * m + pp - 1)
    assert s.iteration_time_s == pytest.approx((m + (pp - 1) / v) * 3.0)
    for g, bd in s.per_gpu.items():
        assert bd.pipeline_bubble_s / s.iteration_time_s == pytest.approx(expected, rel=0.01), g
        assert bd.straggler_wait_s + bd.other_s == pytest.approx(0.0, abs=1e-9)
