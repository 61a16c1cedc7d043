"""``[compute] fp8_param_gather`` (Megatron-Core's ``--fp8-param-gather``): the linear layers' weights kept in FP8 and
gathered so under per-tensor FP8, BF16 through the reused gradient buffer under MXFP8, refused without FP8
(docs/workload.md "FP8 parameter gather")."""

from __future__ import annotations

from dataclasses import replace

import pytest

from hetero_ns3.compute.config import ComputeConfig
from hetero_ns3.compute.recipes import RECIPES
from hetero_ns3.errors import ScenarioError
from hetero_ns3.scenario.cluster import ClusterSection, NodeGroupSpec, inline_gpus
from hetero_ns3.workload.memory import linear_weights_per_rank
from hetero_ns3.workload.models import get_model
from hetero_ns3.workload.parallel import ParallelismSpec
from hetero_ns3.workload.planner import build_plan

M = get_model("gpt3-125m")
GPUS = inline_gpus(ClusterSection(groups=(NodeGroupSpec("H100-SXM", 1, 4),)))
FSDP = ParallelismSpec(tp=1, pp=1, dp=4, global_batch=8, micro_batch=1, zero_stage=3, grad_reduce_dtype="bf16")
ZERO1 = replace(FSDP, zero_stage=1, bucket_params=10_000_000)
FP8 = ComputeConfig(precision="fp8", fp8_recipe="current")
FP8_PG = replace(FP8, fp8_param_gather=True)


def _gathered(plan: ParallelismSpec, compute: ComputeConfig, prefix: str) -> float:
    """Bytes of rank 0's parameter all-gathers (ops named ``prefix``...)."""
    wl = build_plan(M, plan, GPUS, compute).workload
    return sum(o.bytes for o in wl.programs[0].ops if o.kind == "comm" and o.name.startswith(prefix))


def _linear() -> float:
    """Linear-layer weights of the whole model by hand: QKV and projection 4 h^2, the MLP 2 h f per layer."""
    h, f = M.hidden, M.ffn_hidden
    return M.layers * (4 * h * h + 2 * h * f)


def test_linear_weights_by_hand() -> None:
    """Dense: QKV (h (q + 2 kv)), projection (q h) and the MLP's matrices over tp; MoE: the same attention and the
    shared expert in the dense part, the local experts' matrices in the expert part; no biases, norms, router."""
    assert sum(linear_weights_per_rank(M, i, 1, 1).dense for i in range(M.layers)) == _linear()
    q = get_model("qwen3-30b-a3b")
    h, f, e = q.hidden, q.ffn_hidden, q.experts
    attn = h * (q.q_dim + 2 * q.kv_dim) + q.q_dim * h
    lw = linear_weights_per_rank(q, 0, 2, 8)
    assert lw.dense == pytest.approx(attn / 2) and lw.expert == pytest.approx(e // 8 * 3 * h * f / 2)


@pytest.mark.parametrize(("plan", "prefix", "passes"), [(FSDP, "dp.fsdp_ag", 2 * 2), (ZERO1, "dp.param_ag", 1)])
def test_fp8_weights_halve_the_linear_part_of_every_gather(plan: ParallelismSpec, prefix: str, passes: int) -> None:
    """Under FSDP (a forward and a backward gather per micro-batch, 2 micro-batches) and under the distributed
    optimizer (one gather per iteration), the all-gathers carry 2 bytes per parameter, the linear weights 1 byte
    with the flag: the difference is exactly their count per pass."""
    base, fp8 = _gathered(plan, FP8, prefix), _gathered(plan, FP8_PG, prefix)
    assert base == pytest.approx(passes * 2.0 * M.total_params(), rel=1e-12)
    assert base - fp8 == pytest.approx(passes * _linear(), rel=1e-12)
    assert _gathered(plan, replace(FP8_PG, fp8_recipe="delayed"), prefix) == pytest.approx(fp8, rel=1e-12)


def test_mxfp8_gathers_bf16_and_the_flag_is_off_by_default() -> None:
    """MXFP8: Megatron-Core gathers BF16 into the reused gradient buffer, so the flag changes no byte; off (the
    default) nothing changes either."""
    mx = replace(FP8, fp8_recipe="mxfp8")
    gpus = inline_gpus(ClusterSection(groups=(NodeGroupSpec("B200", 1, 4),)))

    def gathered(c: ComputeConfig) -> float:
        wl = build_plan(M, FSDP, gpus, c).workload
        return sum(o.bytes for o in wl.programs[0].ops if o.name.startswith("dp.fsdp_ag"))

    assert gathered(replace(mx, fp8_param_gather=True)) == gathered(mx)
    assert RECIPES["mxfp8"].param_gather_bytes == 2.0 and RECIPES["current"].param_gather_bytes == 1.0
    assert ComputeConfig().fp8_param_gather is False and FP8.param_gather_bytes() == 2.0


def test_fp8_weights_take_one_byte_of_hbm() -> None:
    """ZeRO-1 keeps every weight: 1 byte less per linear weight; FSDP keeps its shard and two gathered units, each
    with their linear weights in FP8."""
    one, one_pg = (build_plan(M, ZERO1, GPUS, c).memory[0] for c in (FP8, FP8_PG))
    assert one.weights - one_pg.weights == pytest.approx(_linear(), rel=1e-12)
    three, three_pg = (build_plan(M, FSDP, GPUS, c).memory[0] for c in (FP8, FP8_PG))
    layer_lin = linear_weights_per_rank(M, 0, 1, 1).dense
    largest_is_embedding = M.embedding_params() > M.layer_params(0)
    saved_gathered = 0.0 if largest_is_embedding else 2 * layer_lin
    assert three.weights - three_pg.weights == pytest.approx(_linear() / 4 + saved_gathered, rel=1e-12)
    # with a small vocabulary a layer is the largest unit, so the two gathered units hold FP8 linear weights too
    small = replace(M, vocab=1024)
    assert small.layer_params(0) > small.embedding_params()
    three, three_pg = (build_plan(small, FSDP, GPUS, c).memory[0] for c in (FP8, FP8_PG))
    assert three.weights - three_pg.weights == pytest.approx(_linear() / 4 + 2 * layer_lin, rel=1e-12)


def test_the_flag_needs_fp8() -> None:
    for precision in ("bf16", "fp4"):
        with pytest.raises(ScenarioError, match=r"compute\.fp8_param_gather.*needs compute\.precision = 'fp8'"):
            ComputeConfig(precision=precision, fp8_param_gather=True).validate()
