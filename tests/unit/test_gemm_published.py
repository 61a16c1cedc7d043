"""Azure's published GEMM size curves against the roofline's shape law (a check of the catalog, not a fit).

Analytic answers: each published rate, as a fraction of its GPU's best published row, against the model's rate as a
fraction of the model's best row (burst: no launch cost, ``sustained`` 1; FP8 operands given, no cast). Stated
bounds: every row whose dimensions are all at least 4096 within 7% (MI300X 13%: hipBLASLt's curve dips at 16384^3);
smaller rows are reported with the errors the docs state.
"""

from __future__ import annotations

import runpy
from dataclasses import replace
from pathlib import Path

import pytest

from hetero_ns3.compute.gemm_published import (
    PUBLISHED_CSV,
    PublishedGemm,
    load_published,
    model_tflops,
    out_of_bound,
    published_residuals,
)
from hetero_ns3.compute.gpus import get_gpu
from hetero_ns3.compute.recipes import cast_elements
from hetero_ns3.compute.roofline import Roofline, default_efficiency
from hetero_ns3.errors import ScenarioError
from hetero_ns3.workload.layers import gemm
from tests.table_helpers import edited_table

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def res():
    return published_residuals(load_published())


def _row(res, gpu: str, m: int, n: int | None = None, k: int | None = None):
    n, k = n or m, k or m
    return next(r for r in res if (r.row.gpu_type, r.row.m, r.row.n, r.row.k) == (gpu, m, n, k))


def test_table_is_sourced_per_row(res):
    rows = [r.row for r in res]
    assert len(rows) == 43
    assert {r.gpu_type for r in rows} == {"A100-SXM-80GB", "H100-SXM", "H200-SXM", "GB200", "MI300X"}
    for r in rows:
        assert r.source.startswith("https://github.com/") and "/blob/" in r.source
        assert len(r.source.split("/blob/")[1].split("/")[0]) == 40  # pinned at a commit


def test_shape_law_follows_every_large_row_within_its_bound(res):
    """From 4096 up the law reproduces each curve: A100 within 3.5%, Hopper and
    Blackwell within 7%, MI300X within 13%."""
    assert not out_of_bound(res)
    large = [r for r in res if r.row.large]
    assert len(large) == 23
    assert max(abs(r.error_pct) for r in large if r.row.gpu_type == "A100-SXM-80GB") < 3.5
    assert max(abs(r.error_pct) for r in large if r.row.gpu_type != "MI300X") < 7.0


def test_small_rows_are_per_call_bound_and_reported(res):
    """1024^3 products (2.1 GFLOP, a few microseconds) run at 12-47% of the best published rate where the burst law
    says 66-74%, and on 2048^3 FP8 the law is 4-38% fast on four GPU types (A100 FP16 within 4%): per-call costs.
    With the catalog's launch cost (3 us) added, as a step's kernels pay it, the 2048^3 rows come within 15% and the
    1024^3 ones within -1 .. +55%."""
    launch = {(r.row.gpu_type, r.row.m, r.row.n, r.row.k): r for r in published_residuals(load_published(), True)}
    for gpu in ("A100-SXM-80GB", "H100-SXM", "H200-SXM", "GB200", "MI300X"):
        r = _row(res, gpu, 1024)
        assert r.measured_rel < 0.5 and r.error_pct > 50
        assert -1.0 < launch[(gpu, 1024, 1024, 1024)].error_pct < 55.0
        assert abs(launch[(gpu, 2048, 2048, 2048)].error_pct) < 15.0
    assert abs(_row(res, "A100-SXM-80GB", 2048).error_pct) < 4
    assert all(4 < _row(res, g, 2048).error_pct < 40 for g in ("H100-SXM", "H200-SXM", "GB200", "MI300X"))


def test_best_rates_against_the_catalog_ceilings(res):
    """Azure's best row against the model's best (burst, catalog ceilings from the MAMF table or AMD's MAF): within
    5.5% on A100, H100, H200 and MI300X (Azure's method runs 1.5-6% under MAMF, docs/compute.md); GB200's 2025
    run at 0.80 of the model, the early-software gap the catalog's MAMF row replaced."""
    for gpu, lo, hi in (
        ("A100-SXM-80GB", 0.945, 1.0),
        ("H100-SXM", 0.98, 1.03),
        ("H200-SXM", 0.94, 0.96),
        ("MI300X", 0.97, 1.01),
        ("GB200", 0.79, 0.82),
    ):
        best_meas = max(r.row.tflops for r in res if r.row.gpu_type == gpu)
        best_model = max(r.model_tflops for r in res if r.row.gpu_type == gpu)
        assert lo < best_meas / best_model < hi, gpu


def test_fp8_rows_are_timed_without_the_cast():
    """The benchmark's operands are FP8 already: the model times the product as Transformer Engine's weight-gradient
    GEMM (which casts nothing), i.e. the forward GEMM's time less its cast and amax passes and their launches."""
    gpu = get_gpu("H100-SXM")
    row = PublishedGemm("H100-SXM", "fp8", 4096, 4096, 4096, 1216.9, "", "https://example.org/x")
    e = replace(default_efficiency(gpu), launch_overhead_s=0.0, sustained=1.0)
    rf = Roofline("fp8", efficiency={gpu.name: e})
    fwd = gemm("fc1", 4096, 4096, 4096)
    t_fwd = rf.kernel_time(fwd, gpu)
    assert cast_elements(fwd) > 0
    assert 2 * 4096**3 / model_tflops(row) / 1e12 < t_fwd
    assert model_tflops(row) == pytest.approx(
        2 * 4096**3 / rf.kernel_time(gemm("fc1.wgrad", 4096, 4096, 4096), gpu) / 1e12
    )


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        (lambda ln: ln.replace(",bf16,", ",,", 1), "data row 2 has no 'precision'"),
        (lambda ln: ln.replace(",bf16,", ",fp4,", 1), "precision 'fp4'"),
        (lambda ln: ln.replace("A100-SXM-80GB,", "H900,", 1), "data row 2: GPU type 'H900' is not in the catalog"),
        (lambda ln: ln.replace(",2048,", ",x,", 1), "data row 2: invalid literal"),
        (lambda ln: ln.replace(",221.8,", ",-1,", 1), "must be positive and finite"),
        (lambda ln: ln.replace(",221.8,", ",inf,", 1), "must be positive and finite"),
        (lambda ln: ln.replace(",https://", ",http://", 1), "give the page's https URL"),
    ],
)
def test_bad_table_names_the_row(tmp_path, edit, message):
    with pytest.raises(ScenarioError, match=message):
        load_published(edited_table(PUBLISHED_CSV, tmp_path, edit))


def test_missing_or_empty_table(tmp_path):
    with pytest.raises(ScenarioError, match="published GEMM table .* does not exist"):
        load_published(tmp_path / "absent.csv")
    (tmp_path / "empty.csv").write_text(PUBLISHED_CSV.read_text().splitlines()[0] + "\n")
    with pytest.raises(ScenarioError, match="no data rows"):
        load_published(tmp_path / "empty.csv")


def test_check_script_passes_and_prints_every_row(capsys):
    mod = runpy.run_path(str(ROOT / "scripts" / "check_gemm_published.py"))
    assert mod["main"](["--check"]) == 0
    out = capsys.readouterr().out
    assert out.count("| yes |") == 23 and out.count("| no |") == 20
    assert "error with launch" in out
