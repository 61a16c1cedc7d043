"""Selective recomputation by module (``parallelism.recompute_modules``, Megatron-Core's ``--recompute-modules``):
the kernels and collectives the backward re-runs and the activation bytes it no longer keeps, against closed
forms (docs/workload.md "Selective recomputation by module")."""

from __future__ import annotations

from dataclasses import replace

import pytest

from hetero_ns3.compute.config import ComputeConfig
from hetero_ns3.errors import ScenarioError
from hetero_ns3.scenario.cluster import ClusterSection, NodeGroupSpec, inline_gpus
from hetero_ns3.workload import layers as L
from hetero_ns3.workload.compiler import StepPrograms
from hetero_ns3.workload.memory import layer_activation_bytes
from hetero_ns3.workload.models import model_catalog
from hetero_ns3.workload.parallel import ParallelismSpec
from hetero_ns3.workload.planner import build_plan, resolve
from hetero_ns3.workload.steps import Comm, Compute

DENSE = replace(model_catalog()["llama3-8b"], layers=2, seq_len=1024)
MOE = replace(model_catalog()["mixtral-8x7b"], layers=2, seq_len=1024)
GPUS = inline_gpus(ClusterSection(groups=(NodeGroupSpec("H100-SXM", 1, 8),)))
BASE = ParallelismSpec(tp=2, pp=1, dp=4, ep=4, sequence_parallel=True, global_batch=8, micro_batch=1)


def _backward(model, modules: tuple[str, ...], recompute: str = "selective") -> list[L.Step]:
    plan = replace(BASE, ep=4 if model.is_moe else 1, recompute=recompute, recompute_modules=modules)
    return StepPrograms(resolve(model, plan, GPUS, ComputeConfig()).spec).program("layer_b", 0)


def _kernels(steps: list[L.Step]) -> list[str]:
    return [k.name for s in steps if isinstance(s, Compute) for k in s.kernels]


def _comms(steps: list[L.Step]) -> list[str]:
    return [s.name for s in steps if isinstance(s, Comm)]


def _extra(model, modules: tuple[str, ...]) -> list[str]:
    """Kernel names the backward gains over the default selective recomputation (the attention core)."""
    base = _kernels(_backward(model, ()))
    more = _kernels(_backward(model, ("core_attn", *modules)))
    for name in base:
        more.remove(name)
    return sorted(more)


def test_selective_defaults_to_the_attention_core() -> None:
    for model in (DENSE, MOE):
        assert _backward(model, ()) == _backward(model, ("core_attn",))
        assert "attn.core" in _kernels(_backward(model, ()))  # the forward core re-run before its backward
        assert "attn.core" not in _kernels(_backward(model, ("layernorm",)))
        assert "attn.core" not in _kernels(_backward(model, (), "none"))


def test_each_module_reruns_its_forward_kernels() -> None:
    assert _extra(DENSE, ("layernorm",)) == ["ln1", "ln2"]
    assert _extra(MOE, ("layernorm",)) == ["ln1", "ln2"]
    assert _extra(MOE, ("moe_act",)) == ["act"]
    assert _extra(DENSE, ("moe_act",)) == []  # no experts
    assert _extra(DENSE, ("mlp",)) == ["act", "fc1", "fc2"]
    assert _extra(MOE, ("mlp",)) == []  # MoE layers take "moe"
    # Mixtral at EP 4 holds two experts per rank: the all-to-all dispatcher's sort by expert re-runs too
    assert _extra(MOE, ("moe",)) == ["act", "fc1", "fc2", "permute", "router", "sort", "unpermute", "unsort"]


def test_recomputed_modules_redo_their_communication() -> None:
    """Under TP 2 with sequence parallelism the dense MLP's gather and reduce-scatter re-run; a recomputed MoE layer
    re-runs its dispatch and combine all-to-alls (and the TP gather / scatter around them)."""
    assert _comms(_backward(DENSE, ("mlp",))) == [
        "recompute.mlp.ag",
        "recompute.mlp.rs",
        *_comms(_backward(DENSE, ())),
    ]
    moe = [c for c in _comms(_backward(MOE, ("moe",))) if c.startswith("recompute.")]
    assert moe == [
        "recompute.moe.dispatch.a2a",
        "recompute.moe.dispatch.ag",
        "recompute.moe.combine.rs",
        "recompute.moe.combine.a2a",
    ]


