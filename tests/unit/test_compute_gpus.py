"""GPU catalog: names of the shared contract, datasheet values, errors."""

from __future__ import annotations

import csv
from pathlib import Path

import pytest

from hetero_ns3.compute.gpus import GpuSpec, get_gpu, gpu_catalog
from hetero_ns3.errors import PlanningError, ScenarioError

CONTRACT_NAMES = [
    "H100-SXM",
    "H100-PCIe",
    "H200-SXM",
    "H800-SXM",
    "H20",
    "A100-SXM-40GB",
    "A100-SXM-80GB",
    "A100-PCIe-80GB",
    "A800-SXM",
    "V100-SXM2",
    "L40S",
    "B200",
    "MI300X",
]


def test_contract_names_present() -> None:
    cat = gpu_catalog()
    for name in CONTRACT_NAMES:
        assert isinstance(cat[name], GpuSpec)
        assert cat[name].name == name
        assert cat[name].source


def test_datasheet_values() -> None:
    h100 = get_gpu("H100-SXM")
    assert h100.bf16_tflops == pytest.approx(989.4)
    assert h100.fp8_tflops == pytest.approx(1978.9)
    assert h100.hbm_bw_Bps == pytest.approx(3.35e12)
    assert h100.nvlink_bw_Bps == pytest.approx(450e9)  # 900 GB/s bidirectional
    assert h100.hbm_bytes == 80 * 2**30
    assert get_gpu("A100-SXM-80GB").peak_flops("bf16") == pytest.approx(312e12)
    assert get_gpu("L40S").nvlink_bw_Bps == 0
    assert get_gpu("A100-SXM-40GB").fp8_tflops is None


_SHARED_CSV = Path(__file__).resolve().parents[3] / "shared" / "reference" / "gpu_specs.csv"
_CSV_ROWS = {  # catalog name -> (gpu, variant) row of the shared reference table
    "H100-SXM": ("H100", "SXM5 80GB"),
    "A100-SXM-80GB": ("A100", "SXM4 80GB"),
    "A100-SXM-40GB": ("A100", "SXM4 40GB"),
    "L40S": ("L40S", "PCIe 48GB"),
    "B200": ("B200", "HGX B200 (1000 W)"),
    "MI300X": ("MI300X", "OAM 192GB"),
    "H200-SXM": ("H200", "SXM 141GB"),
}


@pytest.mark.skipif(not _SHARED_CSV.is_file(), reason="shared reference table not present")
def test_matches_shared_reference_table() -> None:
    rows = {(r["gpu"], r["variant"]): r for r in csv.DictReader(_SHARED_CSV.open())}
    for name, key in _CSV_ROWS.items():
        row, spec = rows[key], get_gpu(name)
        assert spec.bf16_tflops == pytest.approx(float(row["bf16_dense_tflops"])), name
        assert spec.hbm_bw_Bps == pytest.approx(float(row["mem_bw_TBps"]) * 1e12), name
        assert spec.tdp_w == pytest.approx(float(row["tdp_W"])), name


def test_unknown_name_lists_valid() -> None:
    with pytest.raises(ScenarioError, match="H100-SXM"):
        get_gpu("H1000")


def test_missing_precision_is_planning_error() -> None:
    with pytest.raises(PlanningError, match="fp16"):
        get_gpu("V100-SXM2").peak_flops("bf16")
    with pytest.raises(PlanningError):
        get_gpu("A100-SXM-80GB").peak_flops("fp8")
