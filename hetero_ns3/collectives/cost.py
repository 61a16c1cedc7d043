"""The cost model: NCCL-like latency + size / bandwidth per algorithm and protocol.

Time of a call = latency + bottleneck load / protocol bandwidth factor, where

* **latency** follows NCCL's ``ncclTopoTuneModel`` (``collectives/tuning.toml`` cites it): a base
  latency per algorithm and protocol, plus per-step hardware latencies of the link types crossed
  (ring: ``(steps - inter-node steps) x intra + inter-node steps x network``; tree:
  ``2 x ((ranks per node - 1) x intra + floor(log2 nodes) x network)``);
* **bandwidth** is computed from the algorithm's own edges: every directed GPU-to-GPU edge loads the
  resources it crosses (a network edge: the NIC egress of its source rail and the NIC ingress of its
  destination rail; an NVLink/PCIe edge: the source GPU's egress and the destination's ingress, or on a
  ``mesh`` fabric the direct GPU-to-GPU link itself) with
  the bytes it carries; the most loaded resource relative to its payload rate
  (``line rate x efficiency / wire overhead``) sets the transfer time. This is what makes a
  mixed-speed ring as slow as its slowest hop and a multi-channel ring use several NIC rails;
* **protocol factors** are NCCL's (LL / LL128 / tree refinements, see ``[bandwidth]``).
"""

from __future__ import annotations

import math
from collections.abc import Iterable

from hetero_ns3.collectives.env import NETWORK, CollectiveEnv
from hetero_ns3.collectives.types import ALL_REDUCE, REDUCE, REDUCE_SCATTER, Hop

Edge = tuple[str, str, float]
"""(source GPU, destination GPU, payload bytes)."""


def bottleneck(env: CollectiveEnv, edges: Iterable[Edge]) -> tuple[float, Hop | None]:
    """Transfer time (s) of ``edges`` limited by their most loaded resource, and that resource's hop."""
    load: dict[tuple, float] = {}
    cap: dict[tuple, float] = {}
    owner: dict[tuple, tuple[str, str, str]] = {}
    for src, dst, nbytes in edges:
        if nbytes <= 0:
            continue
        p = env.path(src, dst)
        bw = env.hop_bandwidth_Bps(src, dst)
        keys: tuple[tuple[str, str, str], ...]
        if p.kind == NETWORK:
            keys = (
                ("nic-out", env.node_of(src), env.nic_of(src)),
                ("nic-in", env.node_of(dst), env.nic_of(dst)),
            )
        elif env.direct(src, dst):  # a direct GPU-to-GPU link of a mesh fabric: the link itself is the resource
            keys = (("link", src, dst),)
        else:
            keys = (("out", src, p.kind), ("in", dst, p.kind))
        for k in keys:
            load[k] = load.get(k, 0.0) + nbytes
            c = cap.get(k)
            if c is None or bw < c:
                cap[k] = bw
                owner[k] = (src, dst, p.kind)
    worst_t, worst = 0.0, None
    for k, ld in load.items():
        t = ld / cap[k]
        if t > worst_t:
            worst_t, worst = t, k
    if worst is None:
        return 0.0, None
    s, d, kind = owner[worst]
    return worst_t, Hop(s, d, cap[worst], kind)


def intra_kind(env: CollectiveEnv, pairs: Iterable[tuple[str, str]]) -> str:
    """``pcie`` if any intra-node pair of ``pairs`` goes over PCIe, else ``nvlink``."""
    for s, d in pairs:
        if env.node_of(s) == env.node_of(d) and env.path(s, d).kind == "pcie":
            return "pcie"
    return "nvlink"


def ring_latency_s(
    env: CollectiveEnv, protocol: str, steps: int, inter_steps: int, intra: str, multi: bool, one_per_node: bool = False
) -> float:
    """NCCL ring latency: base + (steps - inter) x intra-hop + inter x network-hop latency (s).

    With one rank per node NCCL v2.30.7 charges the tree's network latency per step ("latencies are
    fully exposed"), as :meth:`~hetero_ns3.collectives.emit.Emitter.step_latency_s` does in the plan.
    """
    t = env.tuning
    lat_intra = t.hw_latency(intra, "ring", protocol)
    if protocol == "LL" and multi:
        lat_intra *= t.ll_multinode_intra_latency_factor
    if multi:  # NCCL v2.30.7: inter-node rings still post every step to the network proxy
        lat_intra = max(lat_intra, t.net_overhead_s.get(protocol, 0.0))
    lat_inter = t.hw_latency(NETWORK, "tree" if one_per_node else "ring", protocol)
    return t.base_latency_s["ring"][protocol] + (steps - inter_steps) * lat_intra + inter_steps * lat_inter


def tree_latency_s(env: CollectiveEnv, protocol: str, ranks_per_node: int, nodes: int, intra: str) -> float:
    """NCCL tree latency: base + 2 x ((ppn - 1) x intra + floor(log2 nodes) x network) (s)."""
    t = env.tuning
    lat_intra = t.hw_latency(intra, "tree", protocol)
    if protocol == "LL" and nodes > 1:
        lat_intra *= t.ll_multinode_intra_latency_factor
    lat_inter = t.hw_latency(NETWORK, "tree", protocol)
    log_nodes = int(math.log2(nodes)) if nodes > 1 else 0
    return t.base_latency_s["tree"][protocol] + 2 * ((ranks_per_node - 1) * lat_intra + log_nodes * lat_inter)


def ll_max_busbw_Bps(env: CollectiveEnv, group: tuple[str, ...], n_nodes: int) -> float:
    """NCCL's cap on the LL protocol's bus bandwidth (``llMaxBws``), bytes/s; inf without a cap.

    One node: per GPU architecture (the slowest of the group; the smallest listed value for an unknown
    architecture); several nodes: one value for two nodes, one for more (NCCL's Intel-CPU row).
    """
    caps = env.tuning.ll_max_busbw_Bps
    if caps is None:
        return math.inf
    if n_nodes > 1:
        return caps.two_nodes if n_nodes == 2 else caps.more_nodes
    key = ("ll-cap", group)
    hit = env.cache.get(key)
    if hit is None:
        lowest = min(caps.one_node.values())
        hit = min(caps.one_node.get(env.architecture(g), lowest) for g in group)
        env.cache[key] = hit
    return float(hit)  # type: ignore[arg-type]


def ring_protocol_factor(env: CollectiveEnv, op: str, protocol: str, multi: bool, one_per_node: bool) -> float:
    """NCCL's ring bandwidth refinement for ``protocol`` (fraction of the Simple bandwidth)."""
    b = env.tuning.bandwidth
    if protocol == "LL":
        return b["ring_ll"] if (multi or op in (ALL_REDUCE, REDUCE)) else b["ring_ll_other"]
    if protocol == "LL128":
        return b["ring_ll128_one_per_node"] if one_per_node else b["ring_ll128"]
    return 1.0


def tree_protocol_factor(env: CollectiveEnv, protocol: str, multi: bool) -> float:
    """NCCL's tree bandwidth refinement (includes the 0.9 of every tree protocol)."""
    b = env.tuning.bandwidth
    f = b["tree"]
    if protocol == "LL":
        f *= b["tree_ll"]
    elif protocol == "LL128":
        f *= b["tree_ll128_multi_node"] if multi else b["tree_ll128_single_node"]
    return f


def is_reducing(op: str) -> bool:
    return op in (ALL_REDUCE, REDUCE_SCATTER, REDUCE)
