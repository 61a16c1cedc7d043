"""Megatron-Core's ``overlap_p2p_comm`` (``[parallelism] overlap_p2p_comm``, on by default under the interleaved
schedule): each pipeline receive is posted with the send of the step of the same direction before it, so its transfer
overlaps the step in between (docs/workload.md "Pipeline p2p")."""

from __future__ import annotations

from dataclasses import replace

import pytest

from hetero_ns3.errors import ScenarioError
from hetero_ns3.scenario.cluster import ClusterSection, NodeGroupSpec, inline_gpus
from hetero_ns3.workload.models import get_model
from hetero_ns3.workload.parallel import ParallelismSpec
from hetero_ns3.workload.planner import build_plan
from hetero_ns3.workload.timing import replay

MODEL = replace(get_model("gpt3-350m"), layers=8)
GPUS = inline_gpus(ClusterSection(groups=(NodeGroupSpec("H100-SXM", 2, 8),)))


def _plan(vpp: int, overlap: bool | None, m: int = 16):
    spec = ParallelismSpec(
        tp=2, pp=2, vpp=vpp, schedule="interleaved", global_batch=2 * m * 4, micro_batch=2, overlap_p2p_comm=overlap
    )
    return build_plan(MODEL, spec, GPUS)


def _exposed(p, d: float) -> float:
    """Step time with every pipeline transfer taking ``d`` seconds less the step with free transfers (other
    communication free; an earliest-start replay of the programs)."""

    def step(t: float) -> float:
        return max(replay(p.workload, lambda op: t if op.dim == "pp" else 0.0).end.values())

    return step(d) - step(0.0)


def test_default_follows_the_schedule_and_false_restores_late_receives() -> None:
    assert ParallelismSpec(pp=2, vpp=2, schedule="interleaved").p2p_overlapped
    assert not ParallelismSpec(pp=2).p2p_overlapped
    assert not ParallelismSpec(pp=2, vpp=1, schedule="interleaved").p2p_overlapped  # Megatron: vp_size > 1
    assert not ParallelismSpec(pp=2, vpp=2, schedule="interleaved", overlap_p2p_comm=False).p2p_overlapped
    with pytest.raises(ScenarioError, match=r"parallelism.overlap_p2p_comm .* needs parallelism.schedule"):
        ParallelismSpec(pp=2, global_batch=8, overlap_p2p_comm=True).validate()


def test_receive_is_posted_before_the_step_in_between() -> None:
    """On the second stage a steady-state forward's receive comes right after the previous forward's send, before
    the backward in between, whose compute does not wait for it; the forward's first compute does."""
    for overlap, early_expected in ((True, True), (False, False)):
        prog = next(pr for pr in _plan(2, overlap).workload.programs if pr.stage == 1 and pr.replica == 0)
        ops = list(prog.ops)
        pos = {op.id: i for i, op in enumerate(ops)}
        early = 0
        for i, op in enumerate(ops):
            if op.kind != "comm" or op.collective != "recv" or op.phase != "F":
                continue
            waiter = next(o for o in ops if op.id in o.deps and o.kind == "compute")
            between = [o for o in ops[i + 1 : pos[waiter.id]] if o.kind == "compute"]
            if between:
                early += 1
                assert all(o.phase == "B" for o in between)
        assert (early > 0) is early_expected


def test_overlap_hides_the_steady_state_transfers() -> None:
    """With transfers shorter than a step, only the warm-up and cool-down receives stay exposed under overlap, so the
    exposed time barely grows when the steady state doubles (vpp 2 -> 4: within 10%); with late receives every one of
    them on the critical path is exposed, and it grows at least 2.5x."""
    d = 5e-5
    on = {v: _exposed(_plan(v, True), d) for v in (2, 4)}
    off = {v: _exposed(_plan(v, False), d) for v in (2, 4)}
    assert on[4] < 1.10 * on[2]
    assert off[4] > 2.5 * off[2]
    assert on[2] < off[2] and on[4] < 0.25 * off[4]
