"""The host issue model (``[compute] host_op`` ...; :mod:`hetero_ns3.workload.host`, docs/compute.md "Host issue
model") against closed forms: a hand-built program whose host chain and synchronisation give the iteration
time by hand, the issue cost of a compiled MoE layer counted from its step programs, CUDA-graph scopes, and
the default (off) leaving every plan as it was."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from hetero_ns3.errors import ScenarioError
from hetero_ns3.network.analytic.times_only import replay_times
from hetero_ns3.pipeline import collective_env, load_run_cluster, lower_scenario
from hetero_ns3.plan.dag import COMPUTE, HOST_STREAM
from hetero_ns3.plan.lower import lower_workload
from hetero_ns3.scenario.loader import scenario_from_dict
from hetero_ns3.topology import build_graph
from hetero_ns3.workload.artefact import Program, ProgramOp, Workload
from hetero_ns3.workload.compiler import StepPrograms
from hetero_ns3.workload.host import HostModel
from hetero_ns3.workload.placement import RankSlot
from hetero_ns3.workload.planner import resolve
from hetero_ns3.workload.steps import Comm, Compute

DATA = Path(__file__).resolve().parent.parent / "data"
ONE_GPU = DATA / "chakra" / "one-gpu.toml"
FOUR_GPU = DATA / "one-node-4gpu.toml"

MS = 1e-3


def _moe_scenario(**compute):
    """Two MoE layers of Qwen1.5-MoE-A2.7B on one node of 4 H100, expert parallelism 4, two micro-batches; the
    host gap after a synchronisation off unless given (its own tests: test_host_sync_gap.py), so that these
    check the issue costs alone."""
    return scenario_from_dict(
        {
            "model": {"name": "qwen1.5-moe-a2.7b", "layers": 2, "seq_len": 1024},
            "parallelism": {"tp": 1, "pp": 1, "ep": 4, "global_batch": 8, "micro_batch": 1},
            "cluster": {"topology": str(FOUR_GPU)},
            "compute": {"host_sync_gap": "0s", **compute},
        }
    )


def _lowered(sc):
    cluster = load_run_cluster(sc, "analytic")
    graph = build_graph(cluster)
    wplan, low = lower_scenario(sc, graph, cluster)
    return wplan, low, graph


def _iteration_s(graph, plan) -> float:
    return float(np.max(replay_times(graph, plan).times.finish_s))


def _host_tasks(plan) -> np.ndarray:
    host = plan.categories.index("host") if "host" in plan.categories else -1
    return np.flatnonzero((plan.kind == COMPUTE) & (plan.category == host))


def test_host_model_is_off_with_zero_costs():
    """No ``host_op`` / ``host_launch`` (and no sync gap): no host task, and the plan equals the one of explicit
    zeros with graph scopes listed (scopes and the sync flag alone do not turn the model on)."""
    _, default, _ = _lowered(_moe_scenario())
    _, zeros, _ = _lowered(
        _moe_scenario(host_op="0s", host_launch="0s", host_sync_gap="0s", cuda_graphs=["attn"], host_graph="10us")
    )
    assert _host_tasks(default.plan).size == 0 and _host_tasks(zeros.plan).size == 0
    for name in ("kind", "gpu", "dst", "size_bytes", "duration_s", "stream", "dep_ptr", "dep_idx"):
        assert np.array_equal(getattr(default.plan, name), getattr(zeros.plan, name)), name


def _one_rank_workload(host_s: float, sync: bool) -> Workload:
    """One rank, three kernels in a row: A (5 ms on the GPU), B and C (1 ms each); each takes ``host_s`` to issue
    and, with ``sync``, the host waits for A before issuing B."""
    ops = (
        ProgramOp(0, "compute", "A", "compute", (), "F", 0, 0, 0.0, 0.0, 5 * MS, host=host_s, host_sync=sync),
        ProgramOp(1, "compute", "B", "compute", (0,), "F", 0, 0, 0.0, 0.0, 1 * MS, host=host_s),
        ProgramOp(2, "compute", "C", "compute", (1,), "F", 0, 0, 0.0, 0.0, 1 * MS, host=host_s),
    )
    slot = RankSlot(0, 0, 0, 0, "n0.g0", "H100-SXM", 0, "h100")
    return Workload((slot,), (Program(0, 0, (0,), "H100-SXM", ops),), 1, {})


@pytest.mark.parametrize(
    ("host_ms", "sync", "expected_ms"),
    [
        # host ahead of the GPU: A starts after its 1 ms issue, then the GPU runs 5 + 1 + 1 ms back to back
        (1.0, False, 1 + 5 + 1 + 1),
        # the host waits for A (ends at 6 ms), issues B (1 ms), C follows B: 6 + 1 + 1 + 1
        (1.0, True, 6 + 1 + 1 + 1),
        # host-bound: issues end at 3, 6, 9 ms (A on the GPU until 8 ms, B then 8..9 waits for its issue): C
        # issued at 9, runs 9..10
        (3.0, False, 3 * 3 + 1),
        # host-bound with the sync: A 3..8, B issued 8..11 and run 11..12, C issued 11..14 and run 14..15
        (3.0, True, 8 + 3 + 3 + 1),
        # no host model: the GPU alone
        (0.0, False, 5 + 1 + 1),
    ],
)
def test_host_chain_and_sync_give_the_hand_computed_time(host_ms, sync, expected_ms):
    sc = scenario_from_dict({"cluster": {"topology": str(ONE_GPU)}})
    cluster = load_run_cluster(sc, "analytic")
    graph = build_graph(cluster)
    low = lower_workload(_one_rank_workload(host_ms * MS, sync), collective_env(sc, graph))
    n_host = _host_tasks(low.plan).size
    assert n_host == (3 if host_ms > 0 else 0)
    if n_host:
        assert set(low.plan.stream[_host_tasks(low.plan)].tolist()) == {HOST_STREAM}
    assert _iteration_s(graph, low.plan) == pytest.approx(expected_ms * MS, rel=1e-9)


def _programs(sc) -> StepPrograms:
    """The step programs of scenario ``sc`` (its model, plan and compute section on its cluster)."""
    return StepPrograms(resolve(sc.model, sc.parallelism, load_run_cluster(sc, "analytic").gpus(), sc.compute).spec)


def _issue_s(sc, model: HostModel) -> float:
    """Host seconds one rank issues per iteration, counted from the step programs: per micro-batch the
    embedding, two layers and the output layer, forward and backward (every compute step at
    :meth:`HostModel.step_s`, every blocking collective at ``op_s``), then the optimizer's one kernel."""
    progs = _programs(sc)
    per_mb = 0.0
    for what, times in (("emb_f", 1), ("layer_f", 2), ("head_f", 1), ("head_b", 1), ("layer_b", 2), ("emb_b", 1)):
        for st in progs.program(what, 0):
            if isinstance(st, Compute):
                per_mb += times * model.step_s(st.name, st.kernels)
            elif isinstance(st, Comm) and st.mode == "blocking":
                per_mb += times * model.op_s
    return 2 * per_mb + model.op_s  # two micro-batches per rank, the optimizer


