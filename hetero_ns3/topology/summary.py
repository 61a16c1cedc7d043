"""A summary of a topology: what ``hetero-ns3 topo show`` prints."""

from __future__ import annotations

import time
from collections import Counter
from dataclasses import dataclass, field

from hetero_ns3.topology.analysis import bisection_bandwidth, ecmp_path_count
from hetero_ns3.topology.fabric import PCIE_ROOT_NOTE, gpus_across_pcie_switches, private_pcie_switches
from hetero_ns3.topology.graph import HOST, NVLS_ROLE, NetGraph
from hetero_ns3.topology.loader import PCIE_GT_PER_S
from hetero_ns3.topology.routing import routing_tables
from hetero_ns3.topology.spec import MESH, ClusterSpec, NodeGroup
from hetero_ns3.units import format_rate


@dataclass(frozen=True)
class TopologySummary:
    """Counts and measures of one topology (rates in bit/s, times in s)."""

    name: str
    description: str
    gpus_by_type: dict[str, int]
    hosts: int
    nodes: int
    """Cluster nodes (servers); for plain topologies, the hosts."""
    groups: tuple[str, ...]
    """One line per node group."""
    switches_by_role: dict[str, int]
    links_by_kind_rate: dict[tuple[str, float], int]
    bisection_bps: float
    ecmp_paths: tuple[tuple[str, str, int], ...]
    """``(src, dst, number of equal-cost paths)`` for the sample pairs (1 in the network under ``dmodk``)."""
    routing_s: float
    """Wall time of computing all routing tables."""
    oversubscription: dict[str, float] = field(default_factory=dict)
    """Per network tier with uplinks: the largest downlink/uplink bandwidth ratio of its switches."""
    routing: str = "ecmp"
    """The network's routing (``NetGraph.routing``)."""


TIER_LEVEL = {"host": 0, "nic": 0, "rail": 1, "leaf": 1, "edge": 1, "agg": 2, "spine": 3, "core": 3}


def tier_oversubscription(graph: NetGraph) -> dict[str, float]:
    """Per switch role of the network: max over its switches of downlink / uplink bandwidth."""
    down: dict[str, float] = {}
    up: dict[str, float] = {}
    for link in graph.links:
        if link.kind != "network":
            continue
        a, b = graph.nodes[graph.index(link.a)], graph.nodes[graph.index(link.b)]
        la, lb = TIER_LEVEL.get(a.role or a.kind, 0), TIER_LEVEL.get(b.role or b.kind, 0)
        if la == lb:
            continue
        lo, hi = (a, b) if la < lb else (b, a)
        up[lo.name] = up.get(lo.name, 0.0) + link.rate_bps
        down[hi.name] = down.get(hi.name, 0.0) + link.rate_bps
    out: dict[str, float] = {}
    for name, d in down.items():
        if name in up:
            role = graph.nodes[graph.index(name)].role
            out[role] = max(out.get(role, 0.0), d / up[name])
    return out


def sample_pairs(graph: NetGraph) -> list[tuple[str, str]]:
    """Sample host pairs: first-last (farthest), first and the same-index host of the next node, first-second."""
    hosts = graph.gpu_names()
    if len(hosts) < 2:
        return []
    pairs = [(hosts[0], hosts[-1])]
    node0 = hosts[0].split(".")[0]
    local = hosts[0].split(".", 1)[1] if "." in hosts[0] else ""
    if local:
        other = next((h for h in hosts if h.split(".")[0] != node0 and h.endswith("." + local)), None)
        if other:
            pairs.append((hosts[0], other))
    pairs.append((hosts[0], hosts[1]))
    return list(dict.fromkeys(pairs))


