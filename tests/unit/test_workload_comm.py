"""Bytes and counts of TP, PP, DP and EP ops against closed forms; DAG and instance consistency."""

from __future__ import annotations

from collections import Counter
from dataclasses import replace

import pytest

from hetero_ns3.scenario.cluster import ClusterSection, NodeGroupSpec, inline_gpus
from hetero_ns3.workload.artefact import Workload
from hetero_ns3.workload.memory import embedding_params_per_rank, head_params_per_rank, layer_params_per_rank
from hetero_ns3.workload.models import get_model
from hetero_ns3.workload.parallel import ParallelismSpec
from hetero_ns3.workload.planner import build_plan
from hetero_ns3.workload.timing import replay

MODEL = replace(get_model("gpt3-350m"), layers=8)
b, s, h = 2, MODEL.seq_len, MODEL.hidden


def _gpus(nodes: int = 2, per_node: int = 8, gpu: str = "H100-SXM"):
    return inline_gpus(ClusterSection(groups=(NodeGroupSpec(gpu, nodes, per_node),)))


def _plan(**kw):
    base = {"tp": 2, "pp": 2, "global_batch": 16, "micro_batch": b}
    base.update(kw)
    return build_plan(MODEL, ParallelismSpec(**base), _gpus())


def _comm(wl: Workload, dim: str, rank: int | None = None):
    return [op for op in wl if op.kind == "comm" and op.dim == dim and (rank is None or op.rank == rank)]


def test_tp_all_reduce_per_layer() -> None:
    """No SP: 2 all-reduces of 2bsh bytes per layer forward, 2 in backward (Shoeybi et al. 2019)."""
    p = _plan()
    layers_on_rank0 = p.stage_layers[0]
    m = p.replica_microbatches[0]
    ops = [o for o in _comm(p.workload, "tp", 0) if ".L" in o.name]
    assert {o.collective for o in ops} == {"all_reduce"}
    assert {o.bytes for o in ops} == {2.0 * b * s * h}
    assert len(ops) == 4 * layers_on_rank0 * m
    # vocab-parallel embedding all-reduce on the first stage, once per microbatch forward
    emb = [o for o in _comm(p.workload, "tp", 0) if ".emb." in o.name]
    assert len(emb) == m and all(o.bytes == 2.0 * b * s * h for o in emb)


def test_tp_sequence_parallel_per_layer() -> None:
    """SP: forward AG + RS per block; backward AG(grad) + AG(input) + RS(grad) per block."""
    p = _plan(sequence_parallel=True)
    ops = [o for o in _comm(p.workload, "tp", 0) if ".L" in o.name]
    c = Counter(o.collective for o in ops)
    per = p.stage_layers[0] * p.replica_microbatches[0]
    assert c == {"all_gather": (2 + 4) * per, "reduce_scatter": (2 + 2) * per}
    assert {o.bytes for o in ops} == {2.0 * b * s * h}


def test_sp_backward_reduce_scatter_follows_the_input_all_gather() -> None:
    """Megatron's column-parallel backward under SP waits for the input all-gather (``handle.wait()``) before
    it issues the gradient reduce-scatter, and both run in order on the TP communicator's NCCL stream: every
    ``rs_grad`` depends on its ``ag_input`` directly (the dgrad GEMM in between does not)."""
    p = _plan(sequence_parallel=True)
    ops = [o for o in p.workload if o.rank == 0]
    by_name = {o.name: o for o in ops}
    pairs = [(by_name[o.name.replace(".rs_grad", ".ag_input")], o) for o in ops if o.name.endswith(".rs_grad")]
    assert len(pairs) == 2 * p.stage_layers[0] * p.replica_microbatches[0]
    for ag, rs in pairs:
        assert ag.id in rs.deps, (ag.name, rs.name, rs.deps)
        dgrad = by_name[rs.name.replace(".rs_grad", ".dgrad")]
        assert ag.id not in dgrad.deps  # the all-gather still overlaps the dgrad GEMM


def test_full_recompute_repeats_forward_tp_collectives() -> None:
    p = _plan(recompute="full")
    per = p.stage_layers[0] * p.replica_microbatches[0]
    ops = [o for o in _comm(p.workload, "tp", 0) if ".L" in o.name]
    assert len(ops) == (2 + 2 + 2) * per


def test_pp_send_recv_bytes_and_counts() -> None:
    for sp, div in ((False, 1), (True, 2)):
        p = _plan(sequence_parallel=sp)
        m = p.replica_microbatches[0]
        ops = _comm(p.workload, "pp")
        sends = [o for o in ops if o.collective == "send"]
        recvs = [o for o in ops if o.collective == "recv"]
        assert {o.bytes for o in sends} == {2.0 * b * s * h / div}
        # per replica and tp index: m activations forward + m gradients backward over 1 boundary
        assert len(sends) == len(recvs) == p.placement.dp * 2 * 2 * m
        by_inst = p.workload.instances()
        for o in sends:
            members = by_inst[o.instance]
            assert sorted(x.collective for x in members) == ["recv", "send"]


