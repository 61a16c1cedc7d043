"""Rank placement onto GPUs: TP inside a node, then PP, then DP (configurable); EP groups."""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from hetero_ns3.errors import ScenarioError
from hetero_ns3.scenario.cluster import ClusterSection, NodeGroupSpec, inline_gpus
from hetero_ns3.workload.models import get_model
from hetero_ns3.workload.parallel import ParallelismSpec
from hetero_ns3.workload.placement import place
from hetero_ns3.workload.planner import build_plan


@dataclass(frozen=True)
class _Gpu:  # a stand-in with the GpuInfo attributes (the placement Protocol)
    name: str
    node: int
    local_index: int
    gpu_type: str
    group: str


def _gpus(nodes: int, per_node: int = 8):
    out = [_Gpu(f"n{n}.g{i}", n, i, "H100-SXM", "g") for n in range(nodes) for i in range(per_node)]
    return list(reversed(out))  # order of the input does not matter


def test_default_order_tp_in_node_then_pp_then_dp() -> None:
    pl = place(_gpus(4), tp=8, pp=2, dp=2)
    assert [s.gpu for s in pl.tp_group(0, 0)] == [f"n0.g{i}" for i in range(8)]
    assert pl.slot(0, 1, 0).gpu == "n1.g0"  # stage 1 of replica 0 on the next node
    assert pl.slot(0, 0, 1).gpu == "n2.g0"  # replica 1 after the whole pipeline
    assert [s.gpu for s in pl.dp_group(3, 1)] == ["n1.g3", "n3.g3"]
    assert [pl.rank(s.tp, s.pp, s.dp) for s in pl.slots] == list(range(32))


def test_tp_dp_pp_order() -> None:
    pl = place(_gpus(4), tp=8, pp=2, dp=2, order="tp-dp-pp")
    assert pl.slot(0, 0, 1).gpu == "n1.g0" and pl.slot(0, 1, 0).gpu == "n2.g0"


def test_expert_groups_carved_from_dp() -> None:
    pl = place(_gpus(1), tp=1, pp=1, dp=8, ep=4)
    assert [s.dp for s in pl.ep_group(0, 0, 5)] == [4, 5, 6, 7]
    assert [s.dp for s in pl.edp_group(0, 0, 5)] == [1, 5]


def test_bad_order_and_count() -> None:
    with pytest.raises(ScenarioError, match="permutation of tp-pp-dp"):
        place(_gpus(1), 8, 1, 1, order="tp-ep-dp")
    with pytest.raises(ScenarioError, match="does not match 8 GPUs"):
        place(_gpus(1), 4, 1, 1)


def test_non_uniform_replicas_compile_to_a_consistent_dag() -> None:
    """Replicas with different microbatch counts still meet in the same DP collectives."""
    gpus = inline_gpus(ClusterSection(groups=(NodeGroupSpec("H100-SXM", 1, 4), NodeGroupSpec("A100-SXM-80GB", 1, 4))))
    p = build_plan(get_model("gpt3-350m"), ParallelismSpec(tp=2, pp=2, global_batch=12, zero_stage=1), gpus)
    assert p.replica_microbatches[0] > p.replica_microbatches[1] >= 2
    p.workload.check()
    dp_insts = {op.instance for op in p.workload if op.dim == "dp"}
    for inst in dp_insts:
        members = p.workload.instances()[inst]
        assert {p.workload.ranks[m.rank].dp for m in members} == {0, 1}
