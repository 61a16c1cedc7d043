"""Megatron-Core's unfused element-wise kernels around the routed experts and in the rotary embedding: the
all-to-all dispatcher's sort by local expert, the clamped GLU's clamps, the experts' FC2 bias, and the RoPE that
YaRN's attention factor keeps off Transformer Engine's fused kernel (docs/workload.md "Unfused MoE and RoPE
kernels"). Bytes against the hand counts of the source's PyTorch ops; steps and refusals."""

from __future__ import annotations

from dataclasses import replace

import pytest

from hetero_ns3.compute.config import ComputeConfig
from hetero_ns3.errors import ScenarioError
from hetero_ns3.scenario.cluster import ClusterSection, NodeGroupSpec, inline_gpus
from hetero_ns3.workload import layers as L
from hetero_ns3.workload.compiler import layer_context
from hetero_ns3.workload.memory import layer_activation_bytes
from hetero_ns3.workload.models import get_model, load_model_section
from hetero_ns3.workload.parallel import ParallelismSpec
from hetero_ns3.workload.planner import build_plan
from hetero_ns3.workload.timing import replay

OSS = replace(get_model("gpt-oss-120b"), layers=2, seq_len=1024)
PLAIN = replace(OSS, glu_clamp=0.0, bias=False, rope_attention_factor=1.0)
EP = ParallelismSpec(tp=1, pp=1, dp=8, ep=8, global_batch=16, micro_batch=2)
COPIES = EP.micro_batch * OSS.seq_len * OSS.top_k  # routed copies on one rank (balanced, tp 1)
H, F = OSS.hidden, OSS.ffn_hidden


def _kernels(model, p: ParallelismSpec, backward: bool) -> dict[str, float]:
    c = layer_context(model, p, True, "te")
    steps = L.layer_backward(c, 0) if backward else L.layer_forward(c, 0)
    out: dict[str, float] = {}
    for st in steps:
        for k in getattr(st, "kernels", ()):
            out[k.name] = out.get(k.name, 0.0) + k.bytes
    return out


def test_alltoall_sorts_by_local_expert_and_flex_does_not() -> None:
    """All-to-all with 16 local experts: one read and write of every BF16 copy before the experts and after them,
    and the same in the backward; none under flex, none with one expert per rank."""
    fwd, bwd = _kernels(PLAIN, EP, False), _kernels(PLAIN, EP, True)
    assert fwd["sort"] == fwd["unsort"] == bwd["sort.bwd"] == bwd["unsort.bwd"] == pytest.approx(4.0 * COPIES * H)
    flex = _kernels(PLAIN, replace(EP, moe_dispatcher="flex"), False)
    one = replace(PLAIN, experts=8, top_k=2)
    assert "sort" not in flex and "sort" not in _kernels(one, EP, False)


def test_clamped_glu_and_expert_bias_bytes() -> None:
    """GPT-OSS's clamp: 8 f elements forward, 10 f backward per copy (BF16); the FC2 bias t + b p with BF16
    probabilities 12 / 12 bytes per element of h, with the flex dispatcher's FP32 probabilities 28 / 36."""
    fwd, bwd = _kernels(OSS, EP, False), _kernels(OSS, EP, True)
    assert fwd["act.clamp"] == pytest.approx(16.0 * COPIES * F)
    assert bwd["act.clamp.bwd"] == pytest.approx(20.0 * COPIES * F)
    assert fwd["fc2.bias"] == bwd["fc2.bias.bwd"] == pytest.approx(12.0 * COPIES * H)
    flex_f, flex_b = (
        _kernels(OSS, replace(EP, moe_dispatcher="flex"), False),
        _kernels(OSS, replace(EP, moe_dispatcher="flex"), True),
    )
    assert flex_f["fc2.bias"] == pytest.approx(28.0 * COPIES * H)
    assert flex_b["fc2.bias.bwd"] == pytest.approx(36.0 * COPIES * H)
    plain_f, plain_b = _kernels(PLAIN, EP, False), _kernels(PLAIN, EP, True)
    assert not {"act.clamp", "fc2.bias"} & set(plain_f) and not {"act.clamp.bwd", "fc2.bias.bwd"} & set(plain_b)