def test_a_host_bound_iteration_is_the_issue_cost_of_its_ops():
    """With an issue cost far above every kernel the iteration is the host chain: each rank's host tasks sum to
    the issue cost counted from its step programs (kernels and blocking calls at ``host_op``, each grouped
    expert GEMM's 14 further launches at ``host_launch``: 60 experts over EP 4), and the GPU's own time adds
    at most the host-off iteration."""
    model = HostModel(op_s=20 * MS, launch_s=2 * MS)
    sc = _moe_scenario(host_op="20ms", host_launch="2ms")
    expected = _issue_s(sc, model)
    grouped = [
        k.batch
        for st in _programs(sc).program("layer_f", 0)
        if isinstance(st, Compute) and st.name == "moe.experts"
        for k in st.kernels
        if k.op == "gemm"
    ]
    assert grouped == [15, 15]
    _, low, graph = _lowered(sc)
    plan = low.plan
    host = _host_tasks(plan)
    per_gpu = np.bincount(plan.gpu[host], weights=plan.duration_s[host], minlength=len(plan.gpus))
    assert per_gpu == pytest.approx(np.full(4, expected), rel=1e-9)
    _, off, _ = _lowered(_moe_scenario())
    t_off = _iteration_s(graph, off.plan)
    assert t_off < 0.1 * expected
    t = _iteration_s(graph, plan)
    assert expected <= t <= expected + t_off + 1e-9


