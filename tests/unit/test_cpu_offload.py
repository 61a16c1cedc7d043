"""CPU activation offloading (``[parallelism] cpu_offload_layers``, Megatron-Core's ``cpu_offloading``): the copies'
bytes and rates, the memory they free, their schedule against analytic answers, and the refusals
(docs/workload.md "CPU activation offloading")."""

from __future__ import annotations

import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pytest

from hetero_ns3.collectives.tuning import load_tuning
from hetero_ns3.compute.gpus import get_gpu
from hetero_ns3.errors import ScenarioError
from hetero_ns3.scenario.cluster import ClusterSection, NodeGroupSpec, inline_gpus
from hetero_ns3.topology.loader import pcie_rate_bps
from hetero_ns3.validation import simulate_scenario
from hetero_ns3.workload.memory import layer_activation_bytes
from hetero_ns3.workload.models import get_model
from hetero_ns3.workload.offload import C2C_D2H_FRACTION, C2C_H2D_FRACTION, host_link
from hetero_ns3.workload.parallel import ParallelismSpec
from hetero_ns3.workload.planner import build_plan, resolve
from hetero_ns3.workload.timing import replay

MODEL = replace(get_model("gpt3-1.3b"), layers=8)
ONE = inline_gpus(ClusterSection(groups=(NodeGroupSpec("H100-SXM", 1, 1),)))


def _spec(n: int, m: int = 2, **kw: object) -> ParallelismSpec:
    return ParallelismSpec(global_batch=m * 2, micro_batch=2, cpu_offload_layers=n, **kw)  # type: ignore[arg-type]


def _step(n: int, m: int = 2) -> float:
    """Step time of an earliest-start replay of one GPU's program (no communication)."""
    return max(replay(build_plan(MODEL, _spec(n, m), ONE).workload).end.values())


def test_host_links_from_the_catalog() -> None:
    """GB200 / GB300 copy over NVLink-C2C (450 GB/s a direction) at the GH200-measured fractions; a PCIe GPU at its
    link's rate with the PCIe efficiency the collectives use."""
    for name in ("GB200", "GB300"):
        gpu = get_gpu(name)
        assert gpu.c2c_bw_Bps == pytest.approx(450e9)
        link = host_link(gpu, pcie_rate_bps(5, 16))
        assert link.d2h_Bps == pytest.approx(297e9) and link.h2d_Bps == pytest.approx(375e9)
        assert abs(C2C_D2H_FRACTION - 0.66) < 1e-9 and abs(C2C_H2D_FRACTION - 0.8333) < 1e-4
    pcie = load_tuning().links["pcie"]
    link = host_link(get_gpu("H100-SXM"), pcie_rate_bps(5, 16))
    assert (
        link.d2h_Bps == link.h2d_Bps == pytest.approx(32e9 * 16 * 128 / 130 / 8 * pcie.efficiency / pcie.wire_overhead)
    )
    assert 50e9 < link.d2h_Bps < 56e9  # published pinned copies on Gen5 x16 hosts: ~53-56 GB/s


def test_offloaded_layers_leave_the_gpu_memory() -> None:
    """The activations counted on the GPU drop by exactly the offloaded layers' saved bytes of one micro-batch."""
    base = resolve(MODEL, _spec(0), ONE).memory[0].activations
    for n in (1, 4, 7):
        r = resolve(MODEL, _spec(n), ONE)
        layer = layer_activation_bytes(MODEL, 0, 2, 1, False, "none", True)
        assert r.memory[0].activations == pytest.approx(base - n * layer)
        assert r.spec.offload is not None and r.spec.offload.layer_bytes[0] == pytest.approx(layer)


