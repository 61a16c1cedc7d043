"""Expert-parallel overlap (``parallelism.overlap_moe_expert_parallel_comm``; :mod:`hetero_ns3.workload.ep_overlap`,
docs/workload.md "Expert-parallel overlap"): Megatron-Core's combined 1F1B schedule, the split of an MoE layer into
its four nodes, the work kept, and the replayed two-stream timeline of every layer pair checked against the rules
of ``TransformerLayerSchedulePlan.run`` (each compute node after the one before it and its own exchange; each
exchange after its input and the exchange before it), exactly."""

from __future__ import annotations

import dataclasses
import functools
from collections import Counter
from pathlib import Path

import numpy as np
import pytest

from hetero_ns3.errors import ScenarioError
from hetero_ns3.network.analytic.times_only import replay_times
from hetero_ns3.pipeline import load_run_cluster, lower_scenario
from hetero_ns3.scenario.loader import scenario_from_dict
from hetero_ns3.topology import build_graph
from hetero_ns3.workload.ep_overlap import split_backward, split_forward
from hetero_ns3.workload.models import get_model
from hetero_ns3.workload.moe import moe_backward, moe_forward
from hetero_ns3.workload.schedule import combined_schedule, pipeline_schedule
from hetero_ns3.workload.steps import Comm, LayerContext

TWO_NODES = Path(__file__).resolve().parent.parent / "data" / "two-node-h100.toml"
LAYERS, MICRO_BATCHES, EP = 3, 3, 16


def _scenario(overlap: bool, **extra):
    """Three MoE layers of Qwen1.5-MoE-A2.7B (a shared expert; 64 experts, to split over 16 ranks) on two nodes of 8 H100, expert parallelism 16 across
    the nodes, three micro-batches; no host gaps unless asked."""
    par = {"tp": 1, "pp": 1, "ep": EP, "global_batch": EP * MICRO_BATCHES, "micro_batch": 1}
    par.update(extra.pop("parallelism", {}))
    return scenario_from_dict(
        {
            "model": {"name": "qwen1.5-moe-a2.7b", "layers": LAYERS, "seq_len": 1024, "experts": 64},
            "parallelism": {**par, "overlap_moe_expert_parallel_comm": overlap},
            "cluster": {"topology": str(TWO_NODES)},
            "compute": {"host_sync_gap": "0s", **extra.pop("compute", {})},
        }
    )


def _lower(sc):
    cluster = load_run_cluster(sc, "analytic")
    graph = build_graph(cluster)
    wplan, low = lower_scenario(sc, graph, cluster)
    times = replay_times(graph, low.plan).times
    return wplan.workload, low, times


# -- schedule ----------------------------------------------------------------------------------------------------


def test_combined_schedule_without_pipelining():
    """pp 1: the first forward alone, then forward i + 1 with backward i, then the last backward."""
    groups = combined_schedule("1f1b", 1, 0, 4)
    assert [tuple(map(str, g)) for g in groups] == [("F0",), ("F1", "B0"), ("F2", "B1"), ("F3", "B2"), ("B3",)]


@pytest.mark.parametrize("rank", [0, 1, 3])
def test_combined_schedule_interleaved(rank):
    """Interleaved: every step of the plain schedule once, one more warm-up forward, then (forward, backward) pairs
    in the plain schedule's steady order, then the cool-down backwards."""
    pp, m, vpp = 4, 8, 2
    plain = pipeline_schedule("interleaved", pp, rank, m, vpp)
    groups = combined_schedule("interleaved", pp, rank, m, vpp)
    flat = [s for g in groups for s in g]
    assert sorted(map(str, flat)) == sorted(map(str, plain))
    warm = next(i for i, g in enumerate(groups) if len(g) == 2)
    assert warm == min(2 * (pp - rank - 1) + (vpp - 1) * pp + 1, m * vpp)
    pairs = [g for g in groups if len(g) == 2]
    assert all(f.phase == "F" and b.phase == "B" for f, b in pairs)
    assert [b for _, b in pairs] == [s for s in plain if s.phase == "B"][: len(pairs)]
    done: set[tuple[int, int]] = set()
    for s in flat:  # a backward after its own forward
        if s.phase == "F":
            done.add((s.microbatch, s.chunk))
        else:
            assert (s.microbatch, s.chunk) in done


