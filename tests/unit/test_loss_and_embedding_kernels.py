"""Loss, rotary-embedding and embedding-gradient kernels, and FP8 current scaling, against the byte counts read
from their sources (docs/workload.md "Loss, rotary and embedding kernels"; docs/compute.md "FP8 scaling recipes")."""

from __future__ import annotations

from dataclasses import replace

import pytest

from hetero_ns3.cli.main import main
from hetero_ns3.compute.gpus import get_gpu
from hetero_ns3.compute.roofline import Roofline
from hetero_ns3.workload import layers as L
from hetero_ns3.workload.models import model_catalog
from hetero_ns3.workload.steps import Compute, gemm

LLAMA, GPT = model_catalog()["llama3-8b"], model_catalog()["gpt3-1.3b"]
H100 = get_gpu("H100-SXM")


def _kernels(steps: list[L.Step]) -> list:
    return [k for s in steps if isinstance(s, Compute) for k in s.kernels]


def _ce_bytes(c: L.LayerContext) -> tuple[float, float]:
    """(forward, backward) loss-kernel bytes per local logit."""
    n = c.tokens * (c.model.padded_vocab(c.tp) // c.tp)
    fwd = sum(k.bytes for k in _kernels(L.head_forward(c)) if k.name.startswith("ce.") and k.name != "ce.pred")
    fwd -= sum(k.bytes for k in _kernels(L.head_forward(c)) if k.name == "ce.loss")  # per-token scalars
    bwd = sum(k.bytes for k in _kernels(L.head_backward(c)) if k.name.startswith("ce."))
    return fwd / n, bwd / n


@pytest.mark.parametrize("tp", [1, 2, 8])
@pytest.mark.parametrize(("impl", "fwd", "bwd"), [("unfused", 38.0, 14.0), ("fused", 26.0, 14.0), ("te", 2.0, 4.0)])
def test_cross_entropy_bytes_per_logit(impl: str, fwd: float, bwd: float, tp: int) -> None:
    """Megatron-Core's unfused loss (FP32 copy, max, subtract, exp, sum, divide; backward product and cast back):
    38 + 14 bytes per local logit; its fused helpers 26 + 14; Transformer Engine's online softmax 2 + 4. The same
    at every TP size: the passes do not depend on how the vocabulary is split (before this, TP 1 left the exp,
    sum and divide out and charged 12 bytes in all)."""
    c = L.LayerContext(LLAMA, 1, tp, tp > 1, 1, "none", cross_entropy=impl)
    assert _ce_bytes(c) == pytest.approx((fwd, bwd), rel=1e-12)


def test_cross_entropy_keeps_the_tp_reductions_and_the_logits_gemm() -> None:
    """The three per-token all-reduces stay between the passes at TP > 1; the logits GEMM is the same for every
    implementation."""
    for impl in ("unfused", "fused", "te"):
        c = L.LayerContext(LLAMA, 2, 4, True, 1, "none", cross_entropy=impl)
        steps = L.head_forward(c)
        assert [s.name for s in steps if isinstance(s, L.Comm)][-3:] == ["ce.ar_max", "ce.ar_pred", "ce.ar_sum"]
        (logits,) = [k for k in _kernels(steps) if k.name == "logits"]
        assert logits == gemm("logits", c.tokens, LLAMA.padded_vocab(4) // 4, LLAMA.hidden)


def test_unfused_loss_on_h100_llama3_8b_closed_form() -> None:
    """Llama 3 8B, 8192 tokens, TP 1, H100: 52 bytes x 8192 x 128256 logits at 0.79 of 3.35 TB/s = 20.6 ms of
    loss kernels per micro-batch (plus launches and 12 bytes of per-token scalars); TE's kernels take 6 / 52 of that."""
    rf = Roofline("bf16")
    times = {}
    for impl in ("unfused", "te"):
        c = L.LayerContext(LLAMA, 1, 1, False, 1, "none", cross_entropy=impl)
        ks = [k for k in _kernels(L.head_forward(c) + L.head_backward(c)) if k.name.startswith("ce.")]
        times[impl] = sum(rf.kernel_time(k, H100) - rf.efficiency(H100).launch_overhead_s for k in ks)
    n = 8192 * 128256
    assert times["unfused"] == pytest.approx((52 * n + 12 * 8192) / (H100.hbm_bw_Bps * 0.79), rel=1e-9)
    assert times["unfused"] == pytest.approx(20.6e-3, rel=0.01)
    assert times["te"] == pytest.approx((6 * n + 12 * 8192) / (H100.hbm_bw_Bps * 0.79), rel=1e-9)


@pytest.mark.parametrize("tp", [1, 4])
def test_rotary_embedding_reads_and_writes_queries_and_keys(tp: int) -> None:
    """Fused RoPE: 2 + 2 bytes per query and key element of the rank (T x (h + kv_dim) / tp) forward, and again in
    backward; GPT's learned absolute positions have none. Under CP the rank's T is b s / cp."""
    for cp in (1, 2):
        c = L.LayerContext(LLAMA, 2, tp, tp > 1, 1, "none", tp_comm_overlap=tp > 1, cp=cp)
        elems = c.tokens * (LLAMA.hidden + LLAMA.kv_dim) // tp
        fwd = [k for k in _kernels(L.attention_forward(c)) if k.name == "rope"]
        bwd = [k for k in _kernels(L.attention_backward(c)) if k.name == "rope.bwd"]
        assert [k.bytes for k in fwd] == [4.0 * elems] and [k.bytes for k in bwd] == [4.0 * elems], cp
    g = L.LayerContext(GPT, 2, tp, tp > 1, 1, "none")
    names = {k.name for k in _kernels(L.attention_forward(g) + L.attention_backward(g))}
    assert not names & {"rope", "rope.bwd"}


def test_full_recompute_reruns_the_rotary_forward() -> None:
    c = L.LayerContext(LLAMA, 1, 1, False, 1, "full")
    assert [k.name for k in _kernels(L.layer_backward(c, 0))].count("rope") == 1


@pytest.mark.parametrize(("grad_bytes", "per_elem"), [(4.0, 12.0), (2.0, 8.0)])
def test_embedding_table_gradient_every_microbatch(grad_bytes: float, per_elem: float) -> None:
    """The dense embedding gradient: a zeroed BF16 table (2 B) added into the main gradient (read g + 2, write g)
    per element of the rank's V / tp x h table, whatever the micro-batch's token count."""
    for tp, b in ((1, 1), (4, 8)):
        c = L.LayerContext(LLAMA, b, tp, tp > 1, 1, "none", main_grad_bytes=grad_bytes)
        (k,) = [k for k in _kernels(L.embedding_backward(c)) if k.name == "emb.table_grad"]
        assert k.bytes == per_elem * (LLAMA.padded_vocab(tp) // tp) * LLAMA.hidden


def test_compiled_programs_take_the_grad_dtype_and_loss_kernels(tmp_path) -> None:
    """The planner passes ``[compute] cross_entropy`` and the gradient-reduce dtype into the step programs."""
    from hetero_ns3.compute.config import ComputeConfig
    from hetero_ns3.workload.compiler import CompileSpec, StepPrograms
    from hetero_ns3.workload.parallel import ParallelismSpec

    plan = ParallelismSpec(tp=1, pp=1, global_batch=1, micro_batch=1, grad_reduce_dtype="bf16")
    spec = CompileSpec(LLAMA, plan, (1,), (1,), ComputeConfig().roofline(), get_gpu, cross_entropy="te")
    ctx = StepPrograms(spec).ctx
    assert (ctx.cross_entropy, ctx.main_grad_bytes) == ("te", 2)
    assert StepPrograms(replace(spec, plan=replace(plan, grad_reduce_dtype="fp32"))).ctx.main_grad_bytes == 4


def test_fp8_current_scaling_adds_one_read_per_cast() -> None:
    """Current scaling: each FP8 cast first reads its 2-byte input for the amax (one pass, one launch more): a
    forward or dgrad GEMM costs 2 / 4 of its cast's memory time more than under delayed scaling; wgrad GEMMs
    (no cast), BF16 kernels and BF16 runs are unchanged."""
    delayed, current = Roofline("fp8"), Roofline("fp8", fp8_recipe="current")
    e = delayed.efficiency(H100)
    bw = H100.hbm_bw_Bps * e.memory
    k = gemm("fc1", 8192, 28672, 4096)
    cast = 4.0 * 8192 * 4096
    assert current.kernel_time(k, H100) - delayed.kernel_time(k, H100) == pytest.approx(
        cast / 2 / bw + e.launch_overhead_s, rel=1e-9
    )
    for same in (gemm("fc1.wgrad", 4096, 28672, 8192), gemm("logits", 8192, 128256, 4096)):
        assert current.kernel_time(same, H100) == delayed.kernel_time(same, H100)
    assert Roofline("bf16", fp8_recipe="current").kernel_time(k, H100) == Roofline("bf16").kernel_time(k, H100)
    with pytest.raises(ValueError, match="fp8_recipe"):
        Roofline("fp8", fp8_recipe="mx")


@pytest.mark.parametrize(("key", "value"), [("compute.cross_entropy", "native"), ("compute.fp8_recipe", "nvfp4")])
def test_bad_choices_exit_2_naming_the_field(key: str, value: str, capsys) -> None:
    assert main(["plan", "scenarios/demo.toml", "--set", f"{key}={value}"]) == 2
    err = capsys.readouterr().err
    assert key in err and value in err and "Traceback" not in err


def test_te_loss_keeps_bf16_logits_in_memory() -> None:
    """The last stage's in-flight logits: Megatron-Core's loss keeps the FP32 softmax (4 B per local logit),
    Transformer Engine's the BF16 logits it later overwrites with the gradient (2 B); other stages unchanged."""
    from hetero_ns3.compute.config import ComputeConfig
    from hetero_ns3.scenario.cluster import ClusterSection, NodeGroupSpec, inline_gpus
    from hetero_ns3.workload.parallel import ParallelismSpec
    from hetero_ns3.workload.planner import resolve

    gpus = inline_gpus(ClusterSection(groups=(NodeGroupSpec("H100-SXM", 1, 8),)))
    plan = ParallelismSpec(tp=2, pp=2, global_batch=8, micro_batch=2)
    mem = {
        impl: {m.stage: m.activations for m in resolve(LLAMA, plan, gpus, ComputeConfig(cross_entropy=impl)).memory}
        for impl in ("unfused", "fused", "te")
    }
    logits = 2 * LLAMA.seq_len * LLAMA.padded_vocab(2) / 2
    assert mem["unfused"] == mem["fused"]
    assert mem["unfused"][1] - mem["te"][1] == pytest.approx(2.0 * logits)
    assert mem["unfused"][0] == mem["te"][0]
