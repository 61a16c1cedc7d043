"""ECMP hashes of the two backends, vectorized over flows.

:func:`ecmp_hash` is the flow level's own splitmix64 mix of ``(key, node, seed)``;
:func:`packet_backend_hash` reproduces the packet backend's switches (``RoceNode::SelectPort``), so
that both backends can pick the same next hop for the same flow (docs/topologies.md, "ECMP").
"""

from __future__ import annotations

import numpy as np

_M1 = np.uint64(0xBF58476D1CE4E5B9)
_M2 = np.uint64(0x94D049BB133111EB)
_GOLD = np.uint64(0x9E3779B97F4A7C15)
_MASK = 0xFFFFFFFFFFFFFFFF


def ecmp_hash(flow_id: np.ndarray, node: np.ndarray, seed: int) -> np.ndarray:
    """A 64-bit mix (splitmix64 finalizer) of ``(flow id, node, seed)``; uint64 array, deterministic."""
    x = flow_id.astype(np.uint64) * _GOLD
    x ^= node.astype(np.uint64) + np.uint64(0x632BE59BD9B4E019)
    x += np.uint64((seed * 0x94D049BB133111EB) & 0xFFFFFFFFFFFFFFFF)
    for shift, mul in ((30, _M1), (27, _M2)):
        x ^= x >> np.uint64(shift)
        x *= mul
    x ^= x >> np.uint64(31)
    return x


def _mix64(x: np.ndarray) -> np.ndarray:
    x = x ^ (x >> np.uint64(30))
    x = x * _M1
    x = x ^ (x >> np.uint64(27))
    x = x * _M2
    return x ^ (x >> np.uint64(31))


def packet_backend_hash(
    flow_seq: np.ndarray, node: np.ndarray, src: np.ndarray, dst: np.ndarray, ecmp_seed: int = 0
) -> np.ndarray:
    """The per-flow ECMP hash of the packet backend's switches (``RoceNode::SelectPort``), vectorized.

    ``flow_seq`` is the packet backend's flow number (flows are numbered as they are released), from which
    it derives the UDP source port; ``node``, ``src``, ``dst`` are node indices; the UDP destination port
    is RoCEv2's 4791. The next hop is ``hops[hash % len(hops)]`` over the next-hop list in routing-table order.
    """
    u = np.uint64
    sport = u(49152) + ((((flow_seq.astype(u) * u(2654435761)) & u(0xFFFFFFFF)) >> u(18)) % u(16384))
    h = _mix64((u(ecmp_seed) << u(32)) ^ node.astype(u))
    h = _mix64(h ^ ((src.astype(u) << u(32)) | dst.astype(u)))
    return _mix64(h ^ ((sport << u(16)) | u(4791)) ^ (u(17) << u(40)))


def native_seed_word(seed: int, packet: bool) -> int:
    """The 64-bit seed word the C route walk takes: the seed itself for the packet backend's hash, or the
    seed premixed as :func:`ecmp_hash` mixes it for the flow level's own hash."""
    return seed & _MASK if packet else (seed * int(_M2)) & _MASK
