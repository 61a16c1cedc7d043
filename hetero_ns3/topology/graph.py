"""A plain, simulator-independent description of a network: nodes, links, routes.

This is the contract between the topology builders (``hetero_ns3.topology``), the packet-level
backend (``hetero_ns3.network``) and the flow-level backend. It imports nothing from ns-3.

Conventions
-----------
* Nodes are *hosts* (traffic endpoints: GPUs, or plain hosts ``h0``..) or *switches* (anything
  that forwards: Ethernet switches, NVSwitch, PCIe switches, NICs modelled as two-port relays).
  Hosts never forward transit traffic.
* Links are full-duplex point-to-point with one rate (bit/s) and one propagation delay (s) per
  direction. ``kind`` says which fabric a link belongs to (``network``, ``nvlink``, ``pcie``...).
* Node indices are positions in ``NetGraph.nodes``; the packet backend uses them as node ids.
* Routing is shortest path by the links' ``cost`` (1 by default, i.e. hop count) with every
  equal-cost next hop kept (ECMP), or, with ``NetGraph.routing = "dmodk"``, one of them chosen per
  destination in the network's switches (static destination-mod-k routing, as an InfiniBand subnet
  manager's fat-tree engine installs; :mod:`hetero_ns3.topology.routing`).
* Zones (cluster graphs): every element of a server carries the server's ``zone`` (``n3``);
  network switches and plain hosts have zone ``""``. NICs are *gateways*: ``serves`` names the
  hosts whose traffic they carry. Routes obey what a server does: traffic between two hosts of one
  zone stays inside it; traffic between zones leaves through a gateway serving the source, enters
  through a gateway serving the destination and never crosses a third zone (a server is no router).
  One approximation: a switch inside a zone shared by hosts of several gateways keeps all its
  equal-cost gateways, so a host there may leave through a neighbour's NIC.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from hetero_ns3.errors import ScenarioError

HOST = "host"
SWITCH = "switch"
#: Role of a switch-side endpoint: a host node that stands for the reduction engine of an NVSwitch
#: (NVLink SHARP). Flows to and from it are the traffic between the GPUs and the switch; it is not a
#: GPU (collective groups, GPU counts and summaries skip it). See topology/fabric.py.
NVLS_ROLE = "nvls"
#: Routing of the network's switches: ``ecmp`` (every equal-cost next hop, a flow hash picks one) or
#: ``dmodk`` (one next hop per destination, chosen by the destination's port number: D-mod-K).
ROUTING_KINDS = ("ecmp", "dmodk")


@dataclass(frozen=True)
class GraphNode:
    """One node of the network graph."""

    name: str
    """Unique, human-readable name (e.g. ``n3.g5`` for GPU 5 of node 3, ``leaf2``)."""
    kind: str
    """``"host"`` (endpoint) or ``"switch"`` (forwards)."""
    role: str = ""
    """Free-form role for summaries and plots: ``gpu``, ``nic``, ``leaf``, ``spine``, ``nvswitch``..."""
    buffer_bytes: int = 0
    """Switch shared buffer in bytes; 0 means the network configuration's default."""
    group: str = ""
    """Node group (for GPUs: the cluster node group name); empty for fabric elements."""
    gpu_type: str = ""
    """GPU type of a GPU host (e.g. ``H100-SXM``); empty otherwise."""
    zone: str = ""
    """Server this element belongs to (``n3``); ``""`` for the network and for plain hosts."""
    serves: tuple[str, ...] = ()
    """Gateways only: the hosts of its zone whose inter-zone traffic it carries. NICs; or a host that is
    its own network port (``serves`` itself: a GPU attached directly, ``fabric.nic_attach``)."""


@dataclass(frozen=True)
class GraphLink:
    """A full-duplex point-to-point link between nodes ``a`` and ``b`` (names)."""

    a: str
    b: str
    rate_bps: float
    """Line rate in bit/s, each direction."""
    delay_s: float
    """One-way propagation delay in seconds."""
    kind: str = "network"
    """Fabric of this link: ``network``, ``nvlink``, ``pcie``."""
    tier: str = ""
    """Tier label for summaries: ``host-leaf``, ``leaf-spine``, ``spine-core``..."""
    cost: float = 1.0
    """Routing cost (> 0); shortest paths minimise the sum. 1 everywhere = hop count."""
    mtu_bytes: int = 0
    """Largest segment on this link, bytes; 0 = the network configuration's MTU (NVLink may use more)."""


