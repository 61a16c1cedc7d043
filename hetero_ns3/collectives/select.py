"""Selection of algorithm, protocol and channel count per call, like NCCL's tuner.

For every algorithm the selector may use for the op (``auto`` algorithms; an ``algo`` override
narrows it to one) and every enabled protocol (or the ``protocol`` override), the cost model gives a
time (plus the tuning's launch cost, the same for all, so it only enters the reported prediction); the
fastest wins. The channel count is the override or
``clamp(bytes per rank and step // min_bytes_per_channel, 1, max)`` (see :func:`default_channels`).
Choices are memoized per env for repeated calls of the same shape.
"""

from __future__ import annotations

import math

from hetero_ns3.collectives.mesh import mesh_rings, round_channels
from hetero_ns3.collectives.registry import auto_candidates, get_algorithm
from hetero_ns3.collectives.types import (
    ALL_GATHER,
    ALL_REDUCE,
    ALL_TO_ALL,
    ALL_TO_ALL_V,
    PROTOCOLS,
    REDUCE_SCATTER,
    SEND_RECV,
    Choice,
    CollectiveCall,
)
from hetero_ns3.errors import PlanningError


def default_channels(call: CollectiveCall, max_channels: int, min_bytes: int) -> int:
    """Channel count for ``call`` when not overridden.

    Each channel should move at least ``min_bytes`` per rank and step: ``size / n`` per step for
    the ops that split the buffer over the ranks (all-reduce, reduce-scatter, all-gather,
    all-to-all), ``size`` for the others. So large groups with small buffers use few channels and
    the flow count stays bounded, as NCCL lowers its channel count for small per-rank chunks.
    """
    split_ops = (ALL_REDUCE, REDUCE_SCATTER, ALL_GATHER, ALL_TO_ALL, ALL_TO_ALL_V)
    per_step = call.size_bytes // len(call.group) if call.op in split_ops else call.size_bytes
    return max(1, min(max_channels, per_step // min_bytes))


def _one_rank_per_node(call: CollectiveCall, env) -> bool:
    """True when ``call`` has >= 2 ranks, each on a node of its own (every ring step crosses the network).

    For such communicators NCCL's channel count comes from its inter-node graph search: one ring channel
    per NIC a rank can use, at that NIC's speed (``ncclTopoCompute``, src/graph/search.cc), then doubled
    for rings (``ncclTopoPostset``, src/graph/connect.cc): 2 channels with one NIC per GPU, the value of
    ``Tuning.inter_node_ring_channels`` to use (NCCL 2.18-2.21 source; off by default).
    """
    n = 2 if call.op == SEND_RECV else len(call.group)
    return n >= 2 and call.op != SEND_RECV and len(env.nodes_of(call.group)) == n


def choose(call: CollectiveCall, env) -> Choice:
    """The :class:`Choice` for ``call`` (see the module docstring)."""
    key = ("choice", call.op, call.group, call.size_bytes, call.algo, call.protocol, call.channels, call.root,
           call.peer, call.pair_bytes)  # fmt: skip
    hit = env.cache.get(key)
    if hit is not None:
        return hit
    t = env.tuning
    channels = call.channels or default_channels(call, t.max_channels, t.min_bytes_per_channel)
    if call.channels is None and t.inter_node_ring_channels > 0 and _one_rank_per_node(call, env):
        channels = min(channels, t.inter_node_ring_channels)
    if call.channels is None and call.op != SEND_RECV:
        channels = round_channels(channels, mesh_rings(env, call.group))  # every mesh link equally loaded
    if call.algo is not None:
        algo = get_algorithm(call.algo)
        if call.op not in algo.ops:
            raise PlanningError(
                f"call.algo ({call.algo!r}) does not implement {call.op}; it implements {sorted(algo.ops)}"
            )
        why = algo.check(call, env)
        if why:
            raise PlanningError(f"call.algo ({call.algo!r}) cannot run this call: {why}")
        algos = [algo]
    else:
        algos = [a for a in auto_candidates(call.op) if a.check(call, env) is None]
        if not algos:
            raise PlanningError(f"no algorithm can run {call.op} on this group; pass call.algo explicitly")
    protocols = (call.protocol,) if call.protocol else t.enabled_protocols
    n = 2 if call.op == SEND_RECV else len(call.group)
    if n < 2 or call.size_bytes <= 0:
        choice = Choice(algos[0].name, protocols[-1] if "Simple" not in protocols else "Simple", channels, 0.0, None,
                        "override" if call.algo else "model")  # fmt: skip
        env.cache[key] = choice
        return choice
    best = None
    cands: dict[str, float] = {}
    for a in algos:
        for p in protocols:
            if p not in PROTOCOLS:
                raise PlanningError(f"call.protocol ({p!r}) is not one of {list(PROTOCOLS)}")
            secs, hop = a.cost(call, env, p, channels)
            secs += t.launch_s  # the same for every candidate: reported, never decides
            cands[f"{a.name}/{p}"] = secs
            if best is None or secs < best[0]:
                best = (secs, a.name, p, hop)
    assert best is not None  # algos and protocols are non-empty
    if best[0] == math.inf:  # e.g. NVLS with LL / LL128 only
        raise PlanningError(f"no protocol of {sorted(protocols)} can run {call.op} with {sorted(a.name for a in algos)}; "
                            "NVLS runs the Simple protocol only (call.protocol)")  # fmt: skip
    source = "override" if (call.algo or call.protocol or call.channels) else "model"
    choice = Choice(best[1], best[2], channels, best[0], best[3], source, cands)
    env.cache[key] = choice
    return choice
