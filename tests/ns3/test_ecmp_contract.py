"""The ECMP hash contract: the flow-level backend's ``ecmp_hash = "packet"`` routing puts every flow on the
same directed links as the packet backend's switches (``RoceNode::SelectPort``) for the same flows and seed.

The analytic Python/C copy of the switch hash is otherwise only checked against a Python transcription of the
formula (tests/unit/test_analytic_backend.py); this runs the real C++ switches.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from hetero_ns3.network.analytic import AnalyticConfig
from hetero_ns3.network.analytic.routes import link_arrays, route_flows
from hetero_ns3.network.config import NetworkConfig, RoutingConfig
from hetero_ns3.network.ns3.roce import simulate_flows
from hetero_ns3.topology import leaf_spine

pytestmark = pytest.mark.ns3

SIZE = 40_000


@pytest.mark.parametrize("ecmp_seed", [0, 12345])
def test_packet_and_flow_level_routes_cross_the_same_directed_links(capi, ecmp_seed: int) -> None:
    g = leaf_spine(4, 4, 4, 100e9, 1e-6)  # 16 hosts, 4 equal-cost spines between any two leaves
    rng = np.random.default_rng(3)
    src = np.arange(16)
    dst = (src + 4 * rng.integers(1, 4, 16)) % 16  # always another leaf: two ECMP choices per path
    flows = pd.DataFrame(
        {"src": [f"h{i}" for i in src], "dst": [f"h{j}" for j in dst], "size_bytes": SIZE, "start_s": 1e-6 * src}
    )
    config = NetworkConfig(routing=RoutingConfig(ecmp_seed=ecmp_seed))
    packet = simulate_flows(g, flows, config, seed=1)
    assert packet.flows["finish_s"].notna().all()

    acfg = AnalyticConfig(ecmp_hash="packet", ecmp_key="flow")
    links = link_arrays(g, acfg)
    nodes = np.array([g.index(f"h{i}") for i in src]), np.array([g.index(f"h{j}") for j in dst])
    paths = route_flows(g, links, *nodes, np.arange(16), np.full(16, SIZE), acfg, seed=ecmp_seed)
    assert paths.row is None  # one path row per flow
    flows_per_port = np.zeros(2 * len(g.links), np.int64)
    for row, hops in zip(paths.paths, paths.hops, strict=True):
        np.add.at(flows_per_port, row[:hops], 1)

    # Every flow sends the same frames, so a port's data bytes are a whole number of flows' worth.
    data = packet.ports.set_index("port")["tx_data_bytes"].reindex(range(2 * len(g.links)), fill_value=0).to_numpy()
    per_flow = data[flows_per_port == 1]
    assert per_flow.size and np.all(per_flow == per_flow[0])
    np.testing.assert_array_equal(np.rint(data / per_flow[0]).astype(np.int64), flows_per_port)
    # The spine choice is not trivial: the 16 flows use more than one spine.
    spine_ports = [p for p in range(2 * len(g.links)) if packet.ports.loc[p, "node"].startswith("spine")]
    assert len({packet.ports.loc[p, "node"] for p in spine_ports if data[p] > 0}) > 1
