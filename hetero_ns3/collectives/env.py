"""The collective planner's view of a topology: nodes, rails, per-pair paths, HBM bandwidth.

Built once per network with :meth:`CollectiveEnv.from_graph`; per-pair path properties are computed
lazily from the next-hop tables of all hosts (:func:`~hetero_ns3.topology.routing.routing_tables`, built on
first use; searches shared per rail / leaf switch) and cached, so groups of thousands of GPUs only
pay for the pairs their algorithms use.

* **Node** of a GPU: ``n<node>.g<local>`` names (cluster topologies) share node ``n<node>``; any
  other host is a node of its own.
* **Path** between two GPUs: among the routes of :func:`hetero_ns3.topology.routing.routing_tables`
  (least cost, ECMP, zone rules: the routes both backends use), the one with the highest bottleneck
  rate, then the lowest delay. Its ``kind`` is ``network`` if it crosses a network link, else
  ``pcie`` if it crosses a PCIe link, else ``nvlink``.
* **Rail** of a GPU: the far end of the first network link of the NIC that serves it (``serves``),
  or, without one, of the first network link reachable from the GPU (its rail / leaf switch).
"""

from __future__ import annotations

import functools
import re
from collections import deque
from dataclasses import dataclass

from hetero_ns3.collectives.tuning import Tuning, load_tuning
from hetero_ns3.errors import HeteroNs3Error, PlanningError
from hetero_ns3.topology.graph import HOST, NVLS_ROLE, NetGraph
from hetero_ns3.topology.routing import routing_tables, shortest_path_next_hops

_GPU_NAME = re.compile(r"^(n\d+)\.g(\d+)$")
NVLINK, PCIE, NETWORK = "nvlink", "pcie", "network"


@functools.lru_cache(maxsize=256)
def _architecture(gpu_type: str) -> str:
    """Catalog architecture of ``gpu_type`` (``""`` when the catalog does not know it)."""
    try:
        from hetero_ns3.compute.gpus import get_gpu

        return str(get_gpu(gpu_type).architecture)
    except (ImportError, HeteroNs3Error, KeyError, AttributeError):
        return ""


@dataclass(frozen=True)
class PairPath:
    """The path from one GPU to another as the planner sees it."""

    rate_bps: float
    """Bottleneck line rate, bit/s."""
    delay_s: float
    """Sum of one-way propagation delays, s."""
    kind: str
    """``nvlink``, ``pcie`` or ``network``."""
    hops: int
    """Links crossed; 1 inside a node is a direct GPU-to-GPU link (``mesh`` fabrics)."""


