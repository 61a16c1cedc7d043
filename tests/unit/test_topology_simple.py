"""Inline topologies star:N and leafspine:L,S,H."""

from __future__ import annotations

import pytest

from hetero_ns3.errors import ScenarioError
from hetero_ns3.topology import resolve_topology
from hetero_ns3.topology.routing import routing_tables


def test_star_counts_and_names():
    g = resolve_topology("star:4", link_rate_bps=25e9, link_delay_s=2e-6)
    assert g.host_names() == ["h0", "h1", "h2", "h3"]
    assert [n.name for n in g.nodes if n.kind == "switch"] == ["sw0"]
    assert len(g.links) == 4
    assert all(link.rate_bps == 25e9 and link.delay_s == 2e-6 for link in g.links)


def test_leafspine_counts_and_numbering():
    g = resolve_topology("leafspine:3,2,4")
    assert len(g.host_names()) == 12
    assert len([n for n in g.nodes if n.kind == "switch"]) == 5
    assert len(g.links) == 12 + 3 * 2
    # h4..h7 hang on leaf1
    leaf_of = {link.a: link.b for link in g.links if link.tier == "host-leaf"}
    assert [leaf_of[f"h{i}"] for i in (0, 3, 4, 7, 8)] == ["leaf0", "leaf0", "leaf1", "leaf1", "leaf2"]


def test_leafspine_ecmp_over_all_spines():
    g = resolve_topology("leafspine:2,3,2")
    tables = routing_tables(g)
    dst = g.index("h3")
    leaf0 = g.index("leaf0")
    assert len(tables[dst][leaf0]) == 3


@pytest.mark.parametrize("spec", ["star:0", "star:a", "leafspine:1,2", "leafspine:0,1,1", "torus:4"])
def test_bad_inline_specs(spec):
    with pytest.raises(ScenarioError):
        resolve_topology(spec)