def summarize(
    graph: NetGraph, cluster: ClusterSpec | None = None, pairs: list[tuple[str, str]] | None = None, name: str = ""
) -> TopologySummary:
    """Summarize ``graph`` (and ``cluster``, when it came from a cluster description)."""
    t0 = time.perf_counter()
    tables = routing_tables(graph)
    routing_s = time.perf_counter() - t0
    pairs = pairs if pairs is not None else sample_pairs(graph)
    ecmp = tuple((a, b, ecmp_path_count(graph, tables, graph.index(a), graph.index(b))) for a, b in pairs)
    hosts = [n for n in graph.nodes if n.kind == HOST and n.role != NVLS_ROLE]
    gpus = Counter(n.gpu_type for n in hosts if n.gpu_type)
    groups: tuple[str, ...] = ()
    if cluster is not None:
        groups = tuple(
            f"{g.name}: {g.count} x {g.gpus_per_node} {g.gpu_type}, {g.fabric.kind}"
            + _scale_up_note(g)
            + _root_note(g)
            + f", PCIe Gen{g.fabric.pcie_gen} x{g.fabric.pcie_lanes}, {g.nics.count} x {format_rate(g.nics.rate_bps)} NICs"
            + _nic_cap_note(g)
            + _attach_note(g)
            for g in cluster.groups
        )
    links = Counter((link.kind, link.rate_bps) for link in graph.links)
    return TopologySummary(
        name=name or (cluster.name if cluster else ""),
        description=cluster.description if cluster else "",
        gpus_by_type=dict(gpus),
        hosts=len(hosts),
        nodes=cluster.node_count if cluster else len(hosts),
        groups=groups,
        switches_by_role=dict(
            Counter(n.role or "switch" for n in graph.nodes if n.kind != HOST or n.role == NVLS_ROLE)
        ),
        links_by_kind_rate=dict(sorted(links.items(), key=lambda kv: (kv[0][0], -kv[0][1]))),
        bisection_bps=bisection_bandwidth(graph),
        ecmp_paths=ecmp,
        routing=graph.routing,
        routing_s=routing_s,
        oversubscription=tier_oversubscription(graph),
    )


def format_summary(s: TopologySummary) -> str:
    """Human-readable text of a summary."""
    out = [f"topology {s.name}" + (f": {s.description}" if s.description else "")]
    if s.gpus_by_type:
        out.append("GPUs: " + ", ".join(f"{n} x {t}" for t, n in s.gpus_by_type.items()) + f" ({s.hosts} total)")
    else:
        out.append(f"hosts: {s.hosts}")
    out.append(f"nodes: {s.nodes}")
    out += [f"  {g}" for g in s.groups]
    out.append("switches: " + ", ".join(f"{n} {r}" for r, n in s.switches_by_role.items()))
    out.append("links:")
    out += [f"  {n:5d} x {kind:8s} {format_rate(rate)}" for (kind, rate), n in s.links_by_kind_rate.items()]
    if s.oversubscription:
        tiers = ", ".join(f"{role} {r:.2f}" for role, r in s.oversubscription.items())
        out.append(f"oversubscription (downlink/uplink, worst switch): {tiers}")
    out.append(f"bisection bandwidth: {format_rate(s.bisection_bps)} (first half of the nodes to the rest)")
    out.append(f"ECMP paths (routing {s.routing}, routing of all hosts took {s.routing_s:.3f} s):")
    out += [f"  {a} -> {b}: {n}" for a, b, n in s.ecmp_paths]
    return "\n".join(out)


def _scale_up_note(g: NodeGroup) -> str:
    """`` (NVLink R/GPU)``, or on a mesh ``(k links x R/GPU)``; nothing without scale-up links."""
    rate = g.fabric.nvlink_rate_bps
    if not rate:
        return ""
    if g.fabric.kind == MESH:
        return f" ({g.gpus_per_node - 1} links x {format_rate(rate)}/GPU)"
    return f" (NVLink {format_rate(rate)}/GPU)"


def _root_note(g: NodeGroup) -> str:
    """A note for nodes whose GPUs sit behind several PCIe switches and talk over PCIe (docs/collectives.md)."""
    if not gpus_across_pcie_switches(g):
        return ""
    return f" ({PCIE_ROOT_NOTE})"


def _nic_cap_note(g: NodeGroup) -> str:
    """A note for NICs faster than their PCIe link, which then limits them (every GPU-to-NIC path crosses it)."""
    if g.nics.count == 0 or g.nics.rate_bps <= g.fabric.pcie_rate_bps:
        return ""
    fix = "raise pcie_gen or pcie_lanes" if g.fabric.pcie_gen < max(PCIE_GT_PER_S) else "raise pcie_lanes"
    return f" (each NIC limited to {format_rate(g.fabric.pcie_rate_bps)} by its PCIe link: {fix})"


def _attach_note(g: NodeGroup) -> str:
    """`` (nic_attach ...)`` for a group's line: the explicit setting, or what ``auto`` becomes on the packet level."""
    if g.fabric.nic_attach != "auto":
        return f" (nic_attach {g.fabric.nic_attach})"
    return " (nic_attach auto: direct on the packet level)" if private_pcie_switches(g) else ""