def test_combined_schedule_needs_interleaving_with_pipelining():
    with pytest.raises(ScenarioError, match=r"overlap_moe_expert_parallel_comm.*interleaved"):
        combined_schedule("1f1b", 2, 0, 4)


# -- nodes -------------------------------------------------------------------------------------------------------


def _ctx(tp: int = 1) -> LayerContext:
    return LayerContext(get_model("qwen1.5-moe-a2.7b"), 1, tp, tp > 1, 4, "none")


@pytest.mark.parametrize("tp", [1, 2])
def test_forward_nodes(tp):
    """Forward: attention to the routing step (and the shared expert) | the exchange's steps | the experts | the
    combine's steps and the residual add; every step once."""
    steps = moe_forward(_ctx(tp))
    nodes = split_forward(steps)
    assert nodes is not None
    assert Counter(map(id, [s for n in nodes for s in n])) == Counter(map(id, steps))
    names = [[s.name for s in n] for n in nodes]
    assert names[0][0] == "moe.route" and any(n.startswith("moe.shared") for n in names[0])
    assert all(n.startswith("moe.dispatch") for n in names[1]) and "moe.dispatch.a2a" in names[1]
    assert names[2] == ["moe.experts"]
    assert names[3][0].startswith("moe.combine") and not any(n.startswith("moe.shared") for n in names[3])
    assert ("moe.dispatch.ag" in names[1]) == (tp > 1) and ("moe.combine.rs" in names[3]) == (tp > 1)
    assert not any(isinstance(s, Comm) and s.dim == "ep" for s in nodes.pre + nodes.mlp)


@pytest.mark.parametrize("tp", [1, 2])
def test_backward_nodes(tp):
    steps = moe_backward(_ctx(tp))
    nodes = split_backward(steps)
    assert nodes is not None
    assert Counter(map(id, [s for n in nodes for s in n])) == Counter(map(id, steps))
    names = [[getattr(s, "name", "join") for s in n] for n in nodes]
    assert "join" not in names[0] and names[0][-1] != "join"
    assert "moe.combine.bwd.a2a" in names[0] and not any(n.startswith("moe.shared") for n in names[0])
    assert names[1] == ["moe.experts.bwd"]
    assert all(n.startswith("moe.dispatch.bwd") for n in names[2]) and "moe.dispatch.bwd.a2a" in names[2]
    assert any(n.startswith("moe.shared") for n in names[3]) and "moe.route.bwd" in names[3]


def test_dense_layers_are_not_split():
    from hetero_ns3.workload.layers import layer_backward, layer_forward

    ctx = LayerContext(get_model("gpt3-1.3b"), 1, 1, False, 1, "none")
    assert split_forward(layer_forward(ctx, 0)) is None and split_backward(layer_backward(ctx, 0)) is None


# -- the compiled iteration --------------------------------------------------------------------------------------


def test_overlap_keeps_the_work_and_moves_the_exchanges():
    """The same kernels and collectives per rank; in the paired steps the exchanges (and the kernels around them)
    leave the compute stream, and each paired forward's dispatch carries its synchronisation."""
    off, _, _ = _lower(_scenario(False, compute={"host_sync_gap": "1ms"}))
    on, _, _ = _lower(_scenario(True, compute={"host_sync_gap": "1ms"}))
    for r in (0, 9):
        a, b = off.ops[r], on.ops[r]
        assert sum(o.flops for o in a) == pytest.approx(sum(o.flops for o in b), rel=1e-12)
        assert sum(o.bytes for o in a if o.kind == "compute") == pytest.approx(
            sum(o.bytes for o in b if o.kind == "compute"), rel=1e-12
        )

        def comms(ops):
            return Counter((o.name, o.collective, o.bytes, o.dim) for o in ops if o.kind == "comm")

        assert comms(a) == comms(b)
    ops = on.programs[0].ops
    side = [o for o in ops if o.stream == "comm" and o.dim == "ep"]
    paired = (MICRO_BATCHES - 1) * LAYERS  # forwards F1, F2 each with a backward
    for exchange in ("moe.dispatch.a2a", "moe.combine.a2a", "moe.dispatch.bwd.a2a", "moe.combine.bwd.a2a"):
        assert sum(o.name.endswith(exchange) for o in side) == paired
    assert sum(o.host_wait for o in ops) == paired
    assert all(o.name.endswith("moe.dispatch.a2a") for o in ops if o.host_wait)
    assert sum(o.host_sync for o in ops) == 1 * LAYERS  # the unpaired F0 keeps the usual synchronisation
    assert any(o.kind == "compute" and o.stream == "comm" and o.name.endswith("moe.unpermute") for o in ops)


