"""ECMP per connection in the packet-level replay: one (src, dst, category, channel) connection, one path."""

import numpy as np
import pytest

from hetero_ns3.network.config import CcConfig, NetworkConfig, RoutingConfig
from hetero_ns3.plan.builder import PlanBuilder
from hetero_ns3.plan.iterations import repeat_plan
from hetero_ns3.topology import resolve_topology
from hetero_ns3.topology.graph import GraphLink, GraphNode, make_graph

pytestmark = pytest.mark.ns3

HOSTS = [f"h{i}" for i in range(8)]
SIZE = 200_000  # bytes per flow


@pytest.fixture(scope="module")
def leafspine():
    """2 leaves x 4 spines x 4 hosts per leaf: every leaf0 -> leaf1 flow has 4 equal-cost paths."""
    return resolve_topology("leafspine:2,4,4", 100e9, 1e-6)


def _config(ecmp_key: str) -> NetworkConfig:
    # No congestion control: nothing random (no ECN-driven rate draws), FCTs depend on paths only.
    return NetworkConfig(cc=CcConfig(kind="none"), routing=RoutingConfig(ecmp_key=ecmp_key))


def _sequential_plan(n_flows: int):
    """``n_flows`` messages h0 -> h4 one after another, all on one connection (dp, channel 0)."""
    b = PlanBuilder(HOSTS)
    dep = [b.add_compute("h0", 1e-6)]
    for _ in range(n_flows):
        dep = [b.add_flow("h0", "h4", SIZE, deps=dep, label="ring ch0", category="dp")]
    return b.build()


def _spines_used(ports) -> set[str]:
    """Spines whose leaf0 uplink carried DATA."""
    up = ports[ports["node"].eq("leaf0") & ports["peer"].str.startswith("spine") & (ports["tx_data_bytes"] > 0)]
    return set(up["peer"])


def test_one_connection_keeps_one_path_while_per_flow_hashing_spreads(capi, leafspine):
    from hetero_ns3.network.ns3.replay import run_plan

    plan = _sequential_plan(6)
    assert set(plan.flow_connections()[plan.kind == 1]) == {0}
    by_conn = run_plan(leafspine, plan, _config("connection"))
    by_flow = run_plan(leafspine, plan, _config("flow"))
    assert by_conn.completed and by_flow.completed
    spines = _spines_used(by_conn.ports)
    assert len(spines) == 1
    up = by_conn.ports[by_conn.ports["node"].eq("leaf0") & by_conn.ports["peer"].isin(spines)]
    assert int(up["tx_data_bytes"].sum()) == 6 * SIZE  # all six messages crossed that one spine
    assert len(_spines_used(by_flow.ports)) > 1  # today's per-flow ports: the messages spread


def test_default_is_connection_and_flow_mode_matches_the_plain_flow_api(capi, leafspine):
    from hetero_ns3.network.ns3.replay import run_plan

    plan = _sequential_plan(3)
    default = run_plan(leafspine, plan, NetworkConfig(cc=CcConfig(kind="none")))
    explicit = run_plan(leafspine, plan, _config("connection"))
    assert len(_spines_used(default.ports)) == 1
    assert _spines_used(default.ports) == _spines_used(explicit.ports)
    np.testing.assert_array_equal(default.ports["tx_bytes"], explicit.ports["tx_bytes"])


@pytest.fixture(scope="module")
def uneven_spines():
    """h0 - leaf0 = {spine0, spine1, spine2} = leaf1 - h1; equal hop counts (ECMP over all three spines)
    but spine k's links are (1 + 2k) us long, so a flow's FCT tells which spine it took."""
    nodes = [GraphNode(h, "host") for h in ("h0", "h1")]
    nodes += [GraphNode(s, "switch") for s in ("leaf0", "leaf1", "spine0", "spine1", "spine2")]
    links = [GraphLink("h0", "leaf0", 100e9, 1e-6), GraphLink("h1", "leaf1", 100e9, 1e-6)]
    links += [GraphLink(leaf, f"spine{k}", 100e9, (1 + 2 * k) * 1e-6) for leaf in ("leaf0", "leaf1") for k in range(3)]
    return make_graph(nodes, links)


def _channels_plan():
    """One iteration: three messages h0 -> h1 one after another, on channels 0, 1, 2 (three connections).

    One message at a time: nothing is congested, so a message's FCT depends on its path only."""
    b = PlanBuilder(["h0", "h1"])
    dep = [b.add_compute("h0", 1e-6)]
    for ch in range(3):
        dep = [b.add_flow("h0", "h1", SIZE, deps=dep, label=f"ring ch{ch}", category="dp")]
    return b.build()


def _fcts_per_iteration(graph, ecmp_key: str, iterations: int) -> np.ndarray:
    from hetero_ns3.network.ns3.replay import run_plan

    rep = repeat_plan(_channels_plan(), iterations)
    res = run_plan(graph, rep.plan, _config(ecmp_key))
    assert res.completed
    it = rep.iteration[res.flows["task"].to_numpy()]
    fct = res.flows["fct_s"].to_numpy()
    return np.stack([fct[it == k] for k in range(iterations)])


def test_iterations_repeat_exactly_when_hashing_per_connection(capi, uneven_spines):
    fct = _fcts_per_iteration(uneven_spines, "connection", 4)
    for k in range(1, 4):
        np.testing.assert_allclose(fct[k], fct[0], rtol=1e-9)


def test_per_flow_hashing_changes_paths_between_iterations(capi, uneven_spines):
    # The witness that the test above can fail: the same plan hashed per flow task sends later
    # iterations' messages over other spines (other delays), hence other FCTs.
    fct = _fcts_per_iteration(uneven_spines, "flow", 4)
    assert not all(np.allclose(fct[k], fct[0], rtol=1e-6) for k in range(1, 4))
