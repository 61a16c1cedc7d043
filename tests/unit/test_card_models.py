"""The catalog models added for Megatron-Bridge's model verification cards (session 42): each against its published
size, and Nemotron 3 Nano 4B against the card's own FLOP counter (the published TFLOP/s column), which pins its
architecture (layers by kind, widths, vocabulary) to 3e-5; and LoRA on its hybrid layers, by hand."""

from __future__ import annotations

from pathlib import Path

import pytest

from hetero_ns3.scenario.loader import load_scenario
from hetero_ns3.workload import layers as L
from hetero_ns3.workload.compiler import layer_context
from hetero_ns3.workload.models import model_catalog
from hetero_ns3.workload.parallel import ParallelismSpec
from hetero_ns3.workload.peft import WEIGHT_GEMMS, adapter_params
from hetero_ns3.workload.planner import plan_scenario
from tests.bridge_flops import hybrid_flops_per_token

CATALOG = model_catalog()
NANO4B = CATALOG["nemotron-3-nano-4b"]


def _block_counts() -> tuple[int, int, int]:
    """Nano 4B's Mamba-2, MLP and attention layers."""
    blocks = [NANO4B.layer_block(i) for i in range(NANO4B.layers)]
    return blocks.count("mamba"), blocks.count("mlp"), blocks.count("attention")


def test_nemotron_3_nano_4b_has_its_size_and_layer_kinds() -> None:
    """The model's name says 4 B (3.97 B counted); the recipe's pattern holds 21 Mamba-2, 17 MLP and 4 attention
    layers; the Mamba-2 mixer: in_proj 3136 x (2 x 7680 + 2 x 8 x 128 + 96), out_proj 7680 x 3136."""
    assert _block_counts() == (21, 17, 4)
    assert NANO4B.mamba_in_dim == 2 * 96 * 80 + 2 * 8 * 128 + 96
    assert NANO4B.total_params() == pytest.approx(4.0e9, rel=0.01)


@pytest.mark.parametrize(
    ("seq", "tflops_per_gpu", "tokens_per_gpu"),
    [(4096, 402.51, 19581.171), (4096, 400.11, 19459.104)],  # the card's pretrain and checkpoint-resume items
)
def test_nemotron_3_nano_4b_reproduces_the_cards_flop_counter(
    seq: int, tflops_per_gpu: float, tokens_per_gpu: float
) -> None:
    """Megatron-Bridge's ``hybrid_flops`` (written out in ``tests/bridge_flops.py``) with this catalog entry's shapes
    gives the card's TFLOP/s over tokens/s to within 0.05%: the layer kinds, widths and the vocabulary of 131072 are
    the ones the run used."""
    assert _block_counts() == (21, 17, 4)
    assert hybrid_flops_per_token(NANO4B, seq) == pytest.approx(tflops_per_gpu * 1e12 / tokens_per_gpu, rel=5e-4)


def test_moonlight_has_its_published_total_and_activated_parameters() -> None:
    """Moonlight-16B-A3B's model card: 15.29 B total and 2.24 B activated parameters, both without the embedding and
    output tables (163840 x 2048 each); one dense layer, 26 MoE layers of 64 experts with 6 active and 2 shared."""
    m = CATALOG["moonlight-16b-a3b"]
    tables = 2 * m.vocab * m.hidden
    idle = (m.experts - m.top_k) * m.mlp_params(m.expert_ffn) * (m.layers - m.dense_layers)
    assert m.total_params() - tables == pytest.approx(15.29e9, rel=1e-3)
    assert m.total_params() - tables - idle == pytest.approx(2.24e9, rel=2e-3)
    assert [m.is_moe_layer(i) for i in range(m.layers)] == [False] + [True] * 26


def _lora_ctx(peft: str, modules: tuple[str, ...]) -> L.LayerContext:
    plan = ParallelismSpec(tp=1, global_batch=8, peft=peft, lora_rank=8, lora_modules=modules)  # type: ignore[arg-type]
    return layer_context(NANO4B, plan, True, "fused")


