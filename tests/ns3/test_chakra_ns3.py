"""A Chakra trace replayed packet by packet: our exported workload, imported, on ns-3 and the flow level."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

pytest.importorskip("chakra.schema.protobuf.et_def_pb2")

from hetero_ns3.pipeline import run_scenario  # noqa: E402
from hetero_ns3.scenario.loader import scenario_from_dict  # noqa: E402
from hetero_ns3.scenario.workload import WorkloadSection  # noqa: E402
from hetero_ns3.workload.chakra_export import export_chakra  # noqa: E402
from hetero_ns3.workload.planner import plan_scenario  # noqa: E402

pytestmark = [pytest.mark.ns3, pytest.mark.slow]

DATA = Path(__file__).resolve().parent.parent / "data"
TOY = {"name": "toy", "layers": 2, "hidden": 2048, "heads": 16, "ffn_hidden": 8192, "vocab": 512, "seq_len": 1024}
PAR = {"tp": 8, "pp": 1, "global_batch": 2, "micro_batch": 1, "zero_stage": 1}


def test_imported_trace_runs_on_both_backends(native, tmp_path):
    # As test_backends_agree_within_5_percent_without_congestion (test_cosim_ns3.py): no shared port, so
    # the two backends agree; the imported plan is the compiled one, so the flow level gives its time exactly.
    # Every call in detail on both sides (the default `auto` would fuse the compiled plan's TP calls on
    # the flow level: the same time up to float summation order, not bit for bit).
    raw = {"model": TOY, "parallelism": PAR, "cluster": {"topology": str(DATA / "two-node-h100.toml")},
           "collectives": {"tp": {"algo": "ring"}}, "run": {"reuse_isolated_collectives": "off"}}  # fmt: skip
    sc = scenario_from_dict(raw)
    export_chakra(plan_scenario(sc).workload, tmp_path / "et")
    imported = dataclasses.replace(sc, model=None, parallelism=None, workload=WorkloadSection(str(tmp_path / "et")))
    compiled = run_scenario(sc, tmp_path / "compiled", backend="analytic")
    flow = run_scenario(imported, tmp_path / "analytic", backend="analytic")
    packet = run_scenario(imported, tmp_path / "ns3", backend="ns3")
    assert flow.summary.iteration_time_s == compiled.summary.iteration_time_s
    assert packet.stats["flows"] == flow.stats["flows"] > 100
    assert packet.summary.iteration_time_s == pytest.approx(flow.summary.iteration_time_s, rel=0.05)