class CollectiveEnv:
    """GPUs of a network and what the planner needs to know about them. Build with :meth:`from_graph`."""

    def __init__(self, graph: NetGraph, tuning: Tuning) -> None:
        self.graph = graph
        self.tuning = tuning
        hosts = [n for n in graph.nodes if n.kind == HOST and n.role != NVLS_ROLE]
        self.gpus: tuple[str, ...] = tuple(n.name for n in hosts)
        self._nvls: dict[str, str] = {n.zone: n.name for n in graph.nodes if n.role == NVLS_ROLE and n.kind == HOST}
        self._gpu_type = {n.name: n.gpu_type for n in hosts}
        self._node: dict[str, str] = {}
        self._local: dict[str, int] = {}
        for n in hosts:
            m = _GPU_NAME.match(n.name)
            self._node[n.name] = m.group(1) if m else n.name
            self._local[n.name] = int(m.group(2)) if m else 0
        self._adj = graph.adjacency()
        self._paths: dict[tuple[str, str], PairPath] = {}
        self._tables: dict[int, tuple[list[list[int]], dict[int, tuple[float, float, int, int] | None]]] = {}
        self._all_tables: dict[int, list[list[int]]] | None = None
        self._nic_of: dict[str, str] = {}
        for n in graph.nodes:
            for h in getattr(n, "serves", ()):
                self._nic_of.setdefault(h, n.name)
        self._rail: dict[str, str] = {}
        self._hbm: dict[str, float] = {}
        self._members: dict[str, list[str]] | None = None
        self.cache: dict[object, object] = {}
        """Per-env memo for algorithms (ring orders, trees) keyed by their own tuples."""

    @classmethod
    def from_graph(cls, graph: NetGraph, tuning: Tuning | None = None) -> CollectiveEnv:
        """The env of ``graph`` with ``tuning`` (default: ``collectives/tuning.toml``)."""
        return cls(graph, tuning if tuning is not None else load_tuning())

    # -- GPUs and nodes --------------------------------------------------------------------------
    def check_gpu(self, name: str, path: str = "call.group") -> None:
        if name not in self._node:
            raise PlanningError(f"{path} names {name!r}, which is not a GPU/host of the topology; e.g. {self.gpus[:3]}")

    def node_of(self, gpu: str) -> str:
        """Node key of ``gpu`` (``n3`` for ``n3.g5``; the host name for plain hosts)."""
        return self._node[gpu]

    def local_of(self, gpu: str) -> int:
        return self._local[gpu]

    def gpu_type(self, gpu: str) -> str:
        return self._gpu_type.get(gpu, "")

    def nvls_endpoint(self, gpu: str) -> str | None:
        """The NVLS endpoint (NVSwitch reduction engine, role ``nvls``) of ``gpu``'s node; None without NVLS."""
        return self._nvls.get(self._node[gpu])

    def architecture(self, gpu: str) -> str:
        """GPU architecture of ``gpu`` from the catalog (``Hopper``...); ``""`` if unknown."""
        gt = self.gpu_type(gpu)
        if not gt:
            return ""
        return _architecture(gt)

    def pcie_domain(self, gpu: str) -> str | None:
        """The PCIe switch (role ``pcie-switch``) behind which ``gpu`` talks to the GPUs of its node, or None.

        None unless the GPU's traffic to another GPU of its node goes over PCIe (``pcie`` and
        ``nvlink_bridge`` nodes): on NVLink nodes the PCIe switches carry NIC traffic only.
        """
        key = ("pcie_domain", gpu)
        if key in self.cache:
            return self.cache[key]  # type: ignore[return-value]
        dom = None
        if self._pcie_node(self._node[gpu]):
            graph = self.graph
            for v, li in self._adj[graph.index(gpu)]:
                if graph.links[li].kind == PCIE and graph.nodes[v].role == "pcie-switch":
                    dom = graph.nodes[v].name
                    break
        self.cache[key] = dom
        return dom

    def by_pcie_switch(self, group: tuple[str, ...], ranks: list[int], first: int, last: int) -> list[int]:
        """``ranks`` (indices into ``group``: the GPUs of one node that a ring visits between ``first`` and ``last``)
        ordered so that the GPUs behind each PCIe switch follow one another: ``first``'s switch first, ``last``'s
        last, the others in order of first appearance (a stable sort; unchanged on nodes whose GPUs talk over
        NVLink). The ring then crosses the root complex twice per switch boundary, as the rings of NCCL's topology
        search do (in index order, the channel entering at GPU 7 of 2 x 4 GPUs crossed it four times)."""
        doms = [self.pcie_domain(group[r]) for r in ranks]
        if all(d is None for d in doms):
            return ranks
        d_first, d_last = self.pcie_domain(group[first]), self.pcie_domain(group[last])
        seen: dict[str | None, int] = {}
        for d in doms:
            seen.setdefault(d, len(seen))

        def key(i: int) -> tuple[int, int]:
            d = doms[i]
            return (0, 0) if d == d_first else (2, 0) if d == d_last else (1, seen[d])

        return [ranks[i] for i in sorted(range(len(ranks)), key=key)]

    def pcie_root_pairs(self, group: tuple[str, ...]) -> bool:
        """Whether two GPUs of ``group`` in one node sit behind different PCIe switches and talk over PCIe.

        The planner moves such pairs' data P2P through the root complex; NCCL by default does not (``p2pLevel``
        ``PATH_PXB``: P2P only under one switch) and copies through host memory (its SHM transport), slower.
        """
        by_node: dict[str, set[str | None]] = {}
        for g in group:
            by_node.setdefault(self._node[g], set()).add(self.pcie_domain(g))
        return any(len(d) > 1 and None not in d for d in by_node.values())

    def _pcie_node(self, node: str) -> bool:
        """Whether a GPU of ``node`` reaches another GPU of it over PCIe (decided once per node, from its first GPU)."""
        key = ("pcie_node", node)
        hit = self.cache.get(key)
        if hit is None:
            if self._members is None:
                self._members = {}
                for g in self.gpus:
                    self._members.setdefault(self._node[g], []).append(g)
            first, *peers = self._members[node]
            hit = self.cache[key] = any(self.path(first, g).kind == PCIE for g in peers)
        return bool(hit)

    def nodes_of(self, group: tuple[str, ...]) -> list[list[int]]:
        """Rank indices of ``group`` per node, nodes in order of first appearance, ranks in rank order."""
        order: dict[str, list[int]] = {}
        for r, g in enumerate(group):
            order.setdefault(self._node[g], []).append(r)
        return list(order.values())

    def hbm_bw_Bps(self, gpu: str) -> float:
        """HBM bandwidth of ``gpu`` (bytes/s) from the GPU catalog; the tuning default if unknown."""
        bw = self._hbm.get(gpu)
        if bw is None:
            bw = self.tuning.default_hbm_bw_Bps
            gt = self.gpu_type(gpu)
            if gt:
                try:
                    from hetero_ns3.compute.gpus import get_gpu

                    bw = float(get_gpu(gt).hbm_bw_Bps)
                except (ImportError, HeteroNs3Error, KeyError, AttributeError):
                    bw = self.tuning.default_hbm_bw_Bps
            self._hbm[gpu] = bw
        return bw

    def reduce_time_s(self, gpu: str, nbytes: float) -> float:
        """Memory-bound time (s) of reducing ``nbytes`` received bytes into the local buffer on ``gpu``."""
        t = self.tuning
        return t.reduction_bytes_touched * nbytes / (self.hbm_bw_Bps(gpu) * t.hbm_efficiency)

    # -- paths -----------------------------------------------------------------------------------
    def _toward(self, dst: int) -> tuple[list[list[int]], dict[int, tuple[float, float, int, int] | None]]:
        """Next-hop table toward host ``dst`` (the routes both backends use) and a memo of best paths."""
        hit = self._tables.get(dst)
        if hit is None:
            if self._all_tables is None:
                # The tables of every host at once: they share searches where routes coincide (one
                # network-wide search per rail switch), so this costs about as much as a few
                # per-destination searches and is the same next-hop lists, in the same order.
                self._all_tables = routing_tables(self.graph)
            table = self._all_tables.get(dst)
            if table is None:
                table = shortest_path_next_hops(self.graph, dst)
            hit = self._tables[dst] = (table, {dst: (float("inf"), 0.0, 0, 0)})
        return hit

    def next_hop_table(self, dst: int) -> list[list[int]]:
        """ECMP next-hop links toward host index ``dst`` for every node (the backends' routes; read-only)."""
        return self._toward(dst)[0]

    def _best(self, u: int, dst: int) -> tuple[float, float, int, int] | None:
        """(bottleneck bit/s, delay s, kind bits, hops) of the widest routed path from ``u`` to ``dst``."""
        table, memo = self._toward(dst)
        got = memo.get(u)
        if got is not None or u in memo:
            return got
        links = self.graph.links
        index = self.graph._index
        best = None
        for li in table[u]:
            link = links[li]
            v = index[link.b] if index[link.a] == u else index[link.a]
            sub = self._best(v, dst)
            if sub is None:
                continue
            kb = 2 if link.kind == NETWORK else (1 if link.kind == PCIE else 0)
            cand = (min(sub[0], link.rate_bps), sub[1] + link.delay_s, sub[2] | kb, sub[3] + 1)
            if best is None or cand[0] > best[0] or (cand[0] == best[0] and cand[1] < best[1]):
                best = cand
        memo[u] = best
        return best

    def path(self, src: str, dst: str) -> PairPath:
        """Path properties from ``src`` to ``dst`` (cached per source)."""
        key = (src, dst)
        p = self._paths.get(key)
        if p is None:
            if src == dst:
                raise PlanningError(f"path from {src!r} to itself requested; a rank cannot send to itself")
            best = self._best(self.graph.index(src), self.graph.index(dst))
            if best is None:
                raise PlanningError(f"no route from {src!r} to {dst!r} in the topology; check its links")
            rate, delay, bits, hops = best
            kind = NETWORK if bits & 2 else (PCIE if bits & 1 else NVLINK)
            p = self._paths[key] = PairPath(rate, delay, kind, hops)
        return p

    def direct(self, src: str, dst: str) -> bool:
        """Whether ``src`` reaches ``dst`` over one scale-up link of its own (a ``mesh`` fabric's GPU pair)."""
        p = self.path(src, dst)
        return p.hops == 1 and p.kind != NETWORK

    def wire_overhead(self, src: str, dst: str) -> float:
        """Wire bytes per payload byte of a Simple stream from ``src`` to ``dst`` (protocol framing).

        The fabric's ``wire_overhead``; on NVLink it depends on the GPU generation (NCCL's per-link
        NVLink bandwidth by compute capability, ``[links.nvlink] wire_overhead_by_arch``): the larger
        of the two ends' when they differ; an end that is not a GPU (an NVLS endpoint) takes the other's.
        """
        p = self.path(src, dst)
        lt = self.tuning.links[p.kind]
        if not lt.wire_overhead_by_arch:
            return lt.wire_overhead
        archs = [a for a in (self.architecture(src), self.architecture(dst)) if a]
        return max((lt.overhead(a) for a in archs), default=lt.wire_overhead)

    def hop_bandwidth_Bps(self, src: str, dst: str) -> float:
        """Expected payload bandwidth of one Simple-protocol stream from ``src`` to ``dst``, bytes/s."""
        p = self.path(src, dst)
        lt = self.tuning.links[p.kind]
        return p.rate_bps / 8.0 * lt.efficiency / self.wire_overhead(src, dst)

    def nic_of(self, gpu: str) -> str:
        """The NIC that serves ``gpu`` (its rail switch, or the GPU itself, if the graph names none)."""
        nic = self._nic_of.get(gpu)
        return nic if nic is not None else self.rail_of(gpu)

    def rail_of(self, gpu: str) -> str:
        """The rail (first network switch behind the GPU's NIC); the GPU itself if it has none."""
        r = self._rail.get(gpu)
        if r is not None:
            return r
        graph = self.graph
        s = graph.index(self._nic_of.get(gpu, gpu))
        seen = {s}
        queue = deque([s])
        r = gpu
        while queue:
            u = queue.popleft()
            hit = None
            for v, li in self._adj[u]:
                if graph.links[li].kind == NETWORK:
                    hit = graph.nodes[v].name
                    break
            if hit is not None:
                r = hit
                break
            for v, _li in self._adj[u]:
                if v not in seen and graph.nodes[v].kind != HOST:
                    seen.add(v)
                    queue.append(v)
        self._rail[gpu] = r
        return r
