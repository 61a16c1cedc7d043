"""One entry point from a topology reference (inline spec, preset name or file) to a NetGraph."""

from __future__ import annotations

from pathlib import Path

from hetero_ns3.errors import ScenarioError
from hetero_ns3.topology.build import build_graph
from hetero_ns3.topology.fabric import resolve_nic_attach
from hetero_ns3.topology.graph import NetGraph, make_graph
from hetero_ns3.topology.loader import load_cluster
from hetero_ns3.topology.simple import parse_inline


def resolve_topology(
    spec: str | Path,
    link_rate_bps: float = 100e9,
    link_delay_s: float = 1e-6,
    *,
    nic_attach_auto: str = "pcie",
    routing: str | None = None,
) -> NetGraph:
    """Return the graph of ``spec``.

    ``spec`` is ``star:N`` (hosts ``h0``..``h{N-1}`` on switch ``sw0``), ``leafspine:L,S,H`` (L leaves,
    S spines, H hosts per leaf, hosts numbered leaf by leaf), or a cluster preset name in
    ``topologies/`` / a path to a cluster TOML file (hosts are GPUs ``n3.g5``). ``link_rate_bps``
    (bit/s) and ``link_delay_s`` (s) apply to the inline forms only; cluster files carry their own.
    ``nic_attach_auto``: what a cluster's ``nic_attach = "auto"`` groups become, the ``nic_attach_auto`` of
    the backend the graph is for (``direct`` on the packet level: a GPU with a NIC of its own is its own
    port where it qualifies; ``pcie``, the default, keeps every segment). ``routing`` (``ecmp`` or
    ``dmodk``) overrides the file's ``network.routing``; None keeps it (inline forms: ``ecmp``).
    """
    text = str(spec)
    graph = parse_inline(text, link_rate_bps, link_delay_s)
    if graph is not None:
        return graph if routing is None else make_graph(graph.nodes, graph.links, routing)
    if ":" in text and not Path(text).exists():
        raise ScenarioError(
            f"topology ({text!r}) is not 'star:N', 'leafspine:L,S,H', a preset name or a cluster TOML file"
        )
    return build_graph(resolve_nic_attach(load_cluster(text).with_routing(routing), nic_attach_auto == "direct"))
