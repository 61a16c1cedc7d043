"""The kernel table (``hetero-ns3 plan --kernels``): one row per kernel and collective of each layer kind's programs,
timed alone; the rows add up to what the compiler charges."""

from __future__ import annotations

import csv
import math
from dataclasses import replace

import pytest

from hetero_ns3.compute.config import ComputeConfig
from hetero_ns3.scenario.cluster import ClusterSection, NodeGroupSpec, inline_gpus
from hetero_ns3.workload.compiler import StepPrograms
from hetero_ns3.workload.kernel_table import COLUMNS, format_rows, kernel_rows
from hetero_ns3.workload.models import get_model
from hetero_ns3.workload.parallel import ParallelismSpec
from hetero_ns3.workload.planner import program_time, resolve
from hetero_ns3.workload.steps import Compute
from tests.cli_harness import assert_clean, run_cli

OSS = replace(get_model("gpt-oss-120b"), layers=4, seq_len=1024)
GPUS = inline_gpus(ClusterSection(groups=(NodeGroupSpec("H100-SXM", 1, 8),)))
EP8 = ParallelismSpec(tp=1, pp=1, dp=8, ep=8, global_batch=16, micro_batch=2)


def _progs() -> StepPrograms:
    return StepPrograms(resolve(OSS, EP8, GPUS, ComputeConfig(check_memory=False)).spec)


def test_rows_sum_to_the_programs_compute_time() -> None:
    """Per layer kind and program, the kernels' seconds add up to the compiler's compute time of that program, and
    every collective of the program is listed with its NCCL size and no roofline time."""
    progs = _progs()
    rows = kernel_rows(progs, ["H100-SXM"])
    kinds = {(r.layer, r.layer_kind) for r in rows if r.layer >= 0}
    assert kinds == {(0, "moe window 128"), (1, "moe")}
    for layer, _ in kinds:
        for what in ("layer_f", "layer_b"):
            mine = [r for r in rows if r.program == what and r.layer == layer]
            total = sum(r.seconds for r in mine if not math.isnan(r.seconds))
            assert total == pytest.approx(program_time(progs, "H100-SXM", (what,), layer), rel=1e-12)
            comms = [r for r in mine if math.isnan(r.seconds)]
            steps = progs.program(what, layer)
            assert len(comms) == sum(not isinstance(s, Compute) and hasattr(s, "collective") for s in steps)
            assert all(r.bytes > 0 and r.group == "ep" for r in comms)
    for what in ("emb_f", "emb_b", "head_f", "head_b"):
        assert any(r.program == what and r.layer == -1 for r in rows)


def test_executed_flops_and_rates() -> None:
    """GEMMs execute all their FLOPs; a causal attention kernel a little over half of its square (the tiles on and
    below the diagonal, 9/16 of 8 x 8 at 1024 tokens, times the head dimension's padding to the kernel's tile); no
    kernel runs above the GPU's dense BF16 peak (989 TFLOP/s on H100 SXM)."""
    rows = kernel_rows(_progs(), ["H100-SXM"])
    gemms = [r for r in rows if r.op == "gemm"]
    assert gemms and all(r.executed_flops == r.flops for r in gemms)
    full = next(r for r in rows if r.kernel == "attn.core" and r.layer == 1)
    assert 9 / 16 <= full.executed_flops / full.flops < 0.7
    assert all(0 <= r.tflops_per_s < 989.5 for r in rows)
    assert all(r.executed_flops == 0 and r.tflops_per_s == 0 for r in rows if r.op == "memory")


def test_bad_program_name_is_refused() -> None:
    with pytest.raises(ValueError, match="layer_x"):
        kernel_rows(_progs(), ["H100-SXM"], ("layer_x",))


def test_plan_kernels_prints_and_writes_the_table(tmp_path) -> None:
    """``hetero-ns3 plan --kernels --out DIR`` on the shipped example: a block per program, kernels.csv with the
    documented columns and the rows ``kernel_rows`` gives."""
    argv = ["plan", "scenarios/plan_example.toml", "--kernels", "--out", str(tmp_path)]
    res = run_cli(argv)
    assert_clean(res, argv, allowed=(0,))
    assert "layer forward layer 0" in res.out and "total compute" in res.out and "kernels.csv" in res.out
    with open(tmp_path / "kernels.csv", newline="") as fh:
        table = list(csv.DictReader(fh))
    assert tuple(table[0]) == COLUMNS
    assert {r["program"] for r in table} == {"layer_f", "layer_b", "emb_f", "emb_b", "head_f", "head_b"}
    assert all(float(r["seconds"]) > 0 for r in table if r["group"] == "")
    assert format_rows([]) == ""
    totals = [ln for ln in res.out.splitlines() if "total compute" in ln]
    assert totals and all("%)" in ln for ln in totals)


def test_shares_add_up() -> None:
    """Each program's total line splits its compute into GEMM, attention and memory-bound shares summing to 100%."""
    import re

    text = format_rows(kernel_rows(_progs(), ["H100-SXM"], ("layer_f", "layer_b")))
    for ln in (x for x in text.splitlines() if "total compute" in x):
        shares = [int(v) for v in re.findall(r"(\d+)%", ln)]
        assert 98 <= sum(shares) <= 102 and re.search(r"gemm \d+%", ln) and re.search(r"attention \d+%", ln)


def test_plan_kernels_json_carries_the_rows() -> None:
    """Under ``--json`` the summary carries the rows as its ``kernels`` list (a collective's time null, valid JSON)."""
    import json

    argv = ["plan", "hetero_ns3/data/validation/heldout/gpt-oss-120b-gb300x64.toml", "--kernels", "--json"]
    res = run_cli(argv)
    assert_clean(res, argv, allowed=(0,))
    doc = json.loads(res.out)
    kernels = doc["kernels"]
    assert tuple(kernels[0]) == COLUMNS
    comms = [k for k in kernels if k["op"] == "all_to_all"]
    assert comms and all(k["seconds"] is None and k["group"] == "ep" for k in comms)
    assert any(k["kernel"] == "act.clamp" and k["seconds"] > 0 for k in kernels)


def test_layer_kinds_first_layer_and_count() -> None:
    """GPT-OSS's 36 layers alternate windowed and full attention from the first: two kinds, first layers 0 and 1,
    18 layers each; a dense model without a window has one kind."""
    kinds = get_model("gpt-oss-120b").layer_kinds()
    assert kinds == {("moe", 128): (0, 18), ("moe", 0): (1, 18)}
    assert get_model("llama3-8b").layer_kinds() == {("dense", 0): (0, 32)}
