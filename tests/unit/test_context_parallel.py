"""Context parallelism (``parallelism.cp``): Megatron-Core / Transformer Engine's ring of key / value blocks.

Checked against closed forms: the attention FLOPs a rank executes are 1 / cp of the unsplit layer's, the
ring moves ``cp - 1`` key / value blocks per rank (twice that in the backward), the plan's executed FLOPs
do not change, activations shrink by cp, microbatches are shared by the cp ranks of a replica, and the ring's
critical path is ``max((cp - 1) hops, steps 0 .. cp - 2) + last step``.
"""

from __future__ import annotations

import pytest

from hetero_ns3.compute.config import ComputeConfig
from hetero_ns3.scenario.cluster import ClusterSection, NodeGroupSpec, inline_gpus
from hetero_ns3.workload import layers as L
from hetero_ns3.workload.memory import layer_activation_bytes
from hetero_ns3.workload.models import get_model
from hetero_ns3.workload.parallel import ParallelismSpec
from hetero_ns3.workload.planner import build_plan
from hetero_ns3.workload.timing import replay
from tests.cli_harness import assert_clean, run_cli

LLAMA3 = get_model("llama3-8b")  # 32 heads, 8 KV heads, head dim 128, seq 8192


def _ctx(cp: int, tp: int = 1, b: int = 1, kind: str = "p2p") -> L.LayerContext:
    return L.LayerContext(LLAMA3, b, tp, tp > 1, 1, "none", True, False, cp, kind)  # type: ignore[arg-type]


def _core_kernels(steps: list[L.Step]) -> list:
    return [k for s in steps if isinstance(s, L.Compute) for k in s.kernels if k.op.startswith("attention")]


