"""The ``[cluster]`` section: a topology preset (or file), or inline node groups for compute-only planning."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from hetero_ns3.compute.gpus import get_gpu
from hetero_ns3.errors import ScenarioError, field_error


@dataclass(frozen=True)
class NodeGroupSpec:
    """An inline node group (compute-only planning without a topology preset).

    Attributes:
        gpu_type: catalog GPU type of every GPU in the group.
        nodes: number of nodes.
        gpus_per_node: GPUs per node.
        name: group label (default ``g<index>``).
    """

    gpu_type: str
    nodes: int = 1
    gpus_per_node: int = 8
    name: str = ""

    def validate(self, where: str) -> None:
        if self.nodes < 1:
            raise field_error(f"{where}.nodes", self.nodes, "must be >= 1")
        if self.gpus_per_node < 1:
            raise field_error(f"{where}.gpus_per_node", self.gpus_per_node, "must be >= 1")


@dataclass(frozen=True)
class InlineGpu:
    """A GPU of an inline cluster (same attributes as ``hetero_ns3.topology`` GpuInfo)."""

    name: str
    node: int
    local_index: int
    gpu_type: str
    group: str


@dataclass(frozen=True)
class ClusterSection:
    """The ``[cluster]`` section: a topology preset name or path, or inline node groups.

    Attributes:
        topology: preset name (``h0``..``h4``) or path of a topology TOML, loaded by
            ``hetero_ns3.topology.load_cluster``.
        groups: inline node groups (``[[cluster.groups]]``) when no topology is given; GPUs are
            named ``n<node>.g<index>``.
        nic_attach: overrides ``fabric.nic_attach`` of the topology's node groups: ``"pcie"`` (GPU -
            PCIe switch - NIC, each a simulated hop), ``"direct"`` (the GPU is its own network port
            where a PCIe switch joins one GPU to one NIC; other groups keep their setting) or ``"auto"``
            (``direct`` where it applies on the packet level, ``pcie`` elsewhere and on the flow level);
            unset: the topology file's setting (default ``auto``). See docs/topologies.md.
        routing: overrides the topology's ``network.routing``: ``"ecmp"`` (per-flow hash over equal-cost
            next hops, as RoCE fabrics route) or ``"dmodk"`` (static destination-mod-k routes, as an
            InfiniBand subnet manager installs on a fat-tree); unset: the topology file's (default
            ``ecmp``). See docs/topologies.md, "Routing".
    """

    topology: str | None = None
    groups: tuple[NodeGroupSpec, ...] = ()
    nic_attach: str | None = None
    routing: str | None = None

    def validate(self, where: str = "cluster") -> None:
        if (self.topology is None) == (not self.groups):
            raise ScenarioError(
                f"{where} needs exactly one of {where}.topology (a preset such as 'h0' or a path) or [[{where}.groups]]"
            )
        from hetero_ns3.topology.graph import ROUTING_KINDS
        from hetero_ns3.topology.spec import NIC_ATTACH_KINDS

        _check_override(where, "nic_attach", self.nic_attach, NIC_ATTACH_KINDS, "is not a valid choice", self.topology)
        _check_override(where, "routing", self.routing, ROUTING_KINDS, "is not a routing", self.topology)


def _check_override(
    where: str, name: str, value: str | None, kinds: tuple[str, ...], unknown: str, topology: str | None
) -> None:
    """A ``[cluster]`` override of a topology setting: one of ``kinds``, and only with a topology to override."""
    if value is None:
        return
    if value not in kinds:
        raise field_error(f"{where}.{name}", value, unknown, f"use one of {list(kinds)}")
    if topology is None:
        raise field_error(f"{where}.{name}", value, "needs a network topology", f"set {where}.topology or remove it")


def inline_gpus(
    cluster: ClusterSection, where: str = "cluster", extra_gpus: dict | None = None
) -> tuple[InlineGpu, ...]:
    """GPUs of an inline cluster, numbered node by node."""
    out: list[InlineGpu] = []
    node = 0
    for i, g in enumerate(cluster.groups):
        try:
            get_gpu(g.gpu_type, extra_gpus)
        except ScenarioError as err:
            raise field_error(
                f"{where}.groups[{i}].gpu_type", g.gpu_type, "is not a known GPU type", str(err)
            ) from None
        gname = g.name or f"g{i}"
        for _ in range(g.nodes):
            out += [InlineGpu(f"n{node}.g{k}", node, k, g.gpu_type, gname) for k in range(g.gpus_per_node)]
            node += 1
    return tuple(out)


def resolve_cluster_gpus(
    cluster: ClusterSection, base_dir: Path | None = None, extra_gpus: dict | None = None
) -> tuple[Any, ...]:
    """The cluster's GPUs: inline groups, or ``hetero_ns3.topology.load_cluster(topology).gpus()``."""
    if cluster.topology is None:
        return inline_gpus(cluster, extra_gpus=extra_gpus)
    from hetero_ns3.topology.loader import load_cluster

    return tuple(load_cluster(topology_path(cluster.topology, base_dir)).gpus())


def topology_path(topology: str, base_dir: Path | None, where: str = "cluster.topology") -> Path:
    """The file of ``[cluster] topology``: a path relative to the scenario's directory ``base_dir``, then to
    the current directory, then a preset name; else a ScenarioError naming the field and the presets."""
    from hetero_ns3.paths import preset_dir, preset_names, resolve_preset

    if base_dir is not None and (base_dir / topology).is_file():
        return base_dir / topology
    try:
        return resolve_preset(topology, "topologies")
    except ScenarioError:
        here = f"the scenario's directory {base_dir} or " if base_dir is not None else ""
        raise field_error(
            where,
            topology,
            f"is neither a topology file (relative to {here}the current directory {Path.cwd()}) nor a preset in "
            f"{preset_dir('topologies')}",
            f"give a path to a topology TOML or one of the presets {preset_names('topologies')}",
        ) from None