def _kernels(steps: list[L.Step]) -> list:
    return [k for st in steps if isinstance(st, L.Compute) for k in st.kernels]


@pytest.mark.parametrize("modules", [("qkv", "proj"), ("qkv", "proj", "fc1", "fc2")])
def test_lora_on_a_hybrid_model_adapts_each_blocks_own_layers_and_freezes_the_rest(modules) -> None:
    """LoRA on Nemotron 3 Nano 4B (the card's PEFT item: rank 8 on linear_qkv / linear_proj): each hybrid block
    keeps its forward kernels, loses its base weight gradients (a Mamba-2 block its in_proj / out_proj ones; the
    scan's and convolution's fused backward kernels stay) and gains adapters only on its own targeted GEMMs; the
    adapter parameters per block by hand (r x (inputs + outputs) of each adapted GEMM)."""
    full, lora = _lora_ctx("none", ()), _lora_ctx("lora", modules)
    r, h = 8, NANO4B.hidden
    by_kind = {NANO4B.layer_block(i): i for i in range(NANO4B.layers)}
    want = {
        "attention": r * (h + (NANO4B.q_dim + 2 * NANO4B.kv_dim)) + r * (NANO4B.q_dim + h),
        "mlp": r * (h + NANO4B.ffn_hidden) + r * (NANO4B.ffn_hidden + h) if "fc1" in modules else 0,
        "mamba": 0,
    }
    for block, layer in by_kind.items():
        f0, b0 = _kernels(L.layer_forward(full, layer)), _kernels(L.layer_backward(full, layer))
        f, b = _kernels(L.layer_forward(lora, layer)), _kernels(L.layer_backward(lora, layer))
        assert [k for k in f if not k.name.startswith("lora.")] == f0
        kept = [k for k in b0 if not (k.name.endswith(".wgrad") and k.name.split(".")[0] in WEIGHT_GEMMS)]
        assert [k for k in b if not k.name.startswith("lora.")] == kept
        adapted = {k.name.split(".")[1] for k in f if k.name.startswith("lora.")}
        assert adapted == {"attention": {"qkv", "proj"}, "mlp": {"fc1", "fc2"} & set(modules), "mamba": set()}[block]
        assert adapter_params(NANO4B, layer, 1, r, frozenset(modules)) == want[block]
    mamba = by_kind["mamba"]
    names = {k.name for k in _kernels(L.layer_backward(lora, mamba))}
    assert "in_proj.dgrad" in names and "out_proj.dgrad" in names
    assert not {"in_proj.wgrad", "out_proj.wgrad"} & names
    assert any(k.op == "ssd" for k in _kernels(L.layer_backward(lora, mamba)))


def test_the_lora_card_row_plans_with_the_adapters_alone() -> None:
    """The card's PEFT scenario plans: every base weight held, the four attention layers' adapters the only
    gradients (FP32, as the recipe reduces them); its compute is less than the same run's full-parameter SFT (no base weight
    gradients)."""
    heldout = Path(__file__).resolve().parents[2] / "hetero_ns3" / "data" / "validation" / "heldout"
    lora = plan_scenario(load_scenario(heldout / "nemotron-3-nano-4b-lora-h100x8-bf16.toml"))
    sft = plan_scenario(load_scenario(heldout / "nemotron-3-nano-4b-sft-h100x8-bf16.toml"))
    attn = [i for i in range(NANO4B.layers) if NANO4B.layer_block(i) == "attention"]
    per_layer = 8 * (NANO4B.hidden + NANO4B.q_dim + 2 * NANO4B.kv_dim) + 8 * (NANO4B.q_dim + NANO4B.hidden)
    assert len(attn) == 4
    m_lora, m_sft = lora.memory[0], sft.memory[0]  # one pipeline stage: every entry alike
    assert m_lora.params == pytest.approx(m_sft.params + 4 * per_layer)
    assert m_lora.gradients == pytest.approx(4.0 * 4 * per_layer)  # FP32 gradient reduction: 4 B each
    assert lora.compute_time < sft.compute_time
