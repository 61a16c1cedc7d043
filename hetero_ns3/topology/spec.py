"""Cluster description as frozen dataclasses: node groups, intra-node fabrics, NICs, network.

All quantities are SI: bit/s, seconds, bytes. Instances are produced and validated by
:mod:`hetero_ns3.topology.loader`; constructors do no I/O. GPU hosts are named ``n{node}.g{gpu}``
with a global node index counted over the groups in file order.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

NVSWITCH = "nvswitch"
PCIE = "pcie"
NVLINK_BRIDGE = "nvlink_bridge"
MESH = "mesh"
FABRIC_KINDS = (NVSWITCH, PCIE, NVLINK_BRIDGE, MESH)
SCALE_UP_KINDS = (NVSWITCH, MESH)
"""Fabrics whose GPUs talk to each other without PCIe (no root complex is built)."""

RAIL = "rail"
LEAFSPINE = "leafspine"
FATTREE = "fattree"
NETWORK_KINDS = (RAIL, LEAFSPINE, FATTREE)

NIC_ATTACH_PCIE = "pcie"
NIC_ATTACH_DIRECT = "direct"
NIC_ATTACH_AUTO = "auto"
NIC_ATTACH_KINDS = (NIC_ATTACH_AUTO, NIC_ATTACH_PCIE, NIC_ATTACH_DIRECT)


@dataclass(frozen=True)
class PcieSwitchSpec:
    """One PCIe switch of a node: the local GPU and NIC indices behind it."""

    gpus: tuple[int, ...]
    nics: tuple[int, ...]


@dataclass(frozen=True)
class FabricSpec:
    """Intra-node fabric of every node in a group."""

    kind: str
    """``nvswitch`` (all GPUs on one NVSwitch plane, plus PCIe to the NICs), ``pcie`` (PCIe only) or
    ``nvlink_bridge`` (PCIe cards as ``pcie``, plus an NVLink bridge joining GPUs 2j and 2j+1) or ``mesh``
    (a direct scale-up link between every pair of GPUs, as AMD Infinity Fabric / xGMI on MI300X)."""
    nvlink_rate_bps: float
    """Scale-up bandwidth, bit/s, each direction: per GPU into the NVSwitch (``nvswitch``), across the
    bridge to the GPU's pair (``nvlink_bridge``), or of one GPU-to-GPU link (``mesh``); 0 for ``pcie``."""
    nvlink_delay_s: float
    """One-way delay of a GPU-NVSwitch (GPU-bridge, GPU-GPU) link, s."""
    pcie_gen: int
    """PCIe generation (3, 4, 5, 6)."""
    pcie_lanes: int
    """Lanes per GPU/NIC/uplink (x16 typical)."""
    pcie_rate_bps: float
    """PCIe link rate, bit/s, each direction: GT/s x lanes x 128/130 unless given explicitly."""
    pcie_delay_s: float
    """One-way delay of one PCIe link (device to switch), s."""
    pcie_switches: tuple[PcieSwitchSpec, ...]
    """Which GPUs and NICs share a PCIe switch; PCIe switches of a ``pcie`` node meet at a root complex."""
    nvlink_segment_bytes: int = 0
    """Segment size on NVLink links, bytes (0: the network MTU). Larger cuts events, see docs."""
    nvls: bool = False
    """The NVSwitch reduces and multicasts (NVLink SHARP): the node gets an NVLS endpoint and NCCL's
    NVLS algorithms may run. Default: the GPU catalog's ``nvls`` flag for ``nvswitch`` fabrics."""
    nic_attach: str = NIC_ATTACH_AUTO
    """How a GPU reaches its NIC: ``pcie`` (GPU - PCIe switch - NIC relay, each a simulated hop),
    ``direct`` (where a PCIe switch holds one GPU and one NIC and nothing else: no PCIe switch and no
    NIC node; the GPU's own port goes to the first network switch at min(NIC rate, PCIe rate), with
    both PCIe link delays added to the access delay) or ``auto`` (the default: the backend chooses,
    :func:`hetero_ns3.topology.fabric.resolve_nic_attach`; the graph of an unresolved ``auto`` is the
    ``pcie`` one). See :func:`hetero_ns3.topology.fabric.direct_nics`."""


@dataclass(frozen=True)
class NicSpec:
    """Network interfaces of every node in a group."""

    count: int
    rate_bps: float
    """Line rate of one NIC, bit/s."""
    affinity: tuple[tuple[int, ...], ...]
    """Per NIC, the local GPU indices it serves (each GPU exactly once)."""


@dataclass(frozen=True)
class NodeGroup:
    """``count`` identical nodes."""

    name: str
    count: int
    gpu_type: str
    """Name in the GPU catalog (``hetero_ns3.compute.gpus``)."""
    gpus_per_node: int
    fabric: FabricSpec
    nics: NicSpec


