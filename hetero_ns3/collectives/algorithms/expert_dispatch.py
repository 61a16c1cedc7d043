"""Deduplicating, hierarchical MoE token exchange (DeepEP / HybridEP, Megatron-Core's ``flex`` dispatcher).

NCCL's all-to-all (Megatron-Core's ``alltoall`` dispatcher) sends one copy of a token per routed expert, so a
token whose ``top_k`` experts sit on ``m`` ranks of another node crosses the network ``m`` times. The kernels
of DeepEP (DeepSeek-V3 technical report, arXiv 2412.19437, Sec. 3.2.2: a token goes over InfiniBand to the GPU
with the same in-node index on each target node, then over NVLink to the GPUs holding its experts) and of
NVIDIA's HybridEP (the same split into an RDMA and an NVLink domain) send a token once per destination node
over the network and once per destination rank inside a node. This algorithm moves those bytes:

* to a rank of the same node: ``u p_rank`` bytes, directly;
* to another node: ``u p_node`` bytes over the network to the relay (the group's GPU on that node with the
  sender's in-node index, which is the sender's rail on a rail-optimized fabric; else the rank at the sender's
  position among its node's group ranks), and ``u p_rank`` bytes from the relay to each other rank of the
  node; the kernels forward a few tokens at a time as they arrive, so the forwarding runs concurrently with
  the network leg (modelled as flows that start with it: the call ends when both have moved their bytes; the
  delay of one forwarded chunk is neglected);

where ``u = size / top_k`` is the sender's token bytes (``size``, the NCCL-style size of the call, counts one
copy per routed expert), ``p_rank`` the probability that a token needs a given rank (holding ``e = E / n``
contiguous experts) and ``p_node`` the same for the experts of the group ranks on a node
(:func:`hetero_ns3.collectives.moe_routing.held_hit_probability`: ``1 - C(E - h, k) / C(E, k)`` for ``top_k`` of
``experts`` picked uniformly, Megatron-Core's forced load balancing and the expectation of any balanced router;
smaller under DeepSeek's group-limited routing, whose groups a node's experts fill). The combine moves the same
bytes the other way (partial sums reduced at the relay before the network, as DeepEP's combine does); the
workload issues it as another call of the same shape, planned as this one.
"""

from __future__ import annotations

from hetero_ns3.collectives.algorithms.alltoall import exchange_cost, exchange_entries
from hetero_ns3.collectives.emit import Emitter, split
from hetero_ns3.collectives.env import CollectiveEnv
from hetero_ns3.collectives.moe_routing import held_hit_probability, rank_experts
from hetero_ns3.collectives.registry import register
from hetero_ns3.collectives.types import ALL_TO_ALL, CollectiveCall

Leg = tuple[int, int, int, int]
"""(sender rank, from rank, to rank, bytes): one hop of the bytes ``sender`` sends (``from == sender`` first)."""


def relay_rank(ranks: list[int], local: list[int], sender: int, position: int) -> int:
    """The rank of another node's ``ranks`` that receives ``sender``'s tokens for that node: the GPU with the
    sender's in-node index (DeepSeek-V3's rule; on a rail-optimized fabric the sender's rail), else the rank at
    the sender's position among its own node's group ranks, so that no relay serves more senders than another."""
    same = [j for j in ranks if local[j] == local[sender]]
    return same[0] if same else ranks[position % len(ranks)]


def dispatch_legs(call: CollectiveCall, env: CollectiveEnv) -> list[tuple[Leg, list[Leg]]]:
    """Every first hop of the exchange with the relay hops that follow it (memoized per env and call shape)."""
    assert call.routing is not None
    key = ("expert_dispatch", call.group, call.size_bytes, call.routing)
    hit = env.cache.get(key)
    if hit is not None:
        return hit  # type: ignore[return-value]
    routing = call.routing
    group = call.group
    n = len(group)
    token_bytes = call.size_bytes / routing[1]
    held = [rank_experts(routing, n, r) for r in range(n)]
    rank_bytes = [round(token_bytes * held_hit_probability(routing, h)) for h in held]
    nodes = [env.node_of(g) for g in group]
    local = [env.local_of(g) for g in group]
    members: dict[str, list[int]] = {}
    for r, nd in enumerate(nodes):
        members.setdefault(nd, []).append(r)
    position = {r: p for ranks in members.values() for p, r in enumerate(ranks)}
    node_hit = {nd: held_hit_probability(routing, (x for r in ranks for x in held[r])) for nd, ranks in members.items()}
    out: list[tuple[Leg, list[Leg]]] = []
    for i in range(n):
        for nd, ranks in members.items():
            if nd == nodes[i]:
                out.extend(((i, i, j, rank_bytes[j]), []) for j in ranks if j != i)
                continue
            relay = relay_rank(ranks, local, i, position[i])
            node_bytes = round(token_bytes * node_hit[nd])
            out.append(((i, i, relay, node_bytes), [(i, relay, j, rank_bytes[j]) for j in ranks if j != relay]))
    env.cache[key] = out
    return out


class ExpertDispatch:
    """MoE token dispatch / combine that sends a token once per destination node and rank (``flex``)."""

    name = "expert_dispatch"
    ops = frozenset({ALL_TO_ALL})
    family = "ring"
    auto = False

    def check(self, call: CollectiveCall, env: CollectiveEnv) -> str | None:
        if call.op not in self.ops:
            return "expert_dispatch implements all_to_all"
        if call.routing is None:
            return "expert_dispatch needs the call's routing (experts, top_k[, groups, group_topk])"
        if call.routing[0] % len(call.group):
            return f"expert_dispatch needs the {call.routing[0]} experts split evenly over the {len(call.group)} ranks"
        return None

    def cost(self, call: CollectiveCall, env: CollectiveEnv, protocol: str, channels: int):
        group = call.group
        legs = dispatch_legs(call, env)
        edges = [(group[a], group[b], nb) for first, rest in legs for _, a, b, nb in (first, *rest)]
        return exchange_cost(call, env, protocol, edges, 2 if any(rest for _, rest in legs) else 1)

    def plan(self, em: Emitter) -> None:
        group = em.call.group
        qps, entry = exchange_entries(em)
        for (_, i, j, nb), rest in dispatch_legs(em.call, em.env):
            for c, part in enumerate(split(nb, qps)):
                em.flow(group[i], group[j], part, (entry[i], entry[j]), c, "a2a")
            for _, a, b, fb in rest:  # forwarded in small chunks as they arrive: concurrent with the network leg
                for c, part in enumerate(split(fb, qps)):
                    em.flow(group[a], group[b], part, (entry[i], entry[a], entry[b]), c, "a2a")


register(ExpertDispatch())
