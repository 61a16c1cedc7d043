"""Send/recv (pipeline parallelism): ``group[0]`` sends ``size_bytes`` to ``peer``.

The bytes go on ``min(channels, p2p_per_peer)`` queue pairs; the transfer waits for both sides to
join (the receiver's ``entry_deps`` model the posted receive). Both GPUs' exits wait for the data.
"""

from __future__ import annotations

from hetero_ns3.collectives.cost import ring_protocol_factor
from hetero_ns3.collectives.emit import Emitter, split
from hetero_ns3.collectives.env import CollectiveEnv
from hetero_ns3.collectives.registry import register
from hetero_ns3.collectives.types import SEND_RECV, CollectiveCall, Hop


class P2P:
    """Point-to-point send/recv."""

    name = "p2p"
    ops = frozenset({SEND_RECV})
    family = "ring"
    auto = True

    def check(self, call: CollectiveCall, env: CollectiveEnv) -> str | None:
        return None if call.op == SEND_RECV else "p2p implements send_recv only"

    def cost(self, call: CollectiveCall, env: CollectiveEnv, protocol: str, channels: int):
        src, dst = call.group[0], call.receiver
        if call.size_bytes <= 0:
            return 0.0, None
        p = env.path(src, dst)
        bw = env.hop_bandwidth_Bps(src, dst)
        tn = env.tuning
        multi = env.node_of(src) != env.node_of(dst)
        lat = tn.base_latency_s["ring"][protocol] + tn.hw_latency(p.kind, "ring", protocol)
        f = ring_protocol_factor(env, SEND_RECV, protocol, multi, multi)
        return lat + call.size_bytes / (bw * f), Hop(src, dst, bw, p.kind)

    def plan(self, em: Emitter) -> None:
        call = em.call
        src, dst = call.group[0], call.receiver
        lat = em.step_latency_s(src, dst, "ring")
        e_src, e_dst = em.entry(src, lat), em.entry(dst)
        qps = max(1, min(em.channels, em.tuning.p2p_per_peer))
        for c, nb in enumerate(split(call.size_bytes, qps)):
            em.flow(src, dst, nb, (e_src, e_dst), c, "p2p")


register(P2P())
