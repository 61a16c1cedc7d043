"""Packed sequences (``[model] document_len``): documents attending within themselves, checked against the unpacked
kernels of short sequences, the closed-form FLOPs and the refusals."""

from __future__ import annotations

import subprocess
import sys
from dataclasses import replace

import pytest

from hetero_ns3.compute.gpus import get_gpu
from hetero_ns3.compute.roofline import Roofline
from hetero_ns3.errors import ScenarioError
from hetero_ns3.scenario.loader import load_scenario
from hetero_ns3.workload import layers as L
from hetero_ns3.workload.attention import attention_core, flash_attention_kernels
from hetero_ns3.workload.compiler import layer_context
from hetero_ns3.workload.models import get_model
from hetero_ns3.workload.parallel import ParallelismSpec
from hetero_ns3.workload.planner import plan_scenario

BASE = replace(get_model("llama3-8b"), seq_len=4096)
PLAN = ParallelismSpec(tp=2, micro_batch=2, global_batch=8)


def _ctx(doc: int) -> L.LayerContext:
    return layer_context(replace(BASE, document_len=doc), PLAN, True, "te")


@pytest.mark.parametrize("backward", [False, True])
def test_packed_attention_is_attention_over_short_sequences(backward) -> None:
    doc = 256
    packed = attention_core(_ctx(doc), backward)
    m, t = BASE, PLAN.tp
    short = flash_attention_kernels(2 * 4096 // doc, doc, m.heads // t, m.n_kv_heads // t, m.head_dim, True, backward)
    assert packed == short
    whole = attention_core(_ctx(0), backward)
    core = [k for k in packed if k.op != "memory"]
    full = [k for k in whole if k.op != "memory"]
    assert sum(k.flops for k in core) == pytest.approx(sum(k.flops for k in full) * doc / 4096, rel=1e-12)
    # the element-wise passes over Q, O and dQ touch the same elements
    assert [k.bytes for k in packed if k.op == "memory"] == [k.bytes for k in whole if k.op == "memory"]


def test_packed_attention_time_on_h100() -> None:
    """Short documents do a sixteenth of the work at a lower rate: cheaper in all, dearer per FLOP."""
    rf, gpu = Roofline(precision="bf16"), get_gpu("H100-SXM")
    for backward in (False, True):
        (packed,) = [k for k in attention_core(_ctx(256), backward) if k.op != "memory"]
        (whole,) = [k for k in attention_core(_ctx(0), backward) if k.op != "memory"]
        tp, tw = rf.kernel_time(packed, gpu), rf.kernel_time(whole, gpu)
        assert tp < tw
        assert packed.flops / tp < whole.flops / tw


def test_model_flops_count_the_documents_squares() -> None:
    packed, whole = replace(BASE, document_len=512), BASE
    b = 8
    scores = sum(whole.attention_score_flops(b, i) for i in range(whole.layers))
    packed_scores = sum(packed.attention_score_flops(b, i) for i in range(packed.layers))
    assert packed_scores == pytest.approx(scores * 512 / 4096, rel=1e-12)
    assert whole.iteration_flops(b) - packed.iteration_flops(b) == pytest.approx(3 * (scores - packed_scores))


SCENARIO = """
[model]
name = "llama3-8b"
seq_len = 4096
layers = 4
document_len = {doc}

[parallelism]
tp = 2
global_batch = 8

[cluster]
topology = "h100-2node"

[compute]
check_memory = false
"""


def test_one_document_per_sequence_is_the_unpacked_plan(tmp_path) -> None:
    plans = []
    for doc in (0, 4096):
        p = tmp_path / f"d{doc}.toml"
        p.write_text(SCENARIO.format(doc=doc))
        plans.append(plan_scenario(load_scenario(p)))
    a, b = plans
    assert a.compute_time == b.compute_time and a.model_flops == b.model_flops and a.executed_flops == b.executed_flops


def test_refusals_name_the_field(tmp_path) -> None:
    p = tmp_path / "s.toml"
    p.write_text(SCENARIO.format(doc=256))
    with pytest.raises(ScenarioError, match=r"model\.document_len \(300\) must divide model\.seq_len \(4096\)"):
        load_scenario(p, ["model.document_len=300"])
    with pytest.raises(ScenarioError, match=r"model\.document_len \(256\) is not modelled with a sliding window"):
        load_scenario(p, ["model.window=1024"])
    with pytest.raises(ScenarioError, match=r"parallelism\.cp \(2\) is not modelled with packed sequences"):
        plan_scenario(load_scenario(p, ["parallelism.cp=2", "parallelism.tp=1"]))
    with pytest.raises(ScenarioError, match=r"compute\.flash_attention \(False\) is not modelled with packed"):
        plan_scenario(load_scenario(p, ["compute.flash_attention=false"]))
    run = subprocess.run(
        [sys.executable, "-m", "hetero_ns3.cli.main", "plan", str(p), "--set", "model.document_len=-1"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert run.returncode == 2 and "model.document_len (-1)" in run.stderr and "Traceback" not in run.stderr
