"""Build and load a C++ module through the same function as the product module, then use it."""

from pathlib import Path

import pytest

from hetero_ns3.network.native_build import ModuleSpec
from hetero_ns3.network.ns3 import ns3env

FIXTURE = Path(__file__).resolve().parent.parent / "native_fixture"
SPEC = ModuleSpec(name="fixture", root=FIXTURE, umbrella_header="fixture-module.h", source_dirs=("model",))


@pytest.mark.ns3
def test_fixture_module_creates_object_by_typeid_and_runs(ns):
    built = ns3env.load_module(SPEC)
    assert built.library.is_file()
    assert ns3env.load_module(SPEC) is built  # idempotent
    factory = ns.ObjectFactory()
    factory.SetTypeId("ns3::TickCounter")
    factory.Set("Limit", ns.UintegerValue(5000))
    factory.Set("Interval", ns.TimeValue(ns.NanoSeconds(10)))
    app = factory.Create().GetObject[ns.TickCounter]()
    node = ns.CreateObject[ns.Node]()
    node.AddApplication(app)
    try:
        ns.Simulator.Run()
        assert app.GetTicks() == 5000
        assert ns.Simulator.Now().GetNanoSeconds() == 5000 * 10
    finally:
        ns.Simulator.Destroy()
