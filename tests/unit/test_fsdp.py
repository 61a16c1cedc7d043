"""zero_stage 3 (fully sharded data parallelism): the collectives it adds per micro-batch, its prefetch, its memory
(docs/workload.md "Fully sharded data parallelism")."""

from __future__ import annotations

from dataclasses import replace

import pytest

from hetero_ns3.compute.config import ComputeConfig
from hetero_ns3.errors import ScenarioError
from hetero_ns3.scenario.cluster import ClusterSection, NodeGroupSpec, inline_gpus
from hetero_ns3.workload.memory import FSDP_GATHERED_UNITS
from hetero_ns3.workload.models import get_model
from hetero_ns3.workload.parallel import ParallelismSpec
from hetero_ns3.workload.planner import build_plan
from hetero_ns3.workload.timing import replay

M = get_model("gpt3-125m")
GPUS = inline_gpus(ClusterSection(groups=(NodeGroupSpec("A100-SXM-80GB", 1, 4),)))
FSDP = ParallelismSpec(tp=1, pp=1, dp=4, global_batch=12, micro_batch=1, zero_stage=3, grad_reduce_dtype="bf16")
UNITS = M.layers + 2  # the embedding, every layer, the head (final norm; the output layer is tied)


def _ops(plan: ParallelismSpec, prefix: str) -> list:
    wl = build_plan(M, plan, GPUS, ComputeConfig()).workload
    return [o for o in wl.programs[0].ops if o.kind == "comm" and o.name.startswith(prefix)]


def test_every_unit_is_gathered_before_forward_and_backward_and_reduced_after_backward_per_microbatch() -> None:
    """Per micro-batch (3 per replica here) and unit: an all-gather of its BF16 weights before its forward and again
    before its backward, a reduce-scatter of its gradients (reduce dtype) after its backward; over the micro-batches
    that is 2 x 2 bytes and 2 bytes per parameter each, against 2 bytes once for ZeRO-1's reduce-scatter."""
    mb = 3
    ag, rs = _ops(FSDP, "dp.fsdp_ag"), _ops(FSDP, "dp.fsdp_rs")
    assert len(ag) == 2 * mb * UNITS and len(rs) == mb * UNITS
    assert {o.collective for o in ag} == {"all_gather"} and {o.collective for o in rs} == {"reduce_scatter"}
    params = M.total_params()
    assert sum(o.bytes for o in ag) == pytest.approx(2 * mb * 2.0 * params, rel=1e-9)
    assert sum(o.bytes for o in rs) == pytest.approx(mb * 2.0 * params, rel=1e-9)
    assert not _ops(FSDP, "dp.grad") and not _ops(FSDP, "dp.param_ag")
    zero1 = replace(FSDP, zero_stage=1)
    assert sum(o.bytes for o in _ops(zero1, "dp.grad")) == pytest.approx(2.0 * params, rel=1e-9)
    assert not _ops(zero1, "dp.fsdp")


def test_the_next_units_gather_overlaps_the_current_units_compute() -> None:
    """Each unit waits for its gather, issued as the unit before it starts: at most two gathers are in flight (the
    running unit's and the next one's), so with fixed gather times far above the compute the step is at least half
    a gather per unit pass (the flow-level and packet backends share the links between the two); with gathers
    shorter than every unit's compute only the first gather of each pass (forward and backward of each
    micro-batch) is exposed."""
    wl = build_plan(M, FSDP, GPUS, ComputeConfig()).workload
    base = build_plan(M, replace(FSDP, zero_stage=1), GPUS, ComputeConfig()).workload
    t0 = replay(base, lambda op: 0.0).iteration_time
    assert replay(wl, lambda op: 0.0).iteration_time == pytest.approx(t0, rel=1e-12)
    n_ag = 2 * 3 * UNITS

    def gathers(c: float):
        return lambda op: c if op.name.startswith("dp.fsdp_ag") else 0.0

    slow = replay(wl, gathers(1.0)).iteration_time
    assert 0.98 * n_ag / 2 <= slow <= n_ag + t0
    shortest = min(op.duration for op in wl.programs[0].ops if op.kind == "compute" and op.duration > 0)
    c = 0.5 * shortest
    hidden = replay(wl, gathers(c)).iteration_time
    assert t0 < hidden <= t0 + 2 * 3 * c * (1 + 1e-9)


def test_fsdp_shards_the_weights_and_holds_two_gathered_units() -> None:
    one = build_plan(M, replace(FSDP, zero_stage=2), GPUS, ComputeConfig()).memory[0]
    three = build_plan(M, FSDP, GPUS, ComputeConfig()).memory[0]
    params = M.total_params()
    largest = max(M.layer_params(0), M.embedding_params())
    assert one.weights == pytest.approx(2.0 * params, rel=1e-9)
    assert three.weights == pytest.approx(2.0 * params / 4 + FSDP_GATHERED_UNITS * 2.0 * largest, rel=1e-9)
    assert three.gradients == one.gradients and three.optimizer == one.optimizer


def test_zero_stage_must_be_known() -> None:
    with pytest.raises(ScenarioError, match=r"zero_stage.*0, 1, 2 or 3"):
        replace(FSDP, zero_stage=4).validate()