def test_the_routing_step_synchronises_the_host_only_when_the_model_is_on():
    wplan, _, _ = _lowered(_moe_scenario(host_op="10us"))
    ops = [op for prog in wplan.workload.programs for op in prog.ops]
    assert all(op.name.endswith("moe.route") for op in ops if op.host_sync)
    assert sum(op.host_sync for op in ops) == 4 * 2 * 2  # 4 ranks x 2 micro-batches x 2 layers (forward only)
    off, _, _ = _lowered(_moe_scenario(host_op="10us", moe_host_sync=False))
    assert not any(op.host_sync for prog in off.workload.programs for op in prog.ops)
    default, _, _ = _lowered(_moe_scenario())
    assert not any(op.host_sync or op.host for prog in default.workload.programs for op in prog.ops)


def test_a_cuda_graph_scope_replaces_the_issue_cost_of_its_steps():
    """``cuda_graphs = ["attn"]``: every attention step costs ``host_graph`` once instead of ``host_op`` per
    kernel, forward and backward (counted from the step programs)."""
    model = HostModel(op_s=10e-6, graph_s=25e-6, graph_scopes=("attn",))
    progs = _programs(_moe_scenario(host_op="10us"))
    eager = HostModel(op_s=10e-6)
    for what in ("layer_f", "layer_b"):
        for st in progs.program(what, 0):
            if not isinstance(st, Compute):
                continue
            if st.name.startswith("attn"):
                assert model.step_s(st.name, st.kernels) == 25e-6
                assert eager.step_s(st.name, st.kernels) == pytest.approx(10e-6 * len(st.kernels))
            else:
                assert model.step_s(st.name, st.kernels) == eager.step_s(st.name, st.kernels)
    assert model.captured("recompute.attn") and not model.captured("attnx") and not model.captured("moe.route")
    assert HostModel(graph_scopes=("moe_router",)).captured("moe.route")


def test_the_graphed_scenario_issues_less():
    _, eager, _ = _lowered(_moe_scenario(host_op="1ms"))
    _, graphed, _ = _lowered(_moe_scenario(host_op="1ms", cuda_graphs=["attn", "moe_router"], host_graph="1ms"))
    h_e, h_g = _host_tasks(eager.plan), _host_tasks(graphed.plan)
    assert graphed.plan.duration_s[h_g].sum() < eager.plan.duration_s[h_e].sum()


@pytest.mark.parametrize(
    ("field", "value", "message"),
    [
        ("host_op", "-1us", "compute.host_op"),
        ("host_launch", "2s", "compute.host_launch"),
        ("host_sync_gap", "2s", "compute.host_sync_gap"),
        ("host_sync_jitter", 1.5, "compute.host_sync_jitter .1.5. must be a share between 0 and 1"),
        ("host_sync_jitter", -0.1, "compute.host_sync_jitter"),
        ("cuda_graphs", ["moe"], "is not a supported CUDA-graph scope"),
        ("cuda_graphs", "attn", "compute.cuda_graphs"),
    ],
)
def test_bad_host_fields_are_refused_naming_the_field(field, value, message):
    with pytest.raises(ScenarioError, match=message):
        _moe_scenario(**{field: value}).compute.validate()