def test_interleaved_pp_traffic_wraps_to_first_stage() -> None:
    p = _plan(vpp=2, schedule="interleaved", global_batch=32)
    sends = [o for o in _comm(p.workload, "pp") if o.collective == "send"]
    m = p.replica_microbatches[0]
    # 2 stages x 2 chunks = 4 virtual stages, 3 boundaries, each crossed by m activations and m grads per tp index
    assert len(sends) == p.placement.dp * 2 * 3 * 2 * m
    p.workload.check()


def _stage_params(p, stage: int) -> float:
    tp = p.plan.tp
    n = 0.0
    first = sum(p.stage_layers[:stage])
    for layer in range(first, first + p.stage_layers[stage]):
        n += layer_params_per_rank(MODEL, layer, tp, 1).total
    if stage == 0:
        n += embedding_params_per_rank(MODEL, tp)
    if stage == p.plan.pp - 1:
        n += head_params_per_rank(MODEL, tp, p.plan.pp)
    return n


@pytest.mark.parametrize("zero", [0, 1])
def test_dp_bucket_bytes_sum_to_gradients(zero: int) -> None:
    """Buckets cover every local parameter once: sum = params x 4 bytes (fp32 grads); ZeRO-1 adds the
    parameter all-gather of params x 2 bytes."""
    p = _plan(zero_stage=zero, bucket_params=5_000_000)
    for rank in (0, p.placement.rank(1, 1, 2)):
        stage = p.placement.slots[rank].pp
        ops = _comm(p.workload, "dp", rank)
        grads = [o for o in ops if ".grad." in o.name]
        assert {o.collective for o in grads} == {"reduce_scatter" if zero else "all_reduce"}
        assert sum(o.bytes for o in grads) == pytest.approx(4.0 * _stage_params(p, stage))
        assert len(grads) > 1  # several buckets
        assert all(len(o.group) == p.placement.dp for o in grads)
        ags = [o for o in ops if o.collective == "all_gather"]
        assert sum(o.bytes for o in ags) == pytest.approx(2.0 * _stage_params(p, stage) if zero else 0.0)


def test_dp_buckets_overlap_backward() -> None:
    """With overlap, the first bucket is issued before the last backward compute of the rank ends."""
    p = _plan(bucket_params=2_000_000)
    tl = replay(p.workload)
    rank = 0
    grads = [o for o in _comm(p.workload, "dp", rank) if ".grad." in o.name]
    last_bwd = max(tl.op_end(o.id) for o in p.workload.ops[rank] if o.kind == "compute" and o.phase == "B")
    assert min(tl.op_start(o.id) for o in grads) < last_bwd
    p2 = _plan(bucket_params=2_000_000, overlap_grad_reduce=False)
    tl2 = replay(p2.workload)
    grads2 = [o for o in _comm(p2.workload, "dp", rank) if ".grad." in o.name]
    last2 = max(tl2.op_end(o.id) for o in p2.workload.ops[rank] if o.kind == "compute" and o.phase == "B")
    assert min(tl2.op_start(o.id) for o in grads2) >= last2


def test_tied_embedding_sync_between_first_and_last_stage() -> None:
    p = _plan()
    syncs = [o for o in p.workload if o.name == "emb.grad_sync"]
    V = MODEL.padded_vocab(2)
    assert syncs and {o.bytes for o in syncs} == {4.0 * V * h / 2}
    assert {o.collective for o in syncs} == {"all_reduce"}


def test_moe_all_to_all_bytes() -> None:
    moe = replace(get_model("mixtral-8x7b"), layers=2, seq_len=256)
    plan = ParallelismSpec(tp=2, pp=1, ep=4, sequence_parallel=True, global_batch=8, micro_batch=1)
    p = build_plan(moe, plan, _gpus(1, 8))
    a2a = _comm(p.workload, "ep", 0)
    T = 1 * 256
    # dispatch + combine in forward and their mirrors in backward, per MoE layer and microbatch
    assert len(a2a) == 4 * 2 * p.replica_microbatches[0]
    assert {o.bytes for o in a2a} == {2.0 * (T / 2) * moe.top_k * moe.hidden}
    assert {len(o.group) for o in a2a} == {4}
    # expert gradients reduce over the expert-data-parallel group (dp / ep = 1: none), dense over dp = 4
    dp_ops = _comm(p.workload, "dp", 0)
    assert dp_ops and all(".dense." in o.name and len(o.group) == 4 for o in dp_ops)
    p.workload.check()


def test_workload_roundtrip_json(tmp_path) -> None:
    p = _plan()
    path = tmp_path / "wl.json"
    p.workload.to_json(path)
    back = Workload.from_json(path)
    assert back.n_ops == p.workload.n_ops and back.n_program_ops < back.n_ops
    assert back.ops[3] == p.workload.ops[3]
    assert back.rank_ops(5) == p.workload.ops[5]
    df = p.workload.to_dataframe()
    assert len(df) == p.workload.n_ops and {"id", "deps", "collective", "gpu"} <= set(df.columns)
