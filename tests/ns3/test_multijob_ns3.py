"""Two jobs sharing the network on the packet backend: per-job results, job ids on flows, and agreement with
the flow-level backend on the same plan (uncongested-ish: within 25%)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from hetero_ns3.pipeline import run_scenario
from hetero_ns3.scenario import load_scenario

pytestmark = pytest.mark.ns3

TWO_JOBS = Path(__file__).resolve().parents[2] / "scenarios" / "two-jobs.toml"


@pytest.mark.slow
def test_two_jobs_run_on_the_packet_backend_with_per_job_results(capi, tmp_path: Path) -> None:
    sc = load_scenario(TWO_JOBS, ["run.job_baselines=false"])
    out = {b: run_scenario(sc, tmp_path / b, backend=b) for b in ("ns3", "analytic")}
    jobs = {b: json.loads((o.paths.root / "summary.json").read_text())["jobs"] for b, o in out.items()}
    assert [j["name"] for j in jobs["ns3"]] == ["a", "b"]
    for pkt, flow in zip(jobs["ns3"], jobs["analytic"], strict=True):
        assert pkt["iteration_time_s"] == pytest.approx(flow["iteration_time_s"], rel=0.25)
        assert pkt["nodes"] == flow["nodes"]
    flows = pd.read_csv(out["ns3"].paths.root / "flows.csv")
    assert set(flows["job"]) == {"a", "b"}
    assert flows.groupby("job").size().to_dict() == {"a": jobs["ns3"][0]["flows"], "b": jobs["ns3"][1]["flows"]}


@pytest.mark.parametrize("spray", [False, True])
def test_per_job_link_bytes_follow_the_switches_own_port_counters(capi, spray: bool) -> None:
    """The packet backend counts wire bytes per port for all jobs together; the per-job split (routed with the
    switches' hash, or the even split of spraying) must add up to those counters on every directed link."""
    from hetero_ns3.jobs import job_of_task, lower_jobs, merged_plan
    from hetero_ns3.network.ns3.backend import Ns3Backend
    from hetero_ns3.pipeline import load_run_cluster
    from hetero_ns3.topology import build_graph

    sc = load_scenario(
        TWO_JOBS,
        [
            "run.job_baselines=false",
            f"network.routing.packet_spray={str(spray).lower()}",
            f"network.nic.reorder_tolerant={str(spray).lower()}",
        ],
    )
    cluster = load_run_cluster(sc)
    graph = build_graph(cluster)
    jobs = lower_jobs(sc, graph, cluster)
    plan, own = merged_plan(jobs)
    group = job_of_task(jobs, own, len(plan))
    backend = Ns3Backend()
    res = backend.run(plan, graph, sc.network, seed=sc.run.seed)
    assert res.completed
    routed = backend.link_load(plan, graph, sc.network, seed=sc.run.seed, group=group, n_groups=2)
    payload = routed.sum(axis=0).reshape(-1)  # per port id (2 * link + direction)
    wire = res.raw.ports.set_index("port")["tx_data_bytes"].reindex(range(payload.size), fill_value=0).to_numpy()
    fabric = np.array([not graph.nodes[graph.index(lk.a)].zone and not graph.nodes[graph.index(lk.b)].zone
                       for lk in graph.links]).repeat(2)  # fmt: skip
    used = wire > 0
    if not spray:  # the same links, exactly: per-flow paths are the switches' own
        np.testing.assert_array_equal(payload > 0, used)
        ratio = wire[used] / payload[used]
        assert ratio.min() >= 1.0 and ratio.max() < 1.03  # headers on top of payload, nothing else
    else:  # spraying (receivers keep out-of-order frames): the expected split; fabric ports within 15% of it
        f = fabric & (payload > 0)
        assert f.sum() >= 8
        ratio = wire[f] / payload[f]
        assert ratio.min() > 0.85 and ratio.max() < 1.2
    # job a and job b both cross the spines when spread (the default placement of this scenario)
    assert (routed[:, fabric.reshape(-1, 2)[:, 0]].sum(axis=(1, 2)) > 0).all()