def test_recomputed_activation_reruns_the_clamps_and_keeps_less() -> None:
    """``moe_act`` recomputation re-runs the clamps with the activation in the backward; without it the layer keeps
    the clamped halves' concatenation (2 f BF16 per copy) beside the FC1 output."""
    sel = replace(EP, recompute="selective", recompute_modules=("moe_act",))
    assert _kernels(OSS, sel, True)["act.clamp"] == pytest.approx(16.0 * COPIES * F)
    assert "act.clamp" not in _kernels(OSS, EP, True)
    s = EP.micro_batch * OSS.seq_len
    kept = layer_activation_bytes(OSS, 0, EP.micro_batch, 1, False, "none", True)
    plain = layer_activation_bytes(replace(OSS, glu_clamp=0.0), 0, EP.micro_batch, 1, False, "none", True)
    assert kept - plain == pytest.approx(4.0 * F * s * OSS.top_k)
    modules = frozenset({"moe_act"})
    assert layer_activation_bytes(OSS, 0, 2, 1, False, "selective", True, modules=modules) == pytest.approx(
        layer_activation_bytes(replace(OSS, glu_clamp=0.0), 0, 2, 1, False, "selective", True, modules=modules)
    )


def test_yarn_attention_factor_runs_the_unfused_rope() -> None:
    """Attention factor 1.3466 (YaRN 32): 24 bytes per query / key element forward and 20 backward, against the
    fused kernel's 4 and 4."""
    n = EP.micro_batch * OSS.seq_len * (OSS.q_dim + OSS.kv_dim)
    assert _kernels(OSS, EP, False)["rope"] == pytest.approx(24.0 * n)
    assert _kernels(OSS, EP, True)["rope.bwd"] == pytest.approx(20.0 * n)
    assert _kernels(PLAIN, EP, False)["rope"] == pytest.approx(4.0 * n)
    assert _kernels(PLAIN, EP, True)["rope.bwd"] == pytest.approx(4.0 * n)


def test_each_unfused_kernel_lengthens_the_step() -> None:
    """On one DGX H100 node at EP 8, against the flex dispatcher (no sort) without clamp, bias or attention factor:
    each source of unfused work alone adds time, and all of them together (all-to-all) more than any one."""
    gpus = inline_gpus(ClusterSection(groups=(NodeGroupSpec("H100-SXM", 1, 8),)))

    def step(model, p: ParallelismSpec = EP) -> float:
        r = build_plan(model, p, gpus, ComputeConfig(check_memory=False))
        return replay(r.workload).iteration_time

    base = step(PLAIN, replace(EP, moe_dispatcher="flex"))
    sort = step(PLAIN)
    clamp = step(replace(PLAIN, glu_clamp=7.0), replace(EP, moe_dispatcher="flex"))
    bias = step(replace(PLAIN, bias=True), replace(EP, moe_dispatcher="flex"))
    rope = step(replace(PLAIN, rope_attention_factor=1.3466), replace(EP, moe_dispatcher="flex"))
    every = step(OSS)
    assert min(sort, clamp, bias, rope) > base
    assert every > max(sort, clamp, bias, rope)


@pytest.mark.parametrize(
    ("fields", "named"),
    [
        ({"glu_clamp": -1.0}, "model.glu_clamp"),
        ({"glu_clamp": 7.0, "experts": 1, "top_k": 1}, "model.glu_clamp"),
        ({"rope_attention_factor": 0.0}, "model.rope_attention_factor"),
    ],
)
def test_bad_values_are_refused_naming_the_field(fields: dict, named: str) -> None:
    with pytest.raises(ScenarioError, match=named.replace(".", r"\.")):
        load_model_section({"name": "gpt-oss-120b", **fields}).validate("model")


def test_gpt_oss_catalog_values_follow_their_sources() -> None:
    """GPT-OSS 120B: clamp 7 (HF ``swiglu_limit``), and YaRN factor 32 without mscale overrides gives Megatron-Core's
    attention factor 0.1 ln 32 + 1 (``_yarn_get_mscale``), to the four decimals the catalog carries."""
    import math

    md = get_model("gpt-oss-120b")
    assert md.glu_clamp == 7.0 and md.bias and md.gated_mlp and md.is_moe
    assert md.rope_attention_factor == pytest.approx(0.1 * math.log(32) + 1, abs=5e-5)