def _act(model, modules: tuple[str, ...] | None, fp8: bool = False) -> float:
    rec = "none" if modules is None else "selective"
    mods = None if modules is None else frozenset(modules or ("core_attn",))
    return layer_activation_bytes(model, 0, 1, 1, False, rec, True, 1, 1.0 if fp8 else 2.0, mods)


@pytest.mark.parametrize("fp8", [False, True])
def test_activation_bytes_lose_what_is_recomputed(fp8: bool) -> None:
    lin_in = 1.0 if fp8 else 2.0
    for model in (DENSE, MOE):
        sbh = float(model.seq_len * model.hidden)
        assert _act(model, ()) == _act(model, None)  # fused attention keeps no scores either way
        assert _act(model, None, fp8) - _act(model, ("layernorm",), fp8) == pytest.approx(2 * lin_in * sbh)
    k, f, sb = MOE.top_k, MOE.ffn_hidden, float(MOE.seq_len)
    assert _act(MOE, None, fp8) - _act(MOE, ("moe_act",), fp8) == pytest.approx(lin_in * f * sb * k)
    # FC1 output (gated: 2 f), FC2 input and the experts' FC1 input (the dispatched token), per routed copy
    inside = (2.0 * 2 * f + lin_in * f + lin_in * MOE.hidden) * sb * k
    dense = replace(MOE, experts=1, top_k=1)
    assert _act(MOE, None, fp8) - _act(dense, None, fp8) == pytest.approx(inside - (2.0 * 2 * f + lin_in * f) * sb)
    assert _act(MOE, None, fp8) - _act(MOE, ("moe",), fp8) == pytest.approx(inside + (lin_in - 2.0) * sb * MOE.hidden)
    f = DENSE.ffn_hidden
    dense_inside = (2.0 * 2 * f + lin_in * f) * float(DENSE.seq_len)
    dense_sbh = float(DENSE.seq_len * DENSE.hidden)
    assert _act(DENSE, None, fp8) - _act(DENSE, ("mlp",), fp8) == pytest.approx(
        dense_inside + (lin_in - 2.0) * dense_sbh
    )


def test_dispatched_tokens_are_whole_on_every_tensor_parallel_rank() -> None:
    """Under TP the experts split their inner size, not the tokens gathered for them: the kept FC1 input is
    k x h per token on every rank, while the FC1 output and FC2 input shrink with TP."""
    k, f, h, sb = MOE.top_k, MOE.ffn_hidden, MOE.hidden, float(MOE.seq_len)
    dense = replace(MOE, experts=1, top_k=1)

    def moe_minus_dense(tp: int) -> float:
        def act(m):
            return layer_activation_bytes(m, 0, 1, tp, False, "none", True)

        return act(MOE) - act(dense)

    inside = (2.0 * 2 * f + 2.0 * f) * sb  # FC1 output (gated) and FC2 input of one routed copy
    for tp in (1, 2, 4):
        assert moe_minus_dense(tp) == pytest.approx((k - 1) * inside / tp + 2.0 * h * sb * k)


def test_more_recomputation_costs_more_time_and_less_memory() -> None:
    def plan(modules: tuple[str, ...]):
        p = replace(BASE, recompute="selective", recompute_modules=modules)
        return build_plan(MOE, p, GPUS, ComputeConfig())

    steps = [("layernorm",), ("layernorm", "moe_act"), ("core_attn", "layernorm", "moe_act"), ("core_attn", "moe")]
    built = [plan(m) for m in steps]
    times = [b.compute_time for b in built]
    acts = [b.memory[0].activations for b in built]
    assert times == sorted(times) and len(set(times)) == len(times)
    assert acts[0] > acts[1] == acts[2] > acts[3]  # the attention core's recomputation frees nothing under flash


def test_recompute_modules_need_selective_and_known_names() -> None:
    with pytest.raises(ScenarioError, match=r"parallelism\.recompute_modules.*selective"):
        replace(BASE, recompute_modules=("layernorm",)).validate()
    from hetero_ns3.scenario.fields import load_dataclass

    with pytest.raises(ScenarioError, match=r"recompute_modules.*core_attn"):
        load_dataclass(
            ParallelismSpec,
            {"tp": 1, "global_batch": 8, "recompute": "selective", "recompute_modules": ["attention"]},
            "parallelism",
        )