def test_no_room_to_overlap_exposes_every_copy() -> None:
    """With M - 1 layers offloaded one layer's activations fit on the GPU: each forward waits for the copy-out of the
    layer before it, each backward for its own reload, which starts only when the layer above is done. The step grows
    by exactly (M - 1) x (t_d2h + t_h2d) per micro-batch."""
    m = 3
    off = resolve(MODEL, _spec(MODEL.layers - 1, m), ONE).spec.offload
    assert off is not None
    link = off.links["H100-SXM"]
    per_mb = sum(off.layer_bytes[i] * (1 / link.d2h_Bps + 1 / link.h2d_Bps) for i in range(MODEL.layers - 1))
    assert _step(MODEL.layers - 1, m) - _step(0, m) == pytest.approx(m * per_mb, rel=1e-9)


def test_room_to_overlap_hides_the_copies() -> None:
    """A forward waits for the copy-out of the layer M - N before it, a backward for a reload started M - N layers
    earlier. On a PCIe Gen5 host a 1.3B layer's copy (5.3 ms) outlasts 5 of its layers' forward (0.9 ms each) but not
    6: offloading 1 of 8 layers leaves the step as it is, 2 of 8 lengthen it. The copies are on the program, one out
    and one in per offloaded layer and micro-batch."""
    t0 = _step(0)
    assert _step(1) == pytest.approx(t0, rel=1e-9)
    assert _step(2) > t0 * 1.01
    names = [op.name for op in build_plan(MODEL, _spec(2), ONE).workload.programs[0].ops if op.dim == "offload"]
    assert len(names) == 2 * 2 * 2
    assert sum(n.endswith(".d2h") for n in names) == sum(n.endswith(".h2d") for n in names)


def test_backend_runs_copies_in_order_on_their_own_stream(tmp_path: Path) -> None:
    """Through the lowering and the analytic backend: offloading M - 1 layers on one PCIe H100 costs what the replay
    says (the copies are neither scaled by the GPU's speed nor merged into its compute)."""
    text = (
        '[model]\nname = "gpt3-1.3b"\nlayers = 8\n[parallelism]\nglobal_batch = 4\nmicro_batch = 2\n'
        'cpu_offload_layers = {n}\n[cluster]\ntopology = "{topo}"\n'
    )
    topo = Path(__file__).parents[1] / "data" / "chakra" / "one-gpu.toml"
    steps = {}
    for n in (0, 7):
        path = tmp_path / f"s{n}.toml"
        path.write_text(text.format(n=n, topo=topo))
        steps[n] = simulate_scenario(path)["step_time_s"]
    assert steps[7] - steps[0] == pytest.approx(_step(7) - _step(0), rel=1e-3)


def test_refusals_name_the_field() -> None:
    with pytest.raises(ScenarioError, match=r"parallelism.cpu_offload_layers \(2\) needs parallelism.pp = 1"):
        ParallelismSpec(pp=2, global_batch=8, cpu_offload_layers=2).validate()
    with pytest.raises(ScenarioError, match=r"cpu_offload_layers \(2\) needs parallelism.recompute = 'none'"):
        ParallelismSpec(global_batch=8, recompute="full", cpu_offload_layers=2).validate()
    with pytest.raises(ScenarioError, match=r"cpu_offload_layers \(-1\) must be >= 0"):
        ParallelismSpec(global_batch=8, cpu_offload_layers=-1).validate()
    with pytest.raises(ScenarioError, match=r"cpu_offload_layers \(8\) must be below model.layers \(8\)"):
        build_plan(MODEL, _spec(8), ONE)


def test_cli_exits_2_without_traceback(tmp_path: Path) -> None:
    path = tmp_path / "bad.toml"
    path.write_text(
        '[model]\nname = "gpt3-1.3b"\n[parallelism]\npp = 2\nglobal_batch = 8\ncpu_offload_layers = 4\n'
        '[cluster]\ntopology = "h100-2node"\n'
    )
    run = subprocess.run(
        [sys.executable, "-m", "hetero_ns3.cli.main", "plan", str(path)], capture_output=True, text=True, check=False
    )
    assert run.returncode == 2, run.stderr
    assert "parallelism.cpu_offload_layers (4) needs parallelism.pp = 1" in run.stderr
    assert "Traceback" not in run.stderr