def _node_times(workload, low, times, rank, tag, names):
    """(start, end) per node of one layer on ``rank``: compute nodes by their op, exchanges by their last op."""
    by_name = {o.name: o for o in workload.ops[rank]}
    out = {}
    for key, name in names.items():
        op = by_name[f"{tag}.{name}"]
        tasks = low.op_exit[op.id]
        out[key] = (
            float(min(times.start_s[t] for t in tasks)),
            float(max(times.finish_s[t] for t in tasks)),
        )
    return out


@pytest.mark.parametrize("dispatch", ["after_experts", "eager"])
def test_layer_pairs_follow_the_two_stream_rules(dispatch):
    """On three ranks, every layer pair of the steady step (F1 with B0): each compute node starts exactly when the
    compute node before it and its own exchange have ended; each exchange after its input (and the dispatch backward
    after the forward's, one communicator); the compute nodes never overlap one another; under ``after_experts``
    the forward's dispatch also after the expert backward issued before it."""
    workload, low, times = _lower(_scenario(True, parallelism={"ep_overlap_dispatch": dispatch}))
    for rank in (0, 5, 12):
        prev: tuple[float, float] | None = None  # the previous pair's (pre-dispatch backward, combine) ends
        for i in range(LAYERS):
            lf, lb = i, LAYERS - 1 - i
            f = _node_times(workload, low, times, rank, f"F1.c0.L{lf}", {
                "pre": f"attn.ln..F1.c0.L{lf}.moe.shared", "disp": "moe.dispatch.a2a",
                "mlp": "moe.experts", "comb": "moe.bda",
            })  # fmt: skip
            b = _node_times(workload, low, times, rank, f"B0.c0.L{lb}", {
                "comb": "moe.combine.bwd.a2a", "mlp": "moe.experts.bwd", "disp": "moe.dispatch.bwd.a2a",
                "pre": f"moe.shared.bwd..B0.c0.L{lb}.attn.ln.bwd",
            })  # fmt: skip
            if prev is not None:
                assert f["pre"][0] == pytest.approx(max(prev), abs=1e-12)
            assert b["mlp"][0] == pytest.approx(max(f["pre"][1], b["comb"][1]), abs=1e-12)
            assert f["mlp"][0] == pytest.approx(max(b["mlp"][1], f["disp"][1]), abs=1e-12)
            assert b["pre"][0] == pytest.approx(max(f["mlp"][1], b["disp"][1]), abs=1e-12)
            assert f["disp"][0] >= f["pre"][1] and b["disp"][0] >= max(b["mlp"][1], f["disp"][1]) - 1e-12
            assert f["comb"][1] >= max(f["mlp"][1], b["disp"][1])
            if dispatch == "after_experts":
                assert f["disp"][0] >= b["mlp"][1] - 1e-12
            compute = sum(n[1] - n[0] for n in (f["pre"], b["mlp"], f["mlp"], b["pre"]))
            assert b["pre"][1] - f["pre"][0] >= compute * (1 - 1e-12)  # one compute stream
            prev = (b["pre"][1], f["comb"][1])


@functools.cache
def _step(overlap: bool, dispatch: str = "after_experts", gap: str = "0s") -> float:
    """The iteration time of the three-layer scenario (cached: the two tests below share runs)."""
    sc = _scenario(overlap, parallelism={"ep_overlap_dispatch": dispatch}, compute={"host_sync_gap": gap})
    return float(np.max(_lower(sc)[2].finish_s))


def test_overlap_hides_exchanges_and_host_gaps():
    """Eager overlap shortens the iteration, and host gaps cost less with it: the host waits inside the dispatch
    while the GPU runs the other micro-batch's experts."""
    T = {"off": _step(False), "on": _step(True, "eager"), "goff": _step(False, gap="1ms")}
    T["gon"] = _step(True, "eager", "1ms")
    assert T["on"] < T["off"]
    assert 0 < T["gon"] - T["on"] < T["goff"] - T["off"]


