"""PCIe-only nodes: rings cross the root complex once per switch boundary, and the fitted PCIe wire overhead
(docs/collectives.md "PCIe links")."""

from __future__ import annotations

import pytest

from hetero_ns3.collectives import CollectiveCall, CollectiveEnv, busbw_factor, plan_collective
from hetero_ns3.collectives.algorithms.ring import ring_orders
from hetero_ns3.collectives.pcie_fit import P2P_CSV, fit_wire_overhead, load_p2p, residual_table
from hetero_ns3.collectives.tuning import load_tuning
from hetero_ns3.errors import ScenarioError
from hetero_ns3.network.analytic import simulate_plan
from hetero_ns3.paths import PACKAGE_DATA
from hetero_ns3.plan.builder import PlanBuilder
from hetero_ns3.topology import resolve_topology
from hetero_ns3.topology.loader import pcie_rate_bps

HELDOUT = PACKAGE_DATA / "validation" / "heldout"


@pytest.fixture(scope="module")
def two_switch():
    """8 GPUs on two PCIe Gen5 switches of 4 under one root complex (the held-out RTX PRO 6000 node)."""
    graph = resolve_topology(HELDOUT / "rtxpro6000-pcie-8.toml")
    return graph, CollectiveEnv.from_graph(graph)


def _busbw(graph, env, op, size, gpus=None):
    group = env.gpus[: gpus or len(env.gpus)]
    call = CollectiveCall(op, group, size, algo="ring")
    b = PlanBuilder(group)
    plan_collective(b, call, env)
    t = simulate_plan(graph, b.build(), seed=1).times.makespan_s
    return size / t / 1e9 * busbw_factor(op, len(group))


def test_pcie_domains(two_switch):
    _, env = two_switch
    doms = [env.pcie_domain(g) for g in env.gpus]
    assert doms[:4] == ["n0.pcie0"] * 4 and doms[4:] == ["n0.pcie1"] * 4
    nv = CollectiveEnv.from_graph(resolve_topology("dgx-h100-rail"))
    assert nv.pcie_domain(nv.gpus[0]) is None  # NVLink node: GPU traffic never takes the PCIe switches


@pytest.mark.parametrize("channels", [1, 4, 8])
def test_every_channel_crosses_the_root_complex_twice(two_switch, channels):
    _, env = two_switch
    for order in ring_orders(env, env.gpus, channels):
        assert sorted(order) == list(range(8))
        doms = [env.pcie_domain(env.gpus[r]) for r in order]
        crossings = sum(doms[i] != doms[(i + 1) % 8] for i in range(8))
        assert crossings == 2, order  # index order crossed it 4 times on the channel entering at GPU 7


def test_ring_busbw_is_the_link_payload_rate(two_switch):
    """With one flow per PCIe link and direction, a large ring all-reduce / all-gather reaches the link's
    payload rate: Gen5 x16 line rate / the fitted wire overhead (53.6 GB/s) within 2 % (slice pipeline)."""
    graph, env = two_switch
    payload = pcie_rate_bps(5, 16) / 8e9 / load_tuning().links["pcie"].wire_overhead
    for op in ("all_reduce", "all_gather"):
        bw = _busbw(graph, env, op, 1 << 30)
        assert bw == pytest.approx(payload, rel=0.02), op
        assert bw < payload  # never above the wire


def test_fit_reproduces_the_tuning_constant_and_its_residuals():
    rows = load_p2p()
    assert len(rows) == 9 and {r.gen for r in rows} == {4, 5}
    w = fit_wire_overhead(rows)
    assert load_tuning().links["pcie"].wire_overhead == pytest.approx(w, rel=1e-9)
    assert 1.0 / w == pytest.approx(0.8506, abs=1e-4)  # the median P2P efficiency
    res = {r["system"]: float(r["residual_pct"]) for r in residual_table(rows, w)}
    outlier = [s for s in res if s.startswith("3x RTX 4090")]
    assert len(outlier) == 1 and res[outlier[0]] == pytest.approx(29.5, abs=0.1)
    assert all(abs(v) <= 6.0 for s, v in res.items() if s not in outlier)  # docs/collectives.md table
    assert sorted(res.values())[len(res) // 2] == pytest.approx(0.0, abs=0.05)


def test_bad_p2p_table_names_the_row(tmp_path):
    p = tmp_path / "p2p.csv"
    p.write_text(P2P_CSV.read_text().replace(",5,56.26,", ",five,56.26,", 1))
    with pytest.raises(ScenarioError, match=r"data row 1 .*fix that row"):
        load_p2p(p)
    p.write_text("# only a comment\n")
    with pytest.raises(ScenarioError, match="no data rows"):
        load_p2p(p)
    with pytest.raises(ScenarioError, match="P2P table .* does not exist"):
        load_p2p(tmp_path / "missing.csv")


def test_root_complex_pairs_are_flagged(two_switch, capsys):
    """The planner's P2P through the root complex is where NCCL's default would copy through host memory:
    `collective` says so in its header and `topo show` on the group's line; NVLink nodes and one-switch
    groups get no note."""
    from hetero_ns3.cli.main import main
    from hetero_ns3.topology.loader import load_cluster
    from hetero_ns3.topology.summary import summarize

    graph, env = two_switch
    assert env.pcie_root_pairs(env.gpus)
    assert not env.pcie_root_pairs(env.gpus[:4])  # one switch: NCCL's default P2P as simulated
    nv = CollectiveEnv.from_graph(resolve_topology("dgx-h100-rail"))
    assert not nv.pcie_root_pairs(nv.gpus[:8])

    path = str(HELDOUT / "rtxpro6000-pcie-8.toml")
    for ranks, noted in ((None, True), ("n0.g0,n0.g1,n0.g2,n0.g3", False)):
        args = ["collective", "all_reduce", "-t", path, "-s", "1MiB", "-b", "model"]
        assert main(args + (["--ranks", ranks] if ranks else [])) == 0
        out = capsys.readouterr().out
        assert ("#  note: GPUs of different PCIe switches are simulated P2P" in out) is noted

    spec = load_cluster("h3")
    lines = {line.split(":")[0]: line for line in summarize(resolve_topology("h3"), spec).groups}
    assert "(GPUs of different PCIe switches are simulated P2P" in lines["l40s"]
    assert "PCIe switches" not in lines["h100"] and "PCIe switches" not in lines["a100"]


def test_fit_script_checks_the_shipped_constant(capsys):
    import runpy
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]
    mod = runpy.run_path(str(root / "scripts" / "fit_pcie_overhead.py"))
    assert mod["main"](["--check"]) == 0
    out = capsys.readouterr().out
    assert "fitted 1.1756601607" in out and out.count("| 5 |") == 6 and out.count("| 4 |") == 3


def test_runs_on_such_groups_warn_once(caplog):
    from hetero_ns3 import pipeline
    from hetero_ns3.scenario import scenario_from_dict

    pipeline._NOTED_PCIE.clear()
    with caplog.at_level("WARNING", logger="hetero_ns3.pipeline"):
        for _ in range(2):
            pipeline.load_run_cluster(scenario_from_dict({"cluster": {"topology": "h3"}}))
        pipeline.load_run_cluster(scenario_from_dict({"cluster": {"topology": "h0"}}))
    msgs = [r.getMessage() for r in caplog.records if "PCIe switches" in r.getMessage()]
    assert len(msgs) == 1 and "'l40s' (pcie)" in msgs[0] and "NCCL_P2P_LEVEL=SYS" in msgs[0]
