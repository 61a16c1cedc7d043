"""NVLS: all-reduce (and reduce-scatter / all-gather) through the NVSwitch's NVLink SHARP engine.

What NCCL 2.30 does inside one node (``src/device/all_reduce.h``, NVLS branch): every rank heads a
1/N chunk of each step; the head's ``multimem.ld_reduce`` makes the switch read that chunk from all
N GPUs and return the sum to the head, and its ``multimem.st`` of the sum makes the switch write it
to all N GPUs. So per GPU and direction the wire carries about S(1 + 1/N) bytes (ring: 2S(N-1)/N).
The heads are the NVLS graph's channels, at most ``NCCL_MAX_NVLS_ARITY`` = 32 (``src/graph/search.cc``):
an all-reduce over more GPUs (a GB200 NVL72 rack) reduces through 32 heads, whose ports carry
S(1 + 1/32); the other GPUs' S (``[nvls].max_heads``, :func:`nvls_heads`).

How it is planned here. The NVSwitch's reduction engine is an endpoint of the network graph (the
node's ``n<i>.nvls`` host, see ``topology/fabric.py``), so flows can end and start at the switch in
both backends. The buffer is processed in *rounds*: one round is one NCCL chunk per channel and head
(``[nvls].channels`` x heads x chunk bytes of the buffer, chunk from NCCL's size rule), with the
channels merged, and at most ``[nvls].max_rounds`` rounds (larger buffers: larger rounds). A round
of an all-reduce is

1. *reads*: one flow per GPU to the switch carrying that GPU's copy of every head's chunk;
2. a zero-time *reduction* at the switch once all reads of the round arrived;
3. *results*: one flow switch -> head per head (the sum of its chunk);
4. *stores*: one flow head -> switch per head, after its result (``multimem.st``);
5. a zero-time *multicast* release at the switch once all stores arrived;
6. *multicast*: one flow switch -> GPU per GPU carrying every head's reduced chunk.

The multicast is N unicast flows on the switch's egress ports: NVLink multicast replicates inside
the switch, so each egress port carries one copy, which is what these flows put on each port (the
endpoint's own link is as fast as all ports together and never limits). Reduce-scatter is steps 1-3
(each head keeps its reduced chunk), all-gather steps 4-6 (each rank stores its own chunk). Flows
of one connection keep ``inflight_slices`` rounds in flight, so reads of the next rounds overlap the
multicast of the current one, as NCCL's step buffers do.

Wire bytes: payload x the NVLink ``wire_overhead`` (as for ring) / ``[nvls].efficiency`` of the GPU
architecture (NCCL's ``nvlsEfficiency``) x (1 + ``chunk_overhead_bytes`` / chunk), the fitted fixed
cost per chunk operation. Latency: ``[nvls].latency_us`` (NCCL's NVLS hwLat; its baseLat is 0) in
every rank's entry task. Protocol: Simple only, as in NCCL.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from hetero_ns3.collectives.emit import Emitter, split
from hetero_ns3.collectives.env import CollectiveEnv
from hetero_ns3.collectives.registry import register
from hetero_ns3.collectives.types import ALL_GATHER, ALL_REDUCE, REDUCE_SCATTER, CollectiveCall, Hop

NVLS_OPS = frozenset({ALL_REDUCE, REDUCE_SCATTER, ALL_GATHER})


def nvls_support(env: CollectiveEnv, group: tuple[str, ...]) -> str | None:
    """Why the GPUs of ``group`` (one node or several) cannot use NVLS; None if they can."""
    nv = env.tuning.nvls
    if nv is None:
        return "the tuning file has no [nvls] table"
    for g in group:
        if env.nvls_endpoint(g) is None:
            return f"node of {g} has no NVLS-capable NVSwitch (catalog flag nvls, fabric nvls)"
        if env.architecture(g) not in nv.efficiency:
            return f"{g} ({env.gpu_type(g)}) has no NVLS efficiency in [nvls].efficiency"
    return None


def wire_scale(env: CollectiveEnv, gpu: str, chunk: int) -> float:
    """Wire bytes per payload byte of NVLS traffic of ``gpu`` beyond the NVLink wire overhead."""
    nv = env.tuning.nvls
    assert nv is not None
    return (1.0 + nv.chunk_overhead_bytes / chunk) / nv.efficiency[env.architecture(gpu)]


def nvls_heads(gpus: Sequence[str], max_heads: int) -> tuple[str, ...]:
    """The GPUs of one node that head an NVLS all-reduce (reduce a chunk each and store it).

    NCCL's NVLS graph has one channel per head and at most ``NCCL_MAX_NVLS_ARITY`` (32) of them
    (``[nvls].max_heads``): every GPU of a node of up to 32, else 32 spread evenly over the node (which
    GPUs NCCL's search picks is not modelled; spreading them spreads NVLS-Tree's NICs over the trays).
    """
    n = len(gpus)
    if n <= max_heads:
        return tuple(gpus)
    return tuple(gpus[(j * n) // max_heads] for j in range(max_heads))


def port_bytes(op: str, size: int, n: int, heads: int | None = None) -> tuple[float, float]:
    """(egress, ingress) payload bytes of the busiest GPU port of an NVLS ``op`` over ``n`` ranks.

    An all-reduce's busiest port is a head's: its whole buffer in and out plus its ``1 / heads`` chunk.
    """
    if op == ALL_REDUCE:
        h = n if heads is None else heads
        return size * (1 + 1 / h), size * (1 + 1 / h)
    if op == REDUCE_SCATTER:
        return float(size), size / n
    return size / n, float(size)  # all-gather


def nvls_rounds(env: CollectiveEnv, size: int, heads: int, chunk: int) -> int:
    """Rounds of an NVLS call: buffer / (channels x heads x chunk), at least 1, at most ``max_rounds``."""
    nv = env.tuning.nvls
    assert nv is not None
    return max(1, min(nv.max_rounds, math.ceil(size / (nv.channels * heads * chunk))))


def nvls_cost(env: CollectiveEnv, call: CollectiveCall, protocol: str) -> tuple[float, Hop | None]:
    """Cost-model time of a single-node NVLS call: latency + busiest port / NVLS rate + one round."""
    group = call.group
    n = len(group)
    nv = env.tuning.nvls
    if n < 2 or call.size_bytes <= 0 or nv is None:
        return 0.0, None
    if protocol != "Simple":
        return math.inf, None
    h = nv.heads(call.op, n)
    chunk = nv.chunk(call.size_bytes, h)
    out_b, in_b = port_bytes(call.op, call.size_bytes, n, h)
    worst_t, hop = 0.0, None
    for g in group:
        ep = env.nvls_endpoint(g)
        assert ep is not None
        rate = env.hop_bandwidth_Bps(g, ep) / wire_scale(env, g, chunk)
        t = max(out_b, in_b) / rate
        if t > worst_t:
            worst_t, hop = t, Hop(g, ep, rate, env.path(g, ep).kind)
    rounds = nvls_rounds(env, call.size_bytes, h, chunk)
    return nv.latency_s + worst_t * (1 + 1 / rounds), hop


def emit_nvls_rounds(
    em: Emitter,
    gpus: tuple[str, ...],
    op: str,
    size: int,
    ready: dict[str, int],
    chunk: int,
    ch: int = 0,
) -> dict[str, list[int]]:
    """Emit the rounds of a single-node NVLS ``op`` over ``gpus``; ``ready[g]`` gates rank ``g``.

    Returns per GPU the tasks after which its output is final: multicast arrivals (all-reduce,
    all-gather) or its reduced chunks (reduce-scatter). Used by NVLS and NVLS-Tree.
    """
    env = em.env
    ep = env.nvls_endpoint(gpus[0])
    assert ep is not None
    em.b.endpoint(ep)
    scale = {g: wire_scale(env, g, chunk) for g in gpus}
    # All-reduce: the heads reduce and store one chunk each; reduce-scatter / all-gather: every rank its own.
    nv = env.tuning.nvls
    assert nv is not None
    hg = nvls_heads(gpus, nv.max_heads) if op == ALL_REDUCE else tuple(gpus)
    rounds = nvls_rounds(env, size, len(hg), chunk)
    done: dict[str, list[int]] = {g: [] for g in gpus}
    for part in split(size, rounds):
        heads = split(part, len(hg))  # head j's chunk of this round
        if op in (ALL_REDUCE, REDUCE_SCATTER):
            reads = [em.flow(g, ep, part, (ready[g],), ch, "nvls-read", scale[g]) for g in gpus]
            red = em.b.add_barrier(ep, reads, label=em.label(ch, "nvls-reduce"), category=em.category, channel=ch)
            have = {g: em.flow(ep, g, heads[j], (red,), ch, "nvls-result", scale[g]) for j, g in enumerate(hg)}
        else:
            have = {g: ready[g] for g in gpus}
        if op == REDUCE_SCATTER:
            for g in gpus:
                done[g].append(have[g])
            continue
        stores = [em.flow(g, ep, heads[j], (have[g],), ch, "nvls-store", scale[g]) for j, g in enumerate(hg)]
        mc = em.b.add_barrier(ep, stores, label=em.label(ch, "nvls-multicast"), category=em.category, channel=ch)
        for g in gpus:
            done[g].append(em.flow(ep, g, part, (mc,), ch, "nvls-multicast", scale[g]))
    return done


class Nvls:
    """NCCL's NVLS algorithm inside one node (all-reduce, reduce-scatter, all-gather)."""

    name = "nvls"
    ops = NVLS_OPS
    family = "nvls"
    auto = True

    def check(self, call: CollectiveCall, env: CollectiveEnv) -> str | None:
        if len(env.nodes_of(call.group)) > 1:
            return "nvls runs inside one node (several nodes: nvls_tree, all-reduce only)"
        return nvls_support(env, call.group)

    def cost(self, call: CollectiveCall, env: CollectiveEnv, protocol: str, channels: int):
        return nvls_cost(env, call, protocol)

    def plan(self, em: Emitter) -> None:
        call, env = em.call, em.env
        nv = env.tuning.nvls
        assert nv is not None
        ready = {g: em.entry(g, nv.latency_s) for g in call.group}
        if len(call.group) < 2 or call.size_bytes <= 0:
            return
        chunk = nv.chunk(call.size_bytes, nv.heads(call.op, len(call.group)))
        emit_nvls_rounds(em, call.group, call.op, call.size_bytes, ready, chunk)


register(Nvls())