@pytest.mark.parametrize("cp", [2, 4, 8])
@pytest.mark.parametrize("backward", [False, True])
def test_ring_attention_splits_the_flops_by_cp(cp: int, backward: bool) -> None:
    """Model FLOPs (the full square, as for the unsplit kernel) and executed FLOPs (half of them, causal) per
    rank are both 1 / cp of the unsplit layer's: 2 cp chunk blocks of (s / 2cp)^2 of the causal triangle."""
    whole = L.flash_attention_kernels(1, 8192, 32, 8, 128, True, backward)
    whole_core = [k for k in whole if k.op.startswith("attention")]
    ring = _core_kernels(L.cp_attention_steps(_ctx(cp), backward))
    assert len(ring) == cp  # the local causal block and cp - 1 received blocks
    assert sum(k.flops for k in ring) == pytest.approx(sum(k.flops for k in whole_core) / cp, rel=1e-12)
    executed = sum(k.flops * k.work for k in ring)
    assert executed == pytest.approx(sum(k.flops * k.work for k in whole_core) / cp, rel=1e-12)
    assert ring[0].causal and not any(k.causal for k in ring[1:])
    assert all(k.m == 8192 // cp for k in ring)  # query rows of a rank


@pytest.mark.parametrize("kind", ["all_gather", "a2a"])
@pytest.mark.parametrize("cp", [2, 4, 8])
@pytest.mark.parametrize("backward", [False, True])
def test_other_cp_schemes_split_the_flops_by_cp(kind: str, cp: int, backward: bool) -> None:
    """all_gather: s / cp queries against all s keys, half executed; a2a: all s tokens on heads / cp. Both
    1 / cp of the unsplit kernel's model and executed FLOPs."""
    whole = [k for k in L.flash_attention_kernels(1, 8192, 32, 8, 128, True, backward) if k.op != "memory"]
    mine = _core_kernels(L.cp_attention_steps(_ctx(cp, kind=kind), backward))
    assert len(mine) == 1
    assert mine[0].flops == pytest.approx(whole[0].flops / cp, rel=1e-12)
    assert mine[0].flops * mine[0].work == pytest.approx(whole[0].flops * whole[0].work / cp, rel=1e-12)


@pytest.mark.parametrize("cp", [2, 8])
def test_other_cp_schemes_move_their_closed_form_bytes(cp: int) -> None:
    """all_gather: K / V of all cp ranks gathered (forward, again backward) and their gradient reduce-scattered;
    a2a: Q + K + V of the rank's s / cp tokens in, O out (dO in, dQ + dK + dV out backward); blocking."""
    s, kvh, h, hd = 8192 // cp, 8, 32, 128
    kv, q = 2 * 2 * s * kvh * hd, 2 * s * h * hd

    def comms(kind: str, backward: bool) -> list[tuple[str, float, str]]:
        steps = L.cp_attention_steps(_ctx(cp, kind=kind), backward)
        return [(x.collective, x.bytes, x.mode) for x in steps if isinstance(x, L.Comm)]

    assert comms("all_gather", False) == [("all_gather", cp * kv, "blocking")]
    assert comms("all_gather", True) == [("all_gather", cp * kv, "blocking"), ("reduce_scatter", cp * kv, "blocking")]
    assert comms("a2a", False) == [("all_to_all", q + kv, "blocking"), ("all_to_all", q, "blocking")]
    assert comms("a2a", True) == [("all_to_all", q, "blocking"), ("all_to_all", q + kv, "blocking")]


@pytest.mark.parametrize("cp", [2, 4])
@pytest.mark.parametrize("tp", [1, 2])
def test_ring_moves_cp_minus_one_kv_blocks_per_rank(cp: int, tp: int) -> None:
    """NCCL all-gather size = cp blocks, i.e. (cp - 1) blocks sent per rank; a block is K and V of the rank's
    s / cp tokens, kv_heads / tp heads of 128, 2 bytes; the backward sends K, V and their gradient."""
    block = 2 * 2 * (8192 // cp) * (8 // tp) * 128
    for backward, factor in ((False, 1), (True, 2)):
        comms = [s for s in L.cp_attention_steps(_ctx(cp, tp), backward) if isinstance(s, L.Comm)]
        assert [(c.collective, c.dim, c.mode) for c in comms] == [("all_gather", "cp", "async")]
        assert comms[0].bytes == pytest.approx(cp * factor * block)
        assert comms[0].bytes * (cp - 1) / cp == pytest.approx((cp - 1) * factor * block)


def _plan(cp: int, **kw):
    gpus = inline_gpus(ClusterSection(groups=(NodeGroupSpec("H100-SXM", 1, 8),)))
    model = get_model("llama2-7b")
    base = {"tp": 2, "pp": 1, "cp": cp, "global_batch": 8, "micro_batch": 1, "sequence_parallel": True}
    base.update(kw)
    plan = ParallelismSpec(**base, order="tp-dp-pp")
    return build_plan(model, plan, gpus, ComputeConfig(check_memory=False))


@pytest.mark.parametrize("kind", ["all_gather", "a2a"])
def test_every_scheme_conserves_the_plan_flops(kind: str) -> None:
    assert _plan(2, cp_comm_type=kind).executed_flops == pytest.approx(_plan(1).executed_flops, rel=1e-9)


def test_plan_conserves_flops_and_shares_microbatches() -> None:
    """Same executed FLOPs per iteration; the 4 dp ranks form 2 replicas of 2 CP ranks, each replica's ranks
    run the same 4 microbatches; CP rings are pairs of ranks on one node with the TP ranks between them."""
    one, two = _plan(1), _plan(2)
    assert two.executed_flops == pytest.approx(one.executed_flops, rel=1e-9)
    assert one.replica_microbatches == (2, 2, 2, 2)
    assert two.replica_microbatches == (4, 4, 4, 4)
    cp_ops = [op for prog in two.workload.programs for op in prog.ops if op.dim == "cp"]
    assert cp_ops and {len(op.groups) for op in cp_ops} == {2}  # one ring per tp index
    rings = {g for op in cp_ops for g in op.groups}
    assert rings == {("n0.g0", "n0.g2"), ("n0.g1", "n0.g3"), ("n0.g4", "n0.g6"), ("n0.g5", "n0.g7")}


def test_activations_shrink_by_cp() -> None:
    """Korthikanti's per-layer activations are linear in s once flash attention drops the score term."""
    for cp in (2, 4):
        assert layer_activation_bytes(LLAMA3, 0, 1, 2, True, "none", True, cp) == pytest.approx(
            layer_activation_bytes(LLAMA3, 0, 1, 2, True, "none", True) / cp
        )


@pytest.mark.parametrize("hop_s", [0.0, 1e-4, 5e-3])
def test_ring_critical_path(hop_s: float) -> None:
    """Replaying one forward with every CP all-gather taking ``(cp - 1) x hop`` gives the ring's critical path:
    the exchange runs beside the first cp - 1 steps, the last step waits for it."""
    cp = 4
    plan = _plan(cp, tp=1, sequence_parallel=False, global_batch=2)
    wl = plan.workload
    base = replay(wl).iteration_time
    slow = replay(wl, lambda op: (cp - 1) * hop_s if op.dim == "cp" else 0.0).iteration_time
    progs = L.LayerContext(get_model("llama2-7b"), 1, 1, False, 1, "none", True, False, cp)
    from hetero_ns3.compute.gpus import get_gpu
    from hetero_ns3.compute.roofline import Roofline

    gpu, roof = get_gpu("H100-SXM"), Roofline("bf16")
    exposed = 0.0
    for backward in (False, True):
        steps = L.cp_attention_steps(progs, backward)
        overlapped = roof.time(steps[1].kernels, gpu)[2]
        exposed += max(0.0, (cp - 1) * hop_s - overlapped)
    layers, mb = 32, plan.replica_microbatches[0]
    assert slow - base == pytest.approx(exposed * layers * mb, rel=1e-6, abs=1e-9)


@pytest.mark.parametrize(
    ("sets", "needle"),
    [
        (["parallelism.cp=3"], "parallelism.cp (3) must divide dp (8)"),
        (["parallelism.cp=2", "model.seq_len=2050"], "model.seq_len (2050) must be a multiple of 2 x parallelism.cp"),
        (["parallelism.cp=2", "compute.flash_attention=false"], "parallelism.cp (2) needs fused attention"),
        (
            ["parallelism.cp=8", "parallelism.cp_comm_type=a2a", "model.kv_heads=4"],
            "parallelism.cp (8) must divide model.kv_heads / tp (4 / 1) for cp_comm_type = 'a2a'",
        ),
        (["parallelism.cp=2", "parallelism.cp_comm_type=ring"], "parallelism.cp_comm_type ('ring') is not a valid"),
        (["parallelism.cp=2", "parallelism.dp=4"], "set dp = 8 or dp = 0 to derive it (dp counts the CP ranks"),
    ],
)
def test_bad_cp_inputs_exit_2_naming_the_field(tmp_path, sets: list[str], needle: str) -> None:
    scen = tmp_path / "s.toml"
    scen.write_text(
        '[model]\nname = "llama2-7b"\nseq_len = 2048\n\n[parallelism]\ntp = 1\nglobal_batch = 16\n\n'
        '[cluster]\n[[cluster.groups]]\nname = "h"\ngpu_type = "H100-SXM"\nnodes = 1\ngpus_per_node = 8\n'
    )
    argv = ["plan", str(scen)] + [a for s in sets for a in ("--set", s)]
    res = run_cli(argv)
    assert_clean(res, argv)
    assert res.rc == 2 and needle in res.err, res.err


def test_ring_traffic_runs_on_the_flow_level_backend(tmp_path) -> None:
    """A small CP run end to end (analytic backend): the ring's flows are category ``cp``, go between the two
    ranks of each ring (two GPUs apart on one node under tp 2 and order tp-dp-pp) and carry at least the
    closed-form payload, (cp - 1) K / V blocks forward and twice that backward per layer, microbatch and rank
    (at most twice it: the LL protocol's flag bytes)."""
    from pathlib import Path

    import pandas as pd

    topo = Path(__file__).resolve().parents[1] / "data" / "two-node-h100.toml"
    scen = tmp_path / "cp.toml"
    scen.write_text(
        '[model]\nname = "gpt3-125m"\nseq_len = 1024\n\n[parallelism]\ntp = 2\npp = 2\ncp = 2\nglobal_batch = 8\n'
        'micro_batch = 1\nsequence_parallel = true\norder = "tp-dp-pp"\n\n'
        f'[cluster]\ntopology = "{topo}"\n\n[run]\nbackend = "analytic"\n'
    )
    argv = ["run", str(scen), "--out", str(tmp_path / "run"), "--no-progress"]
    res = run_cli(argv)
    assert_clean(res, argv, allowed=(0,))
    tasks = pd.read_csv(tmp_path / "run" / "tasks.csv")
    flows = tasks[(tasks.kind == "flow") & (tasks.category == "cp")]
    assert len(flows)
    pairs = {tuple(sorted((a, b))) for a, b in zip(flows.src, flows.dst, strict=True)}
    for a, b in pairs:
        (na, ga), (nb, gb) = (x.lstrip("n").split(".g") for x in (a, b))
        assert na == nb and abs(int(ga) - int(gb)) == 2, (a, b)
    model = get_model("gpt3-125m")  # 12 heads of 64, 12 layers: 6 per stage
    block = 2 * 2 * (1024 // 2) * (model.n_kv_heads // 2) * model.head_dim
    payload = 16 * (8 // 2) * 6 * 3 * block  # ranks x microbatches per replica x layers x blocks (fwd 1 + bwd 2)
    assert payload <= flows.size_bytes.sum() <= 2 * payload
