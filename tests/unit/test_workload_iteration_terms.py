"""Iteration terms of issue 14 item 2: host overhead, unfused attention, gradient reduce precision."""

from __future__ import annotations

import pytest

from hetero_ns3.compute.config import ComputeConfig
from hetero_ns3.errors import ScenarioError
from hetero_ns3.scenario.cluster import ClusterSection, NodeGroupSpec, inline_gpus
from hetero_ns3.workload import layers as L
from hetero_ns3.workload.models import get_model
from hetero_ns3.workload.parallel import ParallelismSpec
from hetero_ns3.workload.planner import build_plan


def _gpus(n: int = 2):
    return inline_gpus(ClusterSection(groups=(NodeGroupSpec("A100-SXM-80GB", 1, n),)))


PLAN = ParallelismSpec(tp=1, pp=1, dp=2, global_batch=4, micro_batch=1)


def test_host_overhead_adds_its_time_once_per_iteration() -> None:
    m = get_model("gpt3-125m")
    base = build_plan(m, PLAN, _gpus(), ComputeConfig())
    more = build_plan(m, PLAN, _gpus(), ComputeConfig(host_overhead=0.010))
    assert more.compute_time - base.compute_time == pytest.approx(0.010, rel=1e-9)
    with pytest.raises(ScenarioError, match="compute.host_overhead"):
        ComputeConfig(host_overhead=-1.0).validate()


def test_unfused_attention_is_slower_and_keeps_the_flops() -> None:
    """Megatron's unfused path moves the s x s scores through HBM: same FLOPs, more bytes, more time."""
    m = get_model("gpt3-1.3b")
    flash = L.LayerContext(m, 1, 1, False, 1, "none", True)
    unfused = L.LayerContext(m, 1, 1, False, 1, "none", False)

    def kernels(c):
        return [
            k for st in L.layer_forward(c, 0) + L.layer_backward(c, 0) if isinstance(st, L.Compute) for k in st.kernels
        ]

    kf, ku = kernels(flash), kernels(unfused)
    assert sum(k.flops for k in kf) == pytest.approx(sum(k.flops for k in ku), rel=1e-12)
    s, a = m.seq_len, m.heads
    extra = sum(k.bytes for k in ku) - sum(k.bytes for k in kf)
    assert extra > 2 * 2 * a * s * s  # at least the softmax read + write of the 2-byte scores
    fast = build_plan(m, PLAN, _gpus(), ComputeConfig(flash_attention=True)).compute_time
    slow = build_plan(m, PLAN, _gpus(), ComputeConfig(flash_attention=False)).compute_time
    assert slow > 1.1 * fast


@pytest.mark.parametrize(("dtype", "nbytes"), [("fp32", 4), ("bf16", 2), ("fp16", 2)])
def test_gradient_reduce_bytes_follow_the_dtype(dtype: str, nbytes: int) -> None:
    m = get_model("gpt3-125m")
    plan = ParallelismSpec(tp=1, pp=1, dp=2, global_batch=4, grad_reduce_dtype=dtype)
    wl = build_plan(m, plan, _gpus(), ComputeConfig()).workload
    grads = [o for o in wl.ops[0] if o.dim == "dp" and o.name.startswith("dp.grad")]
    params = m.total_params()
    assert sum(o.bytes for o in grads) == pytest.approx(nbytes * params, rel=0.02)


def test_tp_comm_overlap_hides_forward_tp_collectives() -> None:
    """With a fixed cost per TP collective, --tp-comm-overlap shortens the iteration by at most the
    forward TP collectives' time and keeps the FLOPs; without TP collectives it changes nothing."""
    from dataclasses import replace

    from hetero_ns3.workload.timing import replay

    m = get_model("gpt3-1.3b")
    plan = ParallelismSpec(tp=4, pp=1, dp=2, global_batch=4, sequence_parallel=True)
    gpus = _gpus(8)
    base = build_plan(m, plan, gpus, ComputeConfig())
    over = build_plan(m, replace(plan, tp_comm_overlap=True), gpus, ComputeConfig())

    def cost(op) -> float:
        return 2e-4 if op.dim == "tp" else 0.0

    t_base = replay(base.workload, cost).iteration_time
    t_over = replay(over.workload, cost).iteration_time
    n_fwd_tp = sum(1 for o in base.workload.programs[0].ops if o.dim == "tp" and o.phase == "F")
    assert t_over < t_base
    assert t_base - t_over <= n_fwd_tp * 2e-4 + 1e-9
    assert over.workload.flops == pytest.approx(base.workload.flops)
    assert over.compute_time == pytest.approx(base.compute_time, rel=1e-9)


def test_overlap_param_gather_moves_the_all_gathers_before_the_forward() -> None:
    from dataclasses import replace

    from hetero_ns3.workload.timing import replay

    m = get_model("gpt3-350m")
    plan = ParallelismSpec(tp=1, pp=1, dp=2, global_batch=8, zero_stage=1, bucket_params=10_000_000)
    base = build_plan(m, plan, _gpus(), ComputeConfig())
    over = build_plan(m, replace(plan, overlap_param_gather=True), _gpus(), ComputeConfig())
    ops = over.workload.programs[0].ops
    ags = [o for o in ops if o.name.startswith("dp.param_ag")]
    opt = next(i for i, o in enumerate(ops) if o.name == "optimizer")
    assert ags and all(ops.index(o) < opt for o in ags)  # all issued before the optimizer...
    ag_ids = {o.id for o in ags}
    gated = [o for o in ops if o.kind == "compute" and o.name != "optimizer" and ag_ids & set(o.deps)]
    assert len(gated) == len(ags) and all(o.phase == "F" and o.microbatch == 0 for o in gated)  # ...gating the forward
    assert sum(o.bytes for o in ags) == pytest.approx(
        sum(o.bytes for o in base.workload.programs[0].ops if o.name.startswith("dp.param_ag"))
    )

    def cost(op) -> float:
        return 2e-3 if op.name.startswith("dp.param_ag") else 0.0

    def tail(wl) -> tuple[float, float]:  # (last all-gather end, optimizer end)
        tl = replay(wl, cost)
        ops = wl.programs[0].ops
        ag_end = max(tl.end[o.id] for o in ops if o.name.startswith("dp.param_ag"))
        return ag_end, next(tl.end[o.id] for o in ops if o.name == "optimizer")

    ag_end, opt_end = tail(base.workload)
    assert ag_end > opt_end  # after the optimizer: on the iteration's tail
    ag_end, opt_end = tail(over.workload)
    assert ag_end < opt_end  # at the start, under the forward
