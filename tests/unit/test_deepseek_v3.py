"""DeepSeek-V3 in the catalog: multi-latent attention (MLA), dense first layers with a wider MLP than the experts, and
the multi-token prediction (MTP) module, each against the closed forms of the DeepSeek-V2 / V3 reports (arXiv
2405.04434 Sec. 2.1, arXiv 2412.19437 Sec. 2 and 4.2) and Megatron-Core's ``MLASelfAttention``."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from hetero_ns3.compute.recipes import is_fp8_linear
from hetero_ns3.compute.roofline import Kernel
from hetero_ns3.errors import ScenarioError
from hetero_ns3.network.analytic.times_only import replay_times
from hetero_ns3.pipeline import load_run_cluster, lower_scenario
from hetero_ns3.scenario import scenario_from_dict
from hetero_ns3.topology import build_graph
from hetero_ns3.workload import layers as L
from hetero_ns3.workload.attention import flash_attention_kernels
from hetero_ns3.workload.memory import layer_activation_bytes, layer_params_per_rank, mtp_params_per_rank
from hetero_ns3.workload.models import ModelSpec, get_model
from hetero_ns3.workload.planner import plan_scenario
from hetero_ns3.workload.steps import Comm, Compute, LayerContext

TOPOLOGY = str(Path(__file__).resolve().parent.parent / "data" / "two-node-h100.toml")
DS = get_model("deepseek-v3")


def _kernels(steps: list) -> list[Kernel]:
    return [k for s in steps if isinstance(s, Compute) for k in s.kernels]


def _gemms(steps: list) -> dict[str, tuple[int, int, int]]:
    return {k.name: (k.m, k.n, k.k) for k in _kernels(steps) if k.op == "gemm"}


def test_catalog_counts_match_the_report() -> None:
    """671 B parameters without the MTP module, 37 B activated per token, the MTP module 14 B with its embedding
    and output head (the report's 685 B on Hugging Face); one MLA block 187.1 M (its closed form)."""
    main = DS.total_params() - DS.mtp_params()
    assert main == pytest.approx(671e9, rel=0.005)
    inactive = sum(
        (DS.experts - DS.top_k) * DS.mlp_params(DS.expert_ffn) for i in range(DS.layers) if DS.is_moe_layer(i)
    )
    assert main - inactive == pytest.approx(37e9, rel=0.03)
    assert DS.mtp_params() + 2 * DS.padded_vocab(1) * DS.hidden == pytest.approx(14e9, rel=0.05)
    h, n = 7168, 128
    mla = h * 1536 + 1536 + 1536 * n * 192 + h * 576 + 512 + 512 * n * 256 + n * 128 * h
    assert DS.mla_params() == mla == 187_107_328
    assert [DS.is_moe_layer(i) for i in range(5)] == [False, False, False, True, True]
    assert list(DS.layer_kinds().values()) == [(0, 3), (3, 58)]


def test_mla_layer_flops_equal_the_programs_kernels() -> None:
    """TP 1: the forward program's GEMM and attention FLOPs sum to the model's layer FLOPs (dense layer 0, with
    the scores counted over the full square: 2 b s^2 heads (192 + 128))."""
    c = LayerContext(DS, 1, 1, False, 1, "none")
    fwd = L.layer_forward(c, 0)
    flops = sum(k.flops for k in _kernels(fwd))
    assert flops == pytest.approx(DS.layer_forward_flops(1, 0), rel=1e-12)
    assert DS.attention_score_flops(1) == 2 * 4096 * 4096 * 128 * (192 + 128)
    T = 4096
    assert {k: v for k, v in _gemms(fwd).items() if k in ("q_down", "kv_down", "q_up", "kv_up", "proj")} == {
        "q_down": (T, 1536, 7168),
        "kv_down": (T, 576, 7168),
        "q_up": (T, 128 * 192, 1536),
        "kv_up": (T, 128 * 256, 512),
        "proj": (T, 7168, 128 * 128),
    }
    core = next(k for k in _kernels(fwd) if k.name == "attn.core")
    assert core.k == 192 and core.batch == 128 and core.work == 0.5


def test_mla_under_tensor_parallelism_gathers_the_latents() -> None:
    """TP 4 with SP: down-projections on the rank's s / 4 tokens at full width (duplicated), the latents (1536 +
    512 + 64 wide) all-gathered, up- and output projections over 128 / 4 heads; the backward reduce-scatters the
    latents' gradient."""
    c = LayerContext(DS, 1, 4, True, 1, "none")
    fwd, bwd = L.attention_forward(c), L.attention_backward(c)
    T = 4096
    g = _gemms(fwd)
    assert g["q_down"] == (T // 4, 1536, 7168) and g["kv_down"] == (T // 4, 576, 7168)
    assert g["q_up"] == (T, 32 * 192, 1536) and g["kv_up"] == (T, 32 * 256, 512) and g["proj"] == (T, 7168, 32 * 128)
    latent = 2.0 * T * (1536 + 512 + 64)
    assert [(s.collective, s.bytes) for s in fwd if isinstance(s, Comm)] == [
        ("all_gather", latent),
        ("reduce_scatter", 2.0 * T * 7168),
    ]
    assert ("reduce_scatter", latent) in [(s.collective, s.bytes) for s in bwd if isinstance(s, Comm)]


def test_mla_up_proj_recomputation_reruns_the_up_projections_and_drops_q_k_v() -> None:
    c = LayerContext(DS, 1, 1, False, 1, "selective")
    plain = replace(c, recomputed=frozenset({"core_attn"}))
    up = replace(c, recomputed=frozenset({"mla_up_proj"}))
    names = [k.name for k in _kernels(L.attention_backward(up))]
    assert names.count("q_up") == 1 and names.count("kv_up") == 1 and names.count("rope") == 1
    assert "q_up" not in [k.name for k in _kernels(L.attention_backward(replace(c, recomputed=frozenset())))]
    assert plain.recomputes("core_attn")
    sbh = 4096.0
    args = (DS, 3, 1, 1, False, "selective", True)
    kept = layer_activation_bytes(*args, modules=frozenset({"core_attn"}))
    dropped = layer_activation_bytes(*args, modules=frozenset({"core_attn", "mla_up_proj"}))
    assert kept - dropped == pytest.approx(2.0 * 128 * (192 + 192 + 128) * sbh)


def test_mla_linears_run_in_fp8_and_the_kernel_keeps_equal_heads_unchanged() -> None:
    for name in ("q_down", "kv_down", "q_up.dgrad", "kv_up.wgrad", "mtp_proj"):
        assert is_fp8_linear(Kernel(name, "gemm", 1.0, 1.0, 1, 1, 1))
    # equal query and value heads: the closed form of every other model, 4 b s kv h hd
    k = flash_attention_kernels(2, 4096, 8, 2, 128, True, False)[0]
    assert k.flops == 4.0 * 2 * 4096 * 4096 * 8 * 128 and k.bytes == 2 * (
        2 * 2 * 4096 * 8 * 128 + 2 * 2 * 4096 * 2 * 128
    )
    m = flash_attention_kernels(1, 4096, 16, 16, 192, True, True, hd_v=128)
    assert m[1].flops == 2 * 2.0 * 4096 * 4096 * 16 * 320
    assert m[0].bytes == (2 * 2) * 4096 * 16 * 128 + 4.0 * 16 * 4096  # O and dO of 128, the row sums
    assert m[2].bytes == 10 * 4096 * 16 * 192  # dQ of 192


def test_mtp_module_runs_a_layer_and_a_loss_on_the_head() -> None:
    c = LayerContext(DS, 1, 1, False, 1, "none")
    head = L.head_forward(c)
    no_mtp = L.head_forward(replace(c, model=replace(DS, mtp_layers=0)))
    names = [s.name for s in head]
    assert names[-len(no_mtp) :] == [s.name for s in no_mtp]  # the main head last
    assert "moe.route" in names and "mtp.emb" in names and "mtp.head.logits" in names
    g = _gemms(head)
    assert g["mtp_proj"] == (4096, 7168, 2 * 7168)
    extra = sum(k.flops for k in _kernels(head)) - sum(k.flops for k in _kernels(no_mtp))
    logits = DS.logit_forward_flops(1)
    assert extra == pytest.approx(DS.mtp_forward_flops(1) + logits, rel=1e-12)
    bwd = [s.name for s in L.head_backward(c)]
    assert bwd[0] == "ce.bwd" and "moe.experts.bwd" in bwd and bwd[-1] == "mtp.emb.bwd"
    assert DS.iteration_flops(1) - replace(DS, mtp_layers=0).iteration_flops(1) == pytest.approx(
        3 * (DS.mtp_forward_flops(1) + logits)
    )
    p = mtp_params_per_rank(DS, 1, 2, 8)
    layer = layer_params_per_rank(DS, 60, 1, 8)
    assert p.expert == layer.expert
    assert p.dense == 3 * 7168 + 2 * 7168 * 7168 + layer.dense + DS.padded_vocab(1) * 7168  # the table copy (pp > 1)


def test_rank_params_sum_to_the_layer() -> None:
    for layer in (0, 3):
        rp = layer_params_per_rank(DS, layer, 1, 1)
        assert rp.total == DS.layer_params(layer)
    # TP 2: the sharded projections halve, the duplicated down-projections and norms do not
    one, two = layer_params_per_rank(DS, 0, 1, 1), layer_params_per_rank(DS, 0, 2, 1)
    dup = 7168 * 1536 + 1536 + 7168 * 576 + 512 + 2 * 7168
    assert 2 * two.dense - one.dense == pytest.approx(dup)


def _scenario(**par):
    p = {"tp": 1, "pp": 2, "ep": 8, "global_batch": 32, "micro_batch": 1, "zero_stage": 1}
    p.update(par)
    return scenario_from_dict(
        {
            "model": {"name": "deepseek-v3", "layers": 5, "seq_len": 1024},
            "parallelism": p,
            "cluster": {"topology": TOPOLOGY},
            "compute": {"check_memory": False},
            "run": {"backend": "analytic"},
        }
    )


def test_a_small_deepseek_plan_compiles_and_counts_mtp_on_the_last_stage() -> None:
    wp = plan_scenario(_scenario(stage_layers=[4, 1]))
    last = [m for m in wp.memory if m.stage == 1]
    first = [m for m in wp.memory if m.stage == 0]
    assert last and first and wp.workload.meta["stage_layers"] == [4, 1]
    # stage 1 holds one layer, the MTP module (a layer's worth) and the embedding copy besides the head
    assert last[0].params > layer_params_per_rank(_scenario().model, 4, 1, 8).total


def _step_s(sc) -> float:
    """The simulated step (s) of ``sc`` on the analytic backend."""
    cluster = load_run_cluster(sc, "analytic")
    graph = build_graph(cluster)
    _, low = lower_scenario(sc, graph, cluster)
    return float(np.max(replay_times(graph, low.plan).times.finish_s))


def test_a_last_virtual_stage_with_the_mtp_module_and_the_loss_alone() -> None:
    """Megatron-Bridge's DeepSeek-V3 layouts end on a virtual stage holding the MTP module and the loss alone
    ("Et|(tt|)*30mL" on 1024 H100): a 0 there (and only at the ends) plans and simulates. Against the same five layers
    as [1, 2, 1, 1]: the same model FLOPs; the last layer's parameters move from pipeline stage 1 to stage 0 (v2), so
    stage 0 holds exactly one layer-4 share more and stage 1 one less; the step differs (the work moved)."""
    inter = {"pp": 2, "vpp": 2, "schedule": "interleaved"}
    ends, even = _scenario(stage_layers=[1, 2, 2, 0], **inter), _scenario(stage_layers=[1, 2, 1, 1], **inter)
    wp_ends, wp_even = plan_scenario(ends), plan_scenario(even)
    assert wp_ends.workload.meta["stage_layers"] == [1, 2, 2, 0]
    assert wp_ends.model_flops == pytest.approx(wp_even.model_flops, rel=1e-12)
    l4 = layer_params_per_rank(ends.model, 4, 1, 8).total
    params = {(wp.workload.meta["stage_layers"][3], m.stage): m.params for wp in (wp_ends, wp_even) for m in wp.memory}
    assert params[(0, 0)] - params[(1, 0)] == pytest.approx(l4)
    assert params[(1, 1)] - params[(0, 1)] == pytest.approx(l4)
    t_ends, t_even = _step_s(ends), _step_s(even)
    assert t_ends > 0 and t_even > 0 and t_ends != t_even
    with pytest.raises(ScenarioError, match=r"stage_layers \(\[1, 0, 3, 1\]\) puts 0 layers on \(virtual\) stage 1"):
        plan_scenario(_scenario(stage_layers=[1, 0, 3, 1], **inter))


def test_a_first_virtual_stage_with_the_embedding_alone() -> None:
    """The other end: ``[0, 3, 1, 1]`` (the embedding alone on the first virtual stage, as an ``E|...`` layout) plans
    with the same model FLOPs as ``[1, 2, 1, 1]``, layer 0's parameters on pipeline stage 1 instead of 0, and
    simulates."""
    inter = {"pp": 2, "vpp": 2, "schedule": "interleaved"}
    emb, even = _scenario(stage_layers=[0, 3, 1, 1], **inter), _scenario(stage_layers=[1, 2, 1, 1], **inter)
    wp_emb, wp_even = plan_scenario(emb), plan_scenario(even)
    assert wp_emb.model_flops == pytest.approx(wp_even.model_flops, rel=1e-12)
    l0 = layer_params_per_rank(emb.model, 0, 1, 8).total
    params = {(wp.workload.meta["stage_layers"][0], m.stage): m.params for wp in (wp_emb, wp_even) for m in wp.memory}
    assert params[(1, 0)] - params[(0, 0)] == pytest.approx(l0)
    assert params[(0, 1)] - params[(1, 1)] == pytest.approx(l0)
    assert _step_s(emb) > 0


@pytest.mark.parametrize(
    ("model", "par", "field"),
    [
        ({"q_lora_rank": 64, "kv_lora_rank": 0}, {}, "model.kv_lora_rank"),
        ({"dense_layers": 5}, {}, "model.dense_layers"),
        ({"kv_heads": 8}, {}, "model.kv_heads"),
        ({}, {"cp": 2}, "parallelism.cp"),
        ({}, {"recompute": "op"}, "parallelism.recompute"),
    ],
)
def test_bad_mla_input_is_refused_naming_the_field(model: dict, par: dict, field: str) -> None:
    with pytest.raises(ScenarioError, match=field.replace(".", r"\.")):
        sc = _scenario(**par)
        sc = replace(sc, model=replace(sc.model, **model)) if model else sc
        sc.model.validate("model")
        plan_scenario(sc)


def test_mla_up_proj_without_mla_is_refused() -> None:
    sc = scenario_from_dict(
        {
            "model": {"name": "llama3-8b", "seq_len": 1024},
            "parallelism": {"tp": 1, "pp": 1, "global_batch": 16, "micro_batch": 1, "recompute": "selective",
                            "recompute_modules": ["mla_up_proj"]},
            "cluster": {"topology": TOPOLOGY},
        }
    )  # fmt: skip
    with pytest.raises(ScenarioError, match=r"parallelism\.recompute_modules.*mla_up_proj"):
        plan_scenario(sc)


def test_models_without_mla_keep_their_shapes() -> None:
    m = get_model("qwen3-235b-a22b")
    assert not m.mla and m.expert_ffn == m.ffn_hidden and m.out_dim == m.q_dim and m.qk_head_dim == m.head_dim
    assert isinstance(m, ModelSpec) and m.mtp_params() == 0
