"""The C ABI (ctypes) run path against the cppyy path: same arrays bit for bit; no ns-3 import on it.

Each case runs once through ``engine="capi"`` (the run path) and once through ``engine="cppyy"``
(the same C++ calls through cppyy) and compares every returned table exactly (NaN == NaN).
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from hetero_ns3.collectives import CollectiveCall, CollectiveEnv, plan_collective
from hetero_ns3.network.config import BufferConfig, CcConfig, NetworkConfig, NicConfig, PfcConfig
from hetero_ns3.network.ns3.attributes import ATTRIBUTE_MAP
from hetero_ns3.plan.builder import PlanBuilder
from hetero_ns3.topology import resolve_topology

pytestmark = pytest.mark.ns3

REPO = Path(__file__).resolve().parent.parent.parent
RATE, DELAY = 100e9, 1e-6


def _incast(n: int, size: int) -> pd.DataFrame:
    return pd.DataFrame(
        {"src": [f"h{i}" for i in range(1, n + 1)], "dst": ["h0"] * n, "size_bytes": [size] * n, "start_s": [0.0] * n}
    )


def _same_frames(a: pd.DataFrame, b: pd.DataFrame) -> None:
    pd.testing.assert_frame_equal(a, b, check_exact=True)


def test_every_mapped_attribute_exists_through_the_c_abi(capi):
    from hetero_ns3.network.ns3.capi import CapiEngine

    eng = CapiEngine()
    for b in ATTRIBUTE_MAP:
        assert eng.attribute_exists(f"{b.type_id}::{b.attribute}"), f"{b.type_id}::{b.attribute} ({b.path}) is missing"
    assert not eng.attribute_exists("ns3::RoceSwitch::NoSuchAttribute")
    assert not eng.attribute_exists("ns3::NoSuchType::Rate")


def test_a_rejected_attribute_value_is_an_error_not_an_abort(capi):
    from hetero_ns3.errors import SimulationError
    from hetero_ns3.network.ns3.capi import CapiEngine

    with pytest.raises(SimulationError, match="NoSuchAttribute"):
        CapiEngine().set_default("ns3::RoceSwitch::NoSuchAttribute", "1")


FLOW_CASES = {
    "incast_pfc_none": ("star:9", _incast(8, 600_000), NetworkConfig(cc=CcConfig(kind="none"))),
    "incast_pfc_dcqcn": ("star:9", _incast(8, 600_000), NetworkConfig(cc=CcConfig(kind="dcqcn"))),
    "incast_pfc_hpcc": ("star:9", _incast(8, 600_000), NetworkConfig(cc=CcConfig(kind="hpcc"))),
    "pfc_off_drops": (
        "star:9",
        _incast(8, 1_000_000),
        NetworkConfig(
            cc=CcConfig(kind="none"),
            pfc=PfcConfig(enabled=False),
            buffer=BufferConfig(switch_buffer_bytes=300_000),
            nic=NicConfig(retransmit_timeout_s=100e-6),
        ),
    ),
    "leafspine_ecmp": (
        "leafspine:2,2,2",
        pd.DataFrame({"src": ["h0", "h1"], "dst": ["h2", "h3"], "size_bytes": [500_000] * 2, "start_s": [0.0, 3e-6]}),
        NetworkConfig(),
    ),
}


@pytest.mark.parametrize("case", list(FLOW_CASES))
def test_flows_same_bits_through_c_abi_and_cppyy(native, case):
    from hetero_ns3.network.ns3.roce import egress_port, simulate_flows

    topology, flows, cfg = FLOW_CASES[case]
    graph = resolve_topology(topology, RATE, DELAY)
    sample = [egress_port(graph, "sw0", "h0")] if topology.startswith("star") else []
    runs = [
        simulate_flows(graph, flows, cfg, seed=5, sample_ports=sample, sample_interval_s=2e-6, engine=e)
        for e in ("capi", "cppyy")
    ]
    a, b = runs
    assert a.completed == len(flows)
    _same_frames(a.flows, b.flows)
    _same_frames(a.ports, b.ports)
    _same_frames(a.queues, b.queues)
    assert (a.events, a.sim_time_s) == (b.events, b.sim_time_s)
    if sample:
        assert len(a.queues) > 10


def test_replay_same_bits_through_c_abi_and_cppyy_with_faults(native):
    from hetero_ns3.network.ns3.replay import LinkFault, run_plan

    graph = resolve_topology("star:4", RATE, DELAY)
    hosts = ["h0", "h1", "h2", "h3"]
    b = PlanBuilder(hosts)
    call = CollectiveCall("all_reduce", tuple(hosts), 4 * 2**20, algo="ring", protocol="Simple", channels=2)
    plan_collective(b, call, CollectiveEnv.from_graph(graph))
    plan = b.build()
    faults = (LinkFault("h1", "sw0", at_s=20e-6, rate_factor=0.5),)
    cfg = NetworkConfig(cc=CcConfig(kind="dcqcn"))
    a, b = (run_plan(graph, plan, cfg, seed=2, link_faults=faults, engine=e) for e in ("capi", "cppyy"))
    assert a.completed and b.completed
    np.testing.assert_array_equal(a.times.start_s, b.times.start_s)
    np.testing.assert_array_equal(a.times.finish_s, b.times.finish_s)
    _same_frames(a.flows, b.flows)
    _same_frames(a.ports, b.ports)
    # (events and sim_time_s count to the end of the last slice of simulated time, whose length
    # adapts to wall time: they are not part of the comparison.)


@pytest.mark.slow
def test_demo_same_bits_through_c_abi_and_cppyy(native, tmp_path, monkeypatch):
    """``scenarios/demo.toml`` through the ns3 backend, both ways: same task times, flows and ports."""
    from hetero_ns3.network.ns3 import replay
    from hetero_ns3.pipeline import run_scenario
    from hetero_ns3.scenario.loader import load_scenario

    original = replay.run_plan
    results = {}
    for engine in ("capi", "cppyy"):

        def recording(*args, _engine=engine, **kwargs):
            res = original(*args, engine=_engine, **kwargs)
            results[_engine] = res
            return res

        monkeypatch.setattr(replay, "run_plan", recording)
        out = run_scenario(load_scenario(REPO / "scenarios" / "demo.toml"), tmp_path / engine, backend="ns3")
        results[f"{engine}_iteration_s"] = out.summary.iteration_time_s
    a, b = results["capi"], results["cppyy"]
    np.testing.assert_array_equal(a.times.start_s, b.times.start_s)
    np.testing.assert_array_equal(a.times.finish_s, b.times.finish_s)
    _same_frames(a.flows, b.flows)
    _same_frames(a.ports, b.ports)
    assert results["capi_iteration_s"] == results["cppyy_iteration_s"]
    # Cross-check against the flow level's golden demo figure (tests/data/golden): the two backends agree on
    # this uncongested-ish case within the documented packet/flow gap.
    golden = json.loads((REPO / "tests" / "data" / "golden" / "demo-analytic.json").read_text())
    assert results["capi_iteration_s"] == pytest.approx(golden["iteration_time_s"], rel=0.15)


_NO_NS = """
import json, sys
import pandas as pd
from hetero_ns3.network.ns3.replay import run_plan
from hetero_ns3.network.ns3.roce import simulate_flows
from hetero_ns3.plan.builder import PlanBuilder
from hetero_ns3.topology import resolve_topology
g = resolve_topology("star:2", 100e9, 1e-6)
f = simulate_flows(g, pd.DataFrame({"src": ["h0"], "dst": ["h1"], "size_bytes": [10**5], "start_s": [0.0]}))
b = PlanBuilder(["h0", "h1"])
b.add_flow("h0", "h1", 1024, deps=[b.add_compute("h0", 1e-6)])
r = run_plan(g, b.build())
bad = sorted(m for m in sys.modules if m.split(".")[0] in ("ns", "cppyy", "cppyy_backend", "libcppyy"))
print(json.dumps({"done": bool(r.completed) and int(f.completed), "imported": bad}))
"""


def test_run_path_does_not_import_ns_or_cppyy(capi):
    proc = subprocess.run([sys.executable, "-c", _NO_NS], capture_output=True, text=True, check=True, cwd=REPO)
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    assert out["done"] == 1
    assert out["imported"] == []


def test_cli_collective_ns3_does_not_import_ns_or_cppyy(capi):
    code = (
        "import sys, runpy\n"
        "sys.argv = ['hetero-ns3', 'collective', 'all_reduce', '--topology', 'star:2', '--gpus', '2',"
        " '--sizes', '1KiB', '--backend', 'ns3']\n"
        "from hetero_ns3.cli.main import main\n"
        "rc = main(sys.argv[1:])\n"
        "bad = sorted(m for m in sys.modules if m.split('.')[0] in ('ns', 'cppyy', 'cppyy_backend', 'libcppyy'))\n"
        "print('RESULT', rc, bad)\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=REPO)
    assert proc.stdout.strip().splitlines()[-1] == "RESULT 0 []", proc.stdout + proc.stderr


def test_preload_takes_ns3_from_this_environment() -> None:
    """A cached module may have been linked from another venv (its RUNPATH names that venv, and the cache
    key has no paths); the loader first maps this environment's ns-3 libraries, so such a module still
    loads after that venv is gone. In a fresh process: the libraries mapped are this wheel's."""
    code = (
        "import json\n"
        "from pathlib import Path\n"
        "from hetero_ns3.network.native_build import find_ns3_wheel, preload_ns3_libraries\n"
        "w = find_ns3_wheel()\n"
        "got = preload_ns3_libraries()\n"
        "maps = Path('/proc/self/maps').read_text()\n"
        "print(json.dumps([[p.name for p in got], all(str(p.resolve()) in maps or str(p) in maps for p in got),\n"
        "      [f'lib{w.library_name(m)}.so' for m in ('core', 'network')]]))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.strip()
    names, mapped, want = json.loads(out)
    assert names == want and mapped
