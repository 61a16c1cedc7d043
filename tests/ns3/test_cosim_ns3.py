"""Packet-level co-simulation of whole iterations (ns-3 with the native RoCE module)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from hetero_ns3.errors import ScenarioError, SimulationError
from hetero_ns3.pipeline import run_scenario
from hetero_ns3.scenario.loader import scenario_from_dict

pytestmark = pytest.mark.ns3

DATA = Path(__file__).resolve().parent.parent / "data"
REPO = Path(__file__).resolve().parent.parent.parent
TOY = {"name": "toy", "layers": 4, "hidden": 2048, "heads": 16, "ffn_hidden": 8192, "vocab": 512, "seq_len": 1024}
#: TP inside each node, one data-parallel replica per node: DP traffic crosses the network.
PAR = {"tp": 8, "pp": 1, "global_batch": 2, "micro_batch": 1, "zero_stage": 1}


def _scenario(topology: Path, **sections):
    raw = {"model": TOY, "parallelism": PAR, "cluster": {"topology": str(topology)}}
    raw.update(sections)
    return scenario_from_dict(raw)


def test_backends_agree_within_5_percent_without_congestion(capi, tmp_path):
    # Two identical H100 nodes: each DP pair talks over its own 400G rail, and TP rings send each GPU's
    # traffic to one peer over NVLink: nothing shares a port. (Tree fan-in does share one: there the
    # packet level serves segments in turn while max-min shares them; see docs/cosim.md.)
    sc = _scenario(DATA / "two-node-h100.toml", collectives={"tp": {"algo": "ring"}})
    packet = run_scenario(sc, tmp_path / "ns3", backend="ns3")
    flow = run_scenario(sc, tmp_path / "analytic", backend="analytic")
    assert packet.stats["flows"] > 100
    assert packet.summary.iteration_time_s == pytest.approx(flow.summary.iteration_time_s, rel=0.05)


def test_congestion_control_changes_a_congested_iteration(capi, tmp_path):
    # H100 NICs (400G) send DP traffic into A100 NICs (200G) on the same rail: the rail switch queues.
    topo = REPO / "topologies" / "mixed-2node.toml"
    iters = {}
    for cc in ("dcqcn", "hpcc"):
        out = run_scenario(_scenario(topo, network={"cc": {"kind": cc}}), tmp_path / cc, backend="ns3")
        iters[cc] = out.summary.iteration_time_s
        ports = json.loads((out.paths.root / "summary.json").read_text())
        assert ports["status"] == "ok"
    assert iters["dcqcn"] != iters["hpcc"]
    assert abs(iters["dcqcn"] - iters["hpcc"]) / iters["hpcc"] > 1e-4


def test_a_failed_nic_link_names_the_gpu_on_the_packet_level(capi, tmp_path):
    """The packet level attaches these GPUs directly (``nic_attach`` auto): a fault on a NIC node's link says so."""
    sc = _scenario(
        DATA / "two-node-h100.toml",
        faults={"links": [{"a": "n0.nic0", "b": "rail0.0", "rate_factor": 0.0, "at": 0.0}]},
    )
    with pytest.raises(
        ScenarioError, match=r"'n0\.nic0'\) is not a node.*name the GPU \(e\.g\. 'n0\.g0'.*nic_attach = 'pcie'"
    ):
        run_scenario(sc, tmp_path / "nic", backend="ns3")


def test_a_failing_run_leaves_its_partial_tables(capi, tmp_path):
    # The only network link of GPU n0.g0 (its NIC, attached directly) fails at t=0 and no route avoids it:
    # its DP flows never finish.
    sc = _scenario(
        DATA / "two-node-h100.toml",
        faults={"links": [{"a": "n0.g0", "b": "rail0.0", "rate_factor": 0.0, "at": 0.0}]},
        run={"stall_limit": "3ms"},
    )
    out = tmp_path / "failed"
    with pytest.raises(SimulationError, match="stalled"):
        run_scenario(sc, out, backend="ns3")
    summary = json.loads((out / "summary.json").read_text())
    assert summary["status"] == "failed" and "stalled" in summary["reason"]
    assert (out / "tasks.csv").is_file() and (out / "scenario.resolved.json").is_file()
    tasks = (out / "tasks.csv").read_text().splitlines()
    assert len(tasks) > 10  # the plan's tasks, with start/finish where they ran


def test_an_interrupted_run_keeps_the_tasks_that_finished(capi, tmp_path):
    calls = []

    def ctrl_c(sim_s, done, total):  # what Ctrl-C does between two slices of simulated time
        calls.append(done)
        if len(calls) == 2:
            raise KeyboardInterrupt

    out = tmp_path / "interrupted"
    with pytest.raises(KeyboardInterrupt):
        run_scenario(_scenario(DATA / "two-node-h100.toml"), out, backend="ns3", progress=ctrl_c)
    summary = json.loads((out / "summary.json").read_text())
    assert summary["status"] == "interrupted"
    import pandas as pd

    tasks = pd.read_csv(out / "tasks.csv")
    finished = tasks.finish_s.notna().sum()
    assert 0 < finished < len(tasks)  # some tasks ran, not all


def test_two_iterations_through_the_packet_backend(capi, tmp_path):
    # The same iteration twice, back to back. The rule adds nothing inside the first iteration, so with
    # the same seed it replays exactly as a one-iteration run; each GPU starts the second once all its
    # tasks of the first are done. (The second is ~3% shorter here: docs/cosim.md, "Several iterations".)
    sc = _scenario(DATA / "two-node-h100.toml", collectives={"tp": {"algo": "ring"}})
    one = run_scenario(sc, tmp_path / "one", backend="ns3")
    two = run_scenario(
        _scenario(DATA / "two-node-h100.toml", collectives={"tp": {"algo": "ring"}}, run={"iterations": 2}),
        tmp_path / "two",
        backend="ns3",
    )
    s = two.summary
    assert s.iterations == 2 and all(t > 0 for t in s.iteration_times_s)
    assert s.iteration_times_s[0] == pytest.approx(one.summary.iteration_time_s, rel=1e-9)
    assert sum(s.iteration_times_s) == pytest.approx(s.makespan_s, rel=1e-9)
    assert s.iteration_time_s == pytest.approx(s.iteration_times_s[1])
    assert s.overall.total_s == pytest.approx(s.iteration_time_s, rel=1e-6)
    import pandas as pd

    tasks = pd.read_csv(two.paths.tasks)
    assert len(tasks) == two.stats["tasks"] == 2 * one.stats["tasks"] and tasks.finish_s.notna().all()
    assert len(pd.read_csv(two.paths.flows)) == 2 * one.stats["flows"]
    by = tasks.groupby(["gpu", "iteration"])
    first_start, last_finish = by.start_s.min().unstack(), by.finish_s.max().unstack()
    assert (first_start[1] >= last_finish[0] - 1e-12).all()
