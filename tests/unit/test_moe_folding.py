"""MoE parallel folding (``parallelism.etp = 1``): expert parallelism over the tp x dp ranks of a stage, whole experts
on every rank, no TP collective around the token exchange (Liu et al. 2025, arXiv 2504.14960; Megatron-Core's expert
rank order tp-ep-dp with an expert tensor-parallel size of 1)."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, replace
from pathlib import Path

import pytest

from hetero_ns3.errors import ScenarioError
from hetero_ns3.scenario import scenario_from_dict
from hetero_ns3.workload import moe
from hetero_ns3.workload.memory import layer_params_per_rank
from hetero_ns3.workload.models import get_model
from hetero_ns3.workload.placement import place
from hetero_ns3.workload.planner import plan_scenario
from hetero_ns3.workload.steps import Comm, Compute, LayerContext
from tests.unit.test_workload_placement import _gpus

TOPOLOGY = str(Path(__file__).resolve().parent.parent / "data" / "two-node-h100.toml")


def _scenario(**par):
    p = {"tp": 2, "pp": 1, "ep": 16, "etp": 1, "sequence_parallel": True, "global_batch": 16, "micro_batch": 1}
    p.update(par)
    p = {k: v for k, v in p.items() if v is not None}
    return scenario_from_dict(
        {
            "model": {"name": "qwen3-30b-a3b", "seq_len": 1024},
            "parallelism": {**p, "zero_stage": 1},
            "cluster": {"topology": TOPOLOGY},
            "run": {"backend": "analytic"},
        }
    )


def test_folded_groups_follow_megatrons_expert_rank_order() -> None:
    """TP 2, DP 8, EP 4, ETP 1 on 16 ranks (one stage, rank = t + 2 d): Megatron-Core's expert groups are the
    blocks of four consecutive ranks, the expert-data-parallel groups the ranks four apart."""
    pl = place(_gpus(2), tp=2, pp=1, dp=8, ep=4, etp=1)
    assert pl.folded and pl.ep_replicas == 2 and pl.edp == 4
    for s in pl.slots:
        ep = [x.rank for x in pl.ep_group(s.tp, s.pp, s.dp)]
        edp = [x.rank for x in pl.edp_group(s.tp, s.pp, s.dp)]
        assert ep == list(range(s.rank // 4 * 4, s.rank // 4 * 4 + 4))
        assert edp == list(range(s.rank % 4, 16, 4))
    # not folded (etp = tp): ep is carved out of dp, the same tp index in ep consecutive replicas
    pl2 = place(_gpus(2), tp=2, pp=1, dp=8, ep=4)
    assert not pl2.folded and pl2.ep_replicas == 4 and pl2.edp == 2
    assert [(x.tp, x.dp) for x in pl2.ep_group(1, 0, 5)] == [(1, 4), (1, 5), (1, 6), (1, 7)]


def test_folded_groups_stay_inside_a_stage_under_both_orders() -> None:
    for order in ("tp-pp-dp", "tp-dp-pp"):
        pl = place(_gpus(4), tp=2, pp=2, dp=8, ep=8, etp=1, order=order)
        for s in pl.slots:
            grp = pl.ep_group(s.tp, s.pp, s.dp)
            assert {x.pp for x in grp} == {s.pp} and s in grp and len({x.gpu for x in grp}) == 8
            assert {x.tp for x in grp} == {0, 1}  # whole TP groups of ep / tp = 4 replicas


def _layer(c: LayerContext):
    return moe.moe_forward(c), moe.moe_backward(c)


def test_folded_experts_take_their_own_tokens_whole_and_skip_the_tp_gather() -> None:
    model = get_model("qwen3-30b-a3b")
    base = LayerContext(model, 1, 2, True, 8, "none")  # etp = tp = 2, ep 8
    fold = replace(base, ep=16, etp=1)  # the same 32 ranks folded: ep 16
    fwd_b, bwd_b = _layer(base)
    fwd_f, bwd_f = _layer(fold)
    comms_f = [s for s in fwd_f + bwd_f if isinstance(s, Comm)]
    assert {s.dim for s in comms_f} == {"ep"} and all(s.collective == "all_to_all" for s in comms_f)
    assert sum(1 for s in fwd_b + bwd_b if isinstance(s, Comm) and s.dim == "tp") == 4  # gather / scatter x 2 x 2
    # each rank sends its own sequence-parallel tokens, top_k copies: the same bytes as before folding
    a2a = {s.bytes for s in comms_f}
    assert a2a == {2.0 * (model.seq_len // 2) * model.top_k * model.hidden}

    def experts(steps):
        ks = [k for s in steps if isinstance(s, Compute) and s.name == "moe.experts" for k in s.kernels]
        return {k.name: k for k in ks}

    kb, kf = experts(fwd_b), experts(fwd_f)
    # 8 local experts of the full width on T / 2 x top_k copies, against 16 experts of half the width on T x top_k
    assert kf["fc1"].batch == 8 and kb["fc1"].batch == 16
    assert kf["fc1"].n == 2 * model.ffn_hidden and kb["fc1"].n == model.ffn_hidden
    assert kf["fc1"].m == (model.seq_len // 2) * model.top_k // 8 and kb["fc1"].m == model.seq_len * model.top_k // 16
    for name in ("fc1", "fc2"):
        assert kf[name].flops == pytest.approx(kb[name].flops, rel=1e-12)  # the same work per rank


def test_folded_workload_exchanges_over_whole_tp_groups_and_reduces_experts_over_tp_x_dp() -> None:
    wp = plan_scenario(_scenario(ep=4))
    wl = wp.workload
    assert wl.meta["etp"] == 1
    members: dict[tuple, list] = {}
    for prog in wl.programs:
        for p in prog.ops:
            if p.kind == "comm" and p.instance >= 0 and p.dim in ("ep", "dp"):
                per = len(p.groups) > 1
                for t in range(wl.tp):
                    g = p.groups[t] if per else p.groups[0]
                    members.setdefault((p.dim, p.collective, p.instance * wl.tp + (t if per else 0)), []).append(g)
    shapes = Counter((k[0], k[1], len(v[0]), len(v)) for k, v in members.items())
    assert all(len(set(v)) == 1 for v in members.values())  # every member of an instance names the same group
    a2a = {k: n for k, n in shapes.items() if k[0] == "ep"}
    assert set(a2a) == {("ep", "all_to_all", 4, 4)}  # 4 ranks: both TP ranks of 2 replicas
    expert_sync = {k for k in shapes if k[0] == "dp" and k[2] == 4}
    assert expert_sync == {("dp", "reduce_scatter", 4, 4), ("dp", "all_gather", 4, 4)}  # edp = 2 x 8 / 4
    assert not any(p.name.endswith((".ag", ".rs")) and ".moe." in p.name for prog in wl.programs for p in prog.ops)


def test_folded_memory_holds_whole_experts_and_shards_their_state_over_tp_x_dp() -> None:
    model = get_model("qwen3-30b-a3b")
    layer = next(i for i in range(model.layers) if model.is_moe_layer(i))
    folded = layer_params_per_rank(model, layer, 2, 16, 1)
    split = layer_params_per_rank(model, layer, 2, 8, 2)
    assert folded.expert == pytest.approx(split.expert)  # 8 whole experts = 16 half experts
    assert folded.dense == split.dense
    # the distributed optimizer shards the experts' state over the expert-data-parallel ranks, tp x dp / ep when
    # folded: EP 4 holds four times EP 16's experts (32 against 8 whole experts) over edp 4 against 1, so the same
    # optimizer bytes per rank (with dp / ep = 2 it would hold twice as much)
    m16, m4 = plan_scenario(_scenario(ep=16)).memory[0], plan_scenario(_scenario(ep=4)).memory[0]
    e16 = sum(layer_params_per_rank(model, i, 2, 16, 1).expert for i in range(model.layers) if model.is_moe_layer(i))
    assert m4.params - m16.params == pytest.approx(3 * e16)
    assert m4.optimizer == pytest.approx(m16.optimizer, rel=1e-12)


@dataclass(frozen=True)
class _Bad:
    par: dict
    field: str
    words: str


@pytest.mark.parametrize(
    "bad",
    [
        _Bad({"ep": 3, "etp": 1}, "parallelism.ep (3)", "multiple of tp"),
        _Bad({"ep": 32, "etp": 1}, "parallelism.ep (32)", "must divide tp x dp"),
        _Bad({"ep": 16, "etp": None}, "parallelism.ep (16)", "etp = 1"),
        _Bad({"tp": 4, "ep": 4, "etp": 2}, "parallelism.etp (2)", "1 (MoE parallel folding) or tp"),
    ],
)
def test_bad_folding_is_refused_naming_the_field(bad: _Bad) -> None:
    with pytest.raises(ScenarioError) as err:
        plan_scenario(_scenario(**bad.par))
    assert bad.field in str(err.value) and bad.words in str(err.value)


def test_etp_on_a_dense_model_is_refused() -> None:
    sc = scenario_from_dict(
        {
            "model": {"name": "gpt3-125m", "seq_len": 512},
            "parallelism": {"tp": 2, "etp": 1, "sequence_parallel": True, "global_batch": 8},
            "cluster": {"topology": TOPOLOGY},
        }
    )
    with pytest.raises(ScenarioError, match=r"parallelism.etp \(1\) needs an MoE model"):
        plan_scenario(sc)


def test_etp_equal_to_tp_is_the_unfolded_plan() -> None:
    a = plan_scenario(_scenario(ep=8, etp=None)).workload
    b = plan_scenario(_scenario(ep=8, etp=2)).workload
    assert [p.ops for p in a.programs] == [p.ops for p in b.programs]


def test_plan_prints_etp_only_where_it_folds(tmp_path, capsys) -> None:
    from hetero_ns3.cli.main import main

    path = tmp_path / "fold.toml"
    path.write_text(
        '[model]\nname = "qwen3-30b-a3b"\nseq_len = 1024\n[parallelism]\ntp = 2\nep = 16\netp = 1\n'
        f'sequence_parallel = true\nglobal_batch = 16\n[cluster]\ntopology = "{TOPOLOGY}"\n'
    )
    assert main(["plan", str(path)]) == 0
    assert "tp=2 pp=1 dp=8 ep=16 etp=1 cp=1" in capsys.readouterr().out
    assert main(["plan", str(path), "--set", "parallelism.ep=8", "--set", "parallelism.etp=2"]) == 0
    assert "ep=8 cp=1" in capsys.readouterr().out
