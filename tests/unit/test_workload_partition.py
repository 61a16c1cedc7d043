"""Non-uniform partitioning over mixed GPU generations."""

from __future__ import annotations

from dataclasses import replace

import pytest

from hetero_ns3.scenario.cluster import ClusterSection, NodeGroupSpec, inline_gpus
from hetero_ns3.workload.compiler import StepPrograms
from hetero_ns3.workload.models import get_model
from hetero_ns3.workload.parallel import ParallelismSpec
from hetero_ns3.workload.partition import chunk_layers, minmax_split, uniform_split
from hetero_ns3.workload.planner import program_time, resolve


def _cluster(*groups: tuple[str, int, int]):
    return inline_gpus(ClusterSection(groups=tuple(NodeGroupSpec(t, n, g) for t, n, g in groups)))


def test_minmax_split_proportional() -> None:
    # a part 3x faster takes 3x the units
    assert minmax_split(40, [1.0, 3.0]) == (30, 10)
    assert minmax_split(10, [1.0, 1.0, 1.0]) in {(4, 3, 3), (3, 4, 3), (3, 3, 4)}
    # fixed cost on part 0 moves units away from it
    assert minmax_split(10, [1.0, 1.0], fixed=[4.0, 0.0]) == (3, 7)
    assert sum(minmax_split(97, [0.3, 0.7, 1.1], minimum=2)) == 97


def test_uniform_and_chunks() -> None:
    assert uniform_split(10, 4) == (3, 3, 2, 2)
    # per-stage totals (6, 4) split into 2 chunks; virtual index v = chunk x pp + stage
    assert chunk_layers([6, 4], 2) == (3, 2, 3, 2)


def _stage_times(r) -> list[float]:
    """Compute seconds per microbatch of each stage: layers x layer time + embedding / logits."""
    pl, spec = r.placement, r.spec
    progs = StepPrograms(spec)
    out = []
    for s in range(pl.pp):
        g = max((pl.slot(0, s, d).gpu_type for d in range(pl.dp)), key=lambda t: r.layer_time[t])
        t = spec.stage_layers[s] * r.layer_time[g]
        if s == 0:
            t += program_time(progs, g, ("emb_f", "emb_b"))
        if s == pl.pp - 1:
            t += program_time(progs, g, ("head_f", "head_b"))
        out.append(t)
    return out


@pytest.mark.parametrize(
    "groups",
    [
        (("H100-SXM", 2, 8), ("A100-SXM-80GB", 2, 8)),
        (("H100-SXM", 1, 8), ("A100-SXM-80GB", 2, 8), ("L40S", 1, 8)),
    ],
)
def test_stage_layers_follow_throughput(groups) -> None:
    """Faster stages get proportionally more layers; stage compute balanced within 10%."""
    model = get_model("gpt3-175b")
    plan = ParallelismSpec(tp=8, pp=4, global_batch=64, recompute="full")
    r = resolve(model, plan, _cluster(*groups))
    types = [r.placement.slot(0, s, 0).gpu_type for s in range(4)]
    layers = r.spec.stage_layers
    assert sum(layers) == 96
    for i in range(4):
        for j in range(4):
            if r.layer_time[types[i]] < r.layer_time[types[j]]:
                assert layers[i] > layers[j]
    # share of layers ~ inverse layer time (throughput)
    inv = [1 / r.layer_time[t] for t in types]
    for n, w in zip(layers, inv, strict=True):
        assert n / 96 == pytest.approx(w / sum(inv), abs=0.03)
    t = _stage_times(r)
    assert max(t) / min(t) <= 1.10


def test_replica_microbatches_follow_throughput() -> None:
    """Two replicas, one of H100s and one of A100s: microbatches in proportion to replica speed."""
    model = replace(get_model("llama2-7b"), seq_len=2048)
    plan = ParallelismSpec(tp=8, pp=1, global_batch=256, micro_batch=1)
    r = resolve(model, plan, _cluster(("H100-SXM", 1, 8), ("A100-SXM-80GB", 1, 8)))
    m_h, m_a = r.spec.replica_microbatches
    assert m_h + m_a == 256 and m_h > m_a
    t_h = m_h * r.layer_time["H100-SXM"]
    t_a = m_a * r.layer_time["A100-SXM-80GB"]
    assert max(t_h, t_a) / min(t_h, t_a) <= 1.10
    assert m_h / m_a == pytest.approx(r.layer_time["A100-SXM-80GB"] / r.layer_time["H100-SXM"], rel=0.1)


def test_given_partition_is_used_and_uniform_option() -> None:
    model = get_model("gpt3-1.3b")
    gpus = _cluster(("H100-SXM", 1, 8), ("A100-SXM-80GB", 1, 8))
    r = resolve(
        model, ParallelismSpec(tp=4, pp=2, global_batch=8, stage_layers=(10, 14), replica_microbatches=(5, 3)), gpus
    )
    assert r.spec.stage_layers == (10, 14) and r.spec.replica_microbatches == (5, 3)
    r = resolve(model, ParallelismSpec(tp=4, pp=2, global_batch=8, partition="uniform"), gpus)
    assert r.spec.stage_layers == (12, 12) and r.spec.replica_microbatches == (4, 4)


def test_homogeneous_auto_equals_uniform_layers() -> None:
    from hetero_ns3.workload.models import ModelSpec

    m = ModelSpec("toy", layers=32, hidden=4096, heads=32, ffn_hidden=16384, vocab=256, seq_len=2048)
    r = resolve(m, ParallelismSpec(tp=8, pp=4, global_batch=16), _cluster(("H100-SXM", 4, 8)))
    assert r.spec.stage_layers == (8, 8, 8, 8)