def test_dispatch_after_the_expert_backward_hides_less():
    """Under ``after_experts`` (the default) the forward's dispatch and its host synchronisation wait for the other
    micro-batch's expert backward: the step lies between the eager overlap's and no overlap's, and host gaps are no
    longer hidden behind that backward (each costs about what it costs without overlap)."""
    eager, after, off = _step(True, "eager"), _step(True), _step(False)
    assert eager < after < off
    g_eager = _step(True, "eager", "100us") - eager
    g_after = _step(True, gap="100us") - after
    g_off = _step(False, gap="100us") - off
    assert g_eager < 0.95 * g_after and g_after == pytest.approx(g_off, rel=0.05)


@pytest.mark.parametrize(
    ("par", "match"),
    [
        ({"ep": 1}, r"overlap_moe_expert_parallel_comm \(True\) needs expert parallelism"),
        ({"pp": 2, "ep": 2, "global_batch": 24}, r"needs parallelism.schedule = 'interleaved' when pp > 1"),
        ({"recompute": "full"}, r"cannot run with parallelism.recompute = 'full'"),
        ({"recompute": "selective", "recompute_modules": ["moe"]}, r"'moe' in parallelism.recompute_modules"),
        ({"zero_stage": 3}, r"not modelled with FSDP"),
    ],
)
def test_refused_combinations(par, match):
    with pytest.raises(ScenarioError, match=match):
        _lower(_scenario(True, parallelism=par))


@pytest.mark.parametrize(
    "par",
    [
        {"tp": 1, "pp": 2, "vpp": 2, "schedule": "interleaved", "ep": 8, "global_batch": 32},
        {"tp": 2, "pp": 1, "ep": 8, "sequence_parallel": True, "global_batch": 24},
    ],
    ids=["interleaved-pp2", "tp2-sp"],
)
def test_overlap_with_pipelining_and_tensor_parallelism(par):
    """The combined schedule across interleaved pipeline stages (one more warm-up forward, sends and receives around
    the pairs) and with tensor parallelism inside the nodes (its gathers in the exchanges' nodes) replays to the end
    and shortens the iteration."""
    ends = []
    for overlap in (False, True):
        sc = _scenario(overlap, parallelism={**par, "micro_batch": 1}, compute={"host_sync_gap": "0.3ms"})
        sc = dataclasses.replace(sc, model=dataclasses.replace(sc.model, layers=4))
        ends.append(float(np.max(_lower(sc)[2].finish_s)))
    assert ends[1] < ends[0]


def test_delayed_weight_gradients():
    """``delay_wgrad_compute``: in each pair the experts' weight-gradient GEMMs leave the backward's expert node for
    one op issued after the forward's dispatch, and the backward's dispatch waits for the data gradients only; the
    FLOPs stay. Refused without overlap (Megatron-Bridge's rule)."""
    plain, _, _ = _lower(_scenario(True))
    delayed, _, _ = _lower(_scenario(True, parallelism={"delay_wgrad_compute": True}))
    assert sum(o.flops for o in plain.ops[0]) == pytest.approx(sum(o.flops for o in delayed.ops[0]), rel=1e-12)
    ops = {o.name: o for o in delayed.programs[0].ops}
    dw = ops["B0.c0.L2.moe.experts.bwd.dw"]
    mlp, dispatch_f = ops["B0.c0.L2.moe.experts.bwd"], ops["F1.c0.L0.moe.dispatch.a2a"]
    dispatch_b = ops["B0.c0.L2.moe.dispatch.bwd.a2a"]
    whole = {o.name: o for o in plain.programs[0].ops}["B0.c0.L2.moe.experts.bwd"]
    assert mlp.flops + dw.flops == pytest.approx(whole.flops, rel=1e-12) and 0 < dw.flops < whole.flops
    assert dispatch_f.id < dw.id < dispatch_b.id  # issued after the forward's dispatch, before the backward's
    assert mlp.id in dispatch_b.deps and dw.id not in dispatch_b.deps
    with pytest.raises(ScenarioError, match=r"delay_wgrad_compute \(True\) needs parallelism.overlap_moe"):
        _lower(_scenario(False, parallelism={"delay_wgrad_compute": True}))