@dataclass(frozen=True)
class TierSpec:
    """One switch tier of the network."""

    uplink_rate_bps: float = 0.0
    """Rate of each uplink from this tier to the next, bit/s (0: the fastest downlink rate)."""
    uplink_delay_s: float = 1e-6
    """One-way delay of an uplink, s."""
    buffer_bytes: int = 0
    """Shared buffer of each switch of this tier, bytes (0: the backend default)."""
    oversubscription: float = 1.0
    """Downlink bandwidth / uplink bandwidth of each switch of this tier (1 = non-blocking)."""
    uplinks: int = 0
    """Uplinks per switch, fixed (0: from ``oversubscription`` and the switch's downlink load)."""


@dataclass(frozen=True)
class NetworkSpec:
    """The scale-out network joining the NICs."""

    kind: str
    """``rail`` (rail-optimized), ``leafspine`` (two-tier Clos) or ``fattree`` (three-tier k-ary)."""
    access_delay_s: float = 1e-6
    """One-way delay of a NIC-to-first-switch link, s."""
    tiers: dict[str, TierSpec] = field(default_factory=dict)
    """Per tier name: rail/leaf/edge, agg, spine/core."""
    rails: int = 0
    """rail: number of rails (0: the largest NIC count per node)."""
    nodes_per_pod: int = 0
    """rail: nodes per rail group (pod); 0 = all nodes in one pod."""
    spines: int = 0
    """rail/leafspine: spine count (0: as many as uplinks per lower switch)."""
    ports_per_leaf: int = 0
    """leafspine: NIC ports per leaf."""
    k: int = 0
    """fattree: switch radix k (k pods, k/2 edge and k/2 aggregation switches per pod)."""
    routing: str = "ecmp"
    """``ecmp`` (per-flow hash over equal-cost next hops) or ``dmodk`` (static destination-mod-k routing
    of an InfiniBand subnet manager's fat-tree engine); see docs/topologies.md, "Routing"."""

    def tier(self, name: str) -> TierSpec:
        """The tier ``name``, default settings if the file did not give it."""
        return self.tiers.get(name, TierSpec())


@dataclass(frozen=True)
class GpuInfo:
    """One GPU of the cluster: a traffic endpoint of the graph."""

    name: str
    """``n{node}.g{local_index}``."""
    node: int
    local_index: int
    gpu_type: str
    group: str
    nic: str
    """Graph node of its network port: its affinity NIC (``n3.nic5``), or the GPU itself where
    ``fabric.nic_attach = "direct"`` folds that NIC into it."""
    nic_rate_bps: float
    """Line rate of that NIC, bit/s."""
    rail: int
    """Network rail of that NIC (rail-optimized networks), else -1."""
    fabric: str = ""
    """Intra-node fabric of its node: ``nvswitch`` or ``pcie``."""
    nvlink_rate_bps: float = 0.0
    """Its NVLink bandwidth, bit/s each direction (0 on ``pcie`` nodes)."""
    pcie_rate_bps: float = 0.0
    """Rate of its PCIe link, bit/s each direction."""


@dataclass(frozen=True)
class ClusterSpec:
    """A validated cluster: node groups joined by one network."""

    name: str
    groups: tuple[NodeGroup, ...]
    network: NetworkSpec
    description: str = ""

    @property
    def node_count(self) -> int:
        return sum(g.count for g in self.groups)

    def with_routing(self, routing: str | None) -> ClusterSpec:
        """This cluster with ``network.routing = routing`` (None: unchanged)."""
        if routing is None:
            return self
        return replace(self, network=replace(self.network, routing=routing))

    def node_groups(self) -> list[tuple[int, NodeGroup]]:
        """``(global node index, group)`` for every node, in order."""
        out = []
        n = 0
        for g in self.groups:
            for _ in range(g.count):
                out.append((n, g))
                n += 1
        return out

    def nic_rail(self, group: NodeGroup, nic: int) -> int:
        """Rail switch index of NIC ``nic`` of a node of ``group`` (rail networks), else -1.

        With R rails and n NICs per node, NIC j is cabled to rail ``j * R // n`` (R = n: NIC i on
        rail i; 2 NICs on 8 rails: rails 0 and 4).
        """
        if self.network.kind != RAIL:
            return -1
        rails = self.rails()
        return nic * rails // group.nics.count

    def rails(self) -> int:
        return self.network.rails or max(g.nics.count for g in self.groups)

    def gpus(self) -> tuple[GpuInfo, ...]:
        """Every GPU, node by node, in local order."""
        from hetero_ns3.topology.fabric import direct_nics  # fabric imports this module

        out = []
        for node, g in self.node_groups():
            owner = {gpu: j for j, gs in enumerate(g.nics.affinity) for gpu in gs}
            own_port = set(direct_nics(g).values())
            for i in range(g.gpus_per_node):
                j = owner[i]
                out.append(
                    GpuInfo(
                        name=f"n{node}.g{i}",
                        node=node,
                        local_index=i,
                        gpu_type=g.gpu_type,
                        group=g.name,
                        nic=f"n{node}.g{i}" if i in own_port else f"n{node}.nic{j}",
                        nic_rate_bps=g.nics.rate_bps,
                        rail=self.nic_rail(g, j),
                        fabric=g.fabric.kind,
                        nvlink_rate_bps=g.fabric.nvlink_rate_bps,
                        pcie_rate_bps=g.fabric.pcie_rate_bps,
                    )
                )
        return tuple(out)
