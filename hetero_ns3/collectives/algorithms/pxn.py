"""PXN all-to-all: relay inter-node blocks over NVLink to the GPU on the destination's rail.

For a pair (i, j) on different nodes, if another rank of i's node sits on j's NIC rail, the block
first crosses the intra-node fabric to that rank and then leaves through its NIC, so the network hop
stays inside j's rail (NCCL's "PXN", PCI x NVLink). Otherwise (same node, or no such rank) the block
goes directly.
"""

from __future__ import annotations

from hetero_ns3.collectives.algorithms.alltoall import a2a_cost, emit_a2a
from hetero_ns3.collectives.emit import Emitter
from hetero_ns3.collectives.env import CollectiveEnv
from hetero_ns3.collectives.registry import register
from hetero_ns3.collectives.types import ALL_TO_ALL, ALL_TO_ALL_V, CollectiveCall


def pxn_route(env: CollectiveEnv, group: tuple[str, ...]):
    """The route function of PXN for ``group`` (memoized per env)."""
    key = ("pxn", group)
    hit = env.cache.get(key)
    if hit is not None:
        return hit
    by_node_rail: dict[tuple[str, str], int] = {}
    for r, g in enumerate(group):
        by_node_rail.setdefault((env.node_of(g), env.rail_of(g)), r)
    nodes = [env.node_of(g) for g in group]
    rails = [env.rail_of(g) for g in group]

    def route(i: int, j: int) -> list[tuple[int, int]]:
        if nodes[i] == nodes[j] or rails[i] == rails[j]:
            return [(i, j)]
        relay = by_node_rail.get((nodes[i], rails[j]))
        if relay is None or relay == i:
            return [(i, j)]
        return [(i, relay), (relay, j)]

    env.cache[key] = route
    return route


class PxnAllToAll:
    """All-to-all with NVLink relay to the destination rail (opt-in: ``--algo pxn``)."""

    name = "pxn"
    ops = frozenset({ALL_TO_ALL, ALL_TO_ALL_V})
    family = "ring"
    auto = False

    def check(self, call: CollectiveCall, env: CollectiveEnv) -> str | None:
        return None if call.op in self.ops else "pxn implements all_to_all and all_to_all_v"

    def cost(self, call: CollectiveCall, env: CollectiveEnv, protocol: str, channels: int):
        return a2a_cost(call, env, protocol, pxn_route(env, call.group))

    def plan(self, em: Emitter) -> None:
        emit_a2a(em, pxn_route(em.env, em.call.group))


register(PxnAllToAll())