@dataclass(frozen=True)
class NetGraph:
    """Nodes and links of one network. Build with :func:`make_graph` to validate."""

    nodes: tuple[GraphNode, ...]
    links: tuple[GraphLink, ...]
    _index: dict[str, int] = field(default_factory=dict, compare=False, repr=False, hash=False)
    routing: str = "ecmp"
    """How the network's switches pick among equal-cost next hops (:data:`ROUTING_KINDS`)."""

    def index(self, name: str) -> int:
        """Node index of ``name``; raises ScenarioError naming the unknown node."""
        try:
            return self._index[name]
        except KeyError:
            raise ScenarioError(f"unknown node {name!r}; valid hosts look like {self.host_names()[:3]}") from None

    def host_names(self) -> list[str]:
        return [n.name for n in self.nodes if n.kind == HOST]

    def gpu_names(self) -> list[str]:
        """Hosts that are GPUs or plain hosts, without switch-side endpoints (role ``nvls``)."""
        return [n.name for n in self.nodes if n.kind == HOST and n.role != NVLS_ROLE]

    def host_indices(self) -> list[int]:
        return [i for i, n in enumerate(self.nodes) if n.kind == HOST]

    def gpu_indices(self) -> list[int]:
        """Indices of :meth:`gpu_names`."""
        return [i for i, n in enumerate(self.nodes) if n.kind == HOST and n.role != NVLS_ROLE]

    def adjacency(self) -> list[list[tuple[int, int]]]:
        """Per node, a list of ``(neighbour index, link index)`` in link order."""
        adj: list[list[tuple[int, int]]] = [[] for _ in self.nodes]
        for li, link in enumerate(self.links):
            a, b = self._index[link.a], self._index[link.b]
            adj[a].append((b, li))
            adj[b].append((a, li))
        return adj


def make_graph(
    nodes: list[GraphNode] | tuple[GraphNode, ...],
    links: list[GraphLink] | tuple[GraphLink, ...],
    routing: str = "ecmp",
) -> NetGraph:
    """Validate and build a :class:`NetGraph` (``routing``: one of :data:`ROUTING_KINDS`).

    Raises ScenarioError for duplicate names, unknown kinds, dangling links, self-loops,
    non-positive rates and negative delays.
    """
    if routing not in ROUTING_KINDS:
        raise ScenarioError(f"network.routing ({routing!r}) is unknown; use one of {list(ROUTING_KINDS)}")
    index: dict[str, int] = {}
    for i, n in enumerate(nodes):
        if n.kind not in (HOST, SWITCH):
            raise ScenarioError(f"nodes[{i}].kind ({n.kind!r}) must be 'host' or 'switch'")
        if n.name in index:
            raise ScenarioError(f"nodes[{i}].name ({n.name!r}) is used twice; node names must be unique")
        if n.buffer_bytes < 0:
            raise ScenarioError(f"nodes[{i}].buffer_bytes ({n.buffer_bytes}) must be >= 0")
        index[n.name] = i
    for i, n in enumerate(nodes):
        for h in n.serves:
            k = index.get(h)
            own_port = n.kind == HOST and h == n.name  # a GPU whose network port is its own (direct attach)
            if (
                (n.kind != SWITCH and not own_port)
                or k is None
                or nodes[k].kind != HOST
                or nodes[k].zone != n.zone
                or not n.zone
            ):
                raise ScenarioError(
                    f"nodes[{i}].serves ({h!r}) must name a host of the same non-empty zone ({n.zone!r}); "
                    f"only switches (NICs) may serve hosts, and a host only itself"
                )
    for j, link in enumerate(links):
        for end in (link.a, link.b):
            if end not in index:
                raise ScenarioError(f"links[{j}] names an unknown node {end!r}; define it first")
        if link.a == link.b:
            raise ScenarioError(f"links[{j}] ({link.a!r} - {link.b!r}) is a self-loop")
        if not link.rate_bps > 0:
            raise ScenarioError(f"links[{j}].rate_bps ({link.rate_bps}) must be > 0, e.g. 100e9")
        if link.delay_s < 0:
            raise ScenarioError(f"links[{j}].delay_s ({link.delay_s}) must be >= 0")
        if not link.cost > 0:
            raise ScenarioError(f"links[{j}].cost ({link.cost}) must be > 0, e.g. 1.0")
        if link.mtu_bytes < 0:
            raise ScenarioError(f"links[{j}].mtu_bytes ({link.mtu_bytes}) must be >= 0 (0 = default MTU)")
    return NetGraph(tuple(nodes), tuple(links), index, routing)
