"""Sliding-window attention (``model.window``, ``model.full_attention_every``) against closed forms, brute-force
counts of the mask and the published size of GPT-OSS 120B (docs/workload.md "Sliding-window attention")."""

from __future__ import annotations

import math
from dataclasses import replace

import pytest

from hetero_ns3.compute.attention_grid import window_fraction, window_tiles
from hetero_ns3.compute.config import ComputeConfig
from hetero_ns3.compute.gpus import get_gpu
from hetero_ns3.compute.roofline import Roofline
from hetero_ns3.errors import PlanningError, ScenarioError
from hetero_ns3.scenario.cluster import ClusterSection, NodeGroupSpec, inline_gpus
from hetero_ns3.workload.attention import flash_attention_kernels
from hetero_ns3.workload.compiler import StepPrograms
from hetero_ns3.workload.models import load_model_section, model_catalog
from hetero_ns3.workload.parallel import ParallelismSpec
from hetero_ns3.workload.planner import build_plan, resolve
from hetero_ns3.workload.steps import Compute

OSS, LLAMA = model_catalog()["gpt-oss-120b"], model_catalog()["llama3-8b"]
H100 = get_gpu("H100-SXM")


def test_gpt_oss_120b_has_its_published_total_and_active_parameters() -> None:
    """Model card (arXiv 2508.10925, Table 1): 116.83 B parameters, 5.13 B active per token (the layers' active
    weights plus the unembedding)."""
    assert OSS.total_params() == pytest.approx(116.83e9, rel=2e-4)
    per_layer = OSS.attention_params() + OSS.top_k * OSS.mlp_params() + OSS.hidden * OSS.experts
    active = OSS.layers * (per_layer + 2 * OSS.norm_params()) + OSS.padded_vocab(1) * OSS.hidden
    assert active == pytest.approx(5.13e9, rel=1e-3)


def test_windowed_layers_follow_the_full_attention_period() -> None:
    """GPT-OSS: window 128 from the first layer, every second layer full (Hugging Face ``layer_types``; Megatron's
    ``window_attn_skip_freq = 2``); a period of 0 windows every layer; a window of the whole sequence is none."""
    assert [OSS.layer_window(i) for i in range(4)] == [128, 0, 128, 0]
    assert sum(bool(OSS.layer_window(i)) for i in range(OSS.layers)) == 18
    every = replace(LLAMA, window=4096, seq_len=8192)
    assert {every.layer_window(i) for i in range(every.layers)} == {4096}
    gemma_like = replace(LLAMA, window=1024, full_attention_every=6)
    assert [gemma_like.layer_window(i) for i in range(6)] == [1024] * 5 + [0]
    assert {replace(LLAMA, window=LLAMA.seq_len).layer_window(i) for i in range(3)} == {0}
    assert OSS.layer_kind(0) != OSS.layer_kind(1) and OSS.layer_kind(0) == OSS.layer_kind(2)


@pytest.mark.parametrize(("s", "w"), [(16, 1), (16, 5), (17, 16), (64, 8), (100, 37)])
def test_window_fraction_counts_the_pairs_inside_the_mask(s: int, w: int) -> None:
    pairs = sum(1 for q in range(s) for k in range(s) if q - w < k <= q)
    assert window_fraction(s, w) * s * w == pytest.approx(pairs, abs=1e-9)


@pytest.mark.parametrize(("s", "w", "tile"), [(64, 8, 16), (64, 16, 16), (64, 17, 16), (70, 20, 16), (96, 95, 32)])
def test_window_tiles_are_the_tiles_the_band_touches(s: int, w: int, tile: int) -> None:
    """Brute force: a tile runs when any (query, key) pair in it is inside the window."""
    n = math.ceil(s / tile)
    touched = 0
    for qb in range(n):
        for kb in range(n):
            rows = range(qb * tile, min(s, (qb + 1) * tile))
            keys = range(kb * tile, min(s, (kb + 1) * tile))
            touched += any(q - w < k <= q for q in rows for k in keys)
    assert window_tiles(s, w, tile) == touched
    assert window_tiles(s, s, tile) == n * (n + 1) // 2  # the causal square's tiles


def test_model_flops_count_the_band_instead_of_the_square() -> None:
    """Narayanan et al.'s scores term ``4 b s^2 q`` becomes ``4 b s w q`` in a windowed layer."""
    b, s, q = 2, OSS.seq_len, OSS.q_dim
    assert OSS.layer_forward_flops(b, 1) - OSS.layer_forward_flops(b, 0) == pytest.approx(4 * b * s * (s - 128) * q)
    full = replace(OSS, window=0)
    saved = 18 * 4 * 3 * s * (s - 128) * q  # 18 windowed layers, forward + backward (x 3), one sequence
    assert full.iteration_flops(1) - OSS.iteration_flops(1) == pytest.approx(saved)
    assert full.iteration_flops(1, "selective") - OSS.iteration_flops(1, "selective") == pytest.approx(saved * 4 / 3)


def test_windowed_kernels_cost_less_and_meet_the_causal_kernel_at_the_full_window() -> None:
    rf, s = Roofline("bf16"), 4096

    def t(window: int, backward: bool) -> float:
        return rf.time(flash_attention_kernels(1, s, 64, 8, 64, True, backward, window=window), H100)[2]

    for backward in (False, True):
        times = [t(w, backward) for w in (128, 512, 1024, 2048, s - 1)]
        assert times == sorted(times) and len(set(times)) == len(times)
        assert times[-1] == pytest.approx(t(0, backward), rel=1e-12)
    # the tiles of the band run whole: at 128 keys the kernel costs more than its share of the causal pairs
    exact = window_fraction(s, 128) * 128 / (s / 2)
    assert t(128, False) > 2 * exact * t(0, False)


def test_each_layer_gets_its_own_attention_kernel() -> None:
    gpus = inline_gpus(ClusterSection(groups=(NodeGroupSpec("H100-SXM", 1, 8),)))
    small = replace(OSS, layers=4, experts=8, top_k=2)
    plan = ParallelismSpec(tp=1, pp=1, dp=8, ep=8, global_batch=8, micro_batch=1)
    res = build_plan(small, plan, gpus, ComputeConfig())
    progs = StepPrograms(resolve(small, plan, gpus, ComputeConfig()).spec)
    windows = []
    for layer in range(4):
        cores = [k for st in progs.program("layer_f", layer) if isinstance(st, Compute) for k in st.kernels]
        windows.append({k.window for k in cores if k.op == "attention_fwd"})
    assert windows == [{128}, {0}, {128}, {0}]
    full = build_plan(replace(small, window=0), plan, gpus, ComputeConfig())
    assert res.compute_time < full.compute_time


def test_bad_windows_are_refused_with_the_field_named() -> None:
    with pytest.raises(ScenarioError, match=r"model\.window.*>= 0"):
        load_model_section({"name": "gpt-oss-120b", "window": -1})
    with pytest.raises(ScenarioError, match=r"model\.full_attention_every"):
        load_model_section({"name": "gpt-oss-120b", "full_attention_every": -2})
    with pytest.raises(ScenarioError, match=r"model\.window.*causal"):
        load_model_section({"name": "gpt-oss-120b", "causal": False})
    gpus = inline_gpus(ClusterSection(groups=(NodeGroupSpec("H100-SXM", 1, 8),)))
    plan = ParallelismSpec(tp=1, pp=1, dp=8, cp=2, global_batch=4, micro_batch=1)
    with pytest.raises((ScenarioError, PlanningError), match=r"parallelism\.cp.*sliding-window"):
        build_plan(replace(LLAMA, window=1024), plan, gpus, ComputeConfig())
