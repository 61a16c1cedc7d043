"""Task emission shared by the algorithms: flows with per-connection windows, reductions, latencies.

Every algorithm writes its plan through one :class:`Emitter`, which

* starts each rank with an *entry* compute task (the call's base latency, on stream ``COMM_STREAM``)
  that waits for the caller's ``entry_deps``;
* turns payload bytes into wire bytes (protocol framing x fabric overhead, see ``tuning.toml``);
* keeps at most ``inflight_slices`` flows in flight per connection (source, destination, channel):
  a flow waits for the completion of the flow ``inflight_slices`` places earlier on its connection,
  so slices pipeline through a chain instead of all starting at once;
* adds reductions as compute tasks on the receiving GPU, on the stream of its channel of the call's
  communicator (``COMM_STREAM + 64 x communicator + channel``; one communicator per parallel
  dimension: tp, pp, dp, ep);
* closes the call with one zero-time barrier per rank (the ``exits`` of the result).

Labels read ``<call label> <algo>/<protocol> ch<c> <what>``; every task also carries its channel ``c`` in
``ExecutionPlan.channel`` (what connections, tables and traces read; the label is for people).
"""

from __future__ import annotations

import math
import zlib
from collections.abc import Iterable, Mapping, Sequence

from hetero_ns3.collectives.env import CollectiveEnv
from hetero_ns3.collectives.types import CollectiveCall
from hetero_ns3.plan.builder import PlanBuilder
from hetero_ns3.plan.dag import COMM_STREAM

#: Stream ids of one communicator's channels: COMM_STREAM + STREAMS_PER_COMMUNICATOR x index + channel.
STREAMS_PER_COMMUNICATOR = 64
#: Each parallel dimension's collectives run in their own NCCL communicator, whose kernels go to
#: their own CUDA streams (PyTorch's ProcessGroupNCCL keeps one stream per process group and device),
#: so a DP bucket waiting for a slower replica does not hold back the TP or PP kernels issued after
#: it. Calls of one communicator stay in order. Other categories share the first communicator's streams.
_COMMUNICATOR = {"tp": 0, "pp": 1, "dp": 2, "ep": 3, "cp": 4, "offload": 5}  # offload: host copies, one stream
#: Pipeline send/recv calls: first stream (less ``COMM_STREAM``) of the per-pair stream sets, and the
#: number of 8-channel sets ordered GPU pairs are hashed onto (a collision puts two pairs in one queue).
PP_PAIR_STREAM_BASE = 1024
PP_STREAM_PAIRS = 512


def comm_stream(category: str, channel: int = 0, group: Sequence[str] = (), op: str = "") -> int:
    """Stream id of channel ``channel`` of a collective ``op`` of ``category`` over ``group``.

    Pipeline (``pp``) and other point-to-point (``send_recv``) calls get one stream set per ordered
    (sender, receiver) pair (a trace imported without our dimension attributes keeps this too):
    sends between two GPUs in one direction stay in order (one FIFO connection), while a send to the
    next stage no longer queues behind a receive from the previous stage that the lowering emitted
    earlier (emission order is not each GPU's program order; this stretched interleaved pipelines:
    issue 19, GPT-3 175B TP4 PP8 VP12 on h0 5824 -> 3213 ms).
    """
    if (category == "pp" or op == "send_recv") and len(group) == 2:
        pair = zlib.crc32(f"{group[0]}|{group[1]}".encode()) % PP_STREAM_PAIRS
        return COMM_STREAM + PP_PAIR_STREAM_BASE + 8 * pair + channel
    return COMM_STREAM + STREAMS_PER_COMMUNICATOR * _COMMUNICATOR.get(category, 0) + channel


def split(total: int, parts: int) -> list[int]:
    """``total`` bytes into ``parts`` integer parts differing by at most one byte (sum is exact)."""
    q, r = divmod(int(total), parts)
    return [q + 1 if i < r else q for i in range(parts)]


def n_slices(nbytes: int, slice_bytes: int, max_slices: int) -> int:
    """Pipelining slices for ``nbytes`` per channel and step: ceil(nbytes / slice_bytes) in 1..max_slices."""
    return max(1, min(max_slices, math.ceil(nbytes / slice_bytes) if nbytes > 0 else 1))


def budget_slices(k: int, transfers_per_slice: int, max_flows: int) -> int:
    """``k`` reduced so that ``k x transfers_per_slice`` stays within ``max_flows`` (at least 1)."""
    return max(1, min(k, max_flows // max(1, transfers_per_slice)))


class Emitter:
    """Writes one collective call into a :class:`PlanBuilder`."""

    def __init__(
        self,
        builder: PlanBuilder,
        call: CollectiveCall,
        env: CollectiveEnv,
        algo: str,
        protocol: str,
        channels: int,
        entry_deps: Mapping[str, Sequence[int]] | None,
        category: str,
        priority: int,
        base_latency_s: float,
    ) -> None:
        self.b = builder
        self.call = call
        self.env = env
        self.tuning = env.tuning
        self.algo = algo
        self.protocol = protocol
        self.channels = channels
        self.category = category
        self.priority = priority
        self.prefix = f"{call.label} {algo}/{protocol}"
        self.proto_wire = self.tuning.wire_factor[protocol]
        self.window = self.tuning.inflight_slices
        self._entry_deps = entry_deps or {}
        self._stream0 = comm_stream(category, 0, call.group, call.op)
        self._base = base_latency_s
        self._entry: dict[str, int] = {}
        self._conn: dict[tuple[str, str, int], list[int]] = {}
        self._pair_window: dict[tuple[str, str], int] = {}
        self._tails: dict[str, list[int]] = {}
        self._labels: dict[tuple[int, str], str] = {}
        self._last_compute: dict[tuple[str, int], int] = {}
        self._last_delay: dict[tuple[str, int], int] = {}
        self.multi_node = len({env.node_of(g) for g in call.group}) > 1
        """Whether the call's group spans several nodes (LL intra-node latency factor)."""

    def set_window_for_slices(self, slice_bytes: int) -> None:
        """Slices in flight per connection for a tree's pipeline of ``slice_bytes`` slices.

        As many as keep the ring's in-flight bytes (``slice_bytes x inflight_slices`` of the tuning, 1 MiB by
        default) on a connection, between ``inflight_slices`` and ``chain_inflight_slices`` (NCCL_STEPS). With
        the ring's 2 slices of a tree's ~34 KB a network hop ran at 2 slices per round trip (17 GB/s on a 400G
        NIC); more than needed makes each hop of a long chain hold more slices that share the link (the
        backends share a link among flows, not first-in first-out), which delays the last slice at every hop:
        broadcast / reduce chains (15 hops on 2 x 8 GPUs) keep ``inflight_slices`` for that reason (with this
        window a 32 MiB broadcast replayed 202 -> 280 us against the model's 140)."""
        t = self.tuning
        want = math.ceil(t.slice_bytes * t.inflight_slices / max(1, slice_bytes))
        self.window = max(t.inflight_slices, min(t.chain_inflight_slices, want))

    def set_window_for_latency(self, pairs: Iterable[tuple[str, str]], slice_bytes: int) -> None:
        """Slices in flight on each connection ``(src, dst)`` of ``pairs``: enough to cover its path latency.

        A connection that may start slice ``k`` only when slice ``k - W`` has arrived sends at its rate
        only if ``W`` slices outlast one slice plus the one-way path delay ``D``: ``W = 1 + ceil(D x B / s)``
        (``B`` the hop's payload bandwidth, ``s`` the slice), between ``inflight_slices`` and
        ``chain_inflight_slices`` (NCCL_STEPS: NCCL keeps 8 steps of a connection in flight, whatever their
        size). Large slices keep ``inflight_slices``; tiny ones on a long path get up to 8, where 2 paced a
        latency-bound ring at 2 steps per path delay (a 128-rank all-gather of 4 KiB on a 3-tier fat-tree
        at 2.6x NCCL's model)."""
        t = self.tuning
        s = max(1, slice_bytes)
        for src, dst in pairs:
            p = self.env.path(src, dst)
            want = 1 + math.ceil(p.delay_s * self.env.hop_bandwidth_Bps(src, dst) / s)
            self._pair_window[(src, dst)] = max(t.inflight_slices, min(t.chain_inflight_slices, want))

    def label(self, ch: int, what: str) -> str:
        key = (ch, what)
        text = self._labels.get(key)
        if text is None:
            text = self._labels[key] = f"{self.prefix} ch{ch} {what}"
        return text

    def entry(self, gpu: str, extra_s: float = 0.0) -> int:
        """The rank's entry task: base latency (+ ``extra_s``) after the caller's entry deps."""
        tid = self._entry.get(gpu)
        if tid is None:
            tid = self.b.add_compute(
                gpu,
                self._base + extra_s,
                self._entry_deps.get(gpu, ()),
                stream=self._stream0,
                label=self.label(0, "entry"),
                category=self.category,
                channel=0,
            )
            self._entry[gpu] = tid
            self._tails.setdefault(gpu, []).append(tid)
        return tid

    def entry_tasks(self) -> dict[str, int]:
        """The entry task id of every GPU that has one so far."""
        return dict(self._entry)

    def wire_bytes(self, src: str, dst: str, nbytes: int, scale: float = 1.0) -> int:
        return math.ceil(nbytes * self.proto_wire * self.env.wire_overhead(src, dst) * scale)

    def flow(
        self, src: str, dst: str, nbytes: int, deps: Iterable[int], ch: int, what: str = "send", scale: float = 1.0
    ) -> int:
        """``nbytes`` payload from ``src`` to ``dst`` on channel ``ch``; a zero-time join if ``nbytes`` is 0.

        ``scale`` multiplies the wire bytes further (NVLS: its efficiency and per-chunk cost)."""
        deps = list(deps)
        if nbytes <= 0:
            tid = self.b.add_barrier(dst, deps, label=self.label(ch, what), category=self.category, channel=ch)
            self.touch(dst, tid)
            return tid
        key = (src, dst, ch)
        conn = self._conn.get(key)
        if conn is None:
            conn = self._conn[key] = []
        window = self._pair_window.get((src, dst), self.window)
        if len(conn) >= window:
            deps.append(conn[-window])
        tid = self.b.add_flow(
            src,
            dst,
            self.wire_bytes(src, dst, nbytes, scale),
            deps,
            priority=self.priority,
            label=self.label(ch, what),
            category=self.category,
            channel=ch,
        )
        conn.append(tid)
        return tid

    def compute(self, gpu: str, duration_s: float, deps: Iterable[int], ch: int, what: str) -> int:
        """A kernel on ``gpu``'s stream of channel ``ch`` of this call's communicator (module docstring)."""
        tid = self.b.add_compute(
            gpu,
            duration_s,
            deps,
            stream=self._stream0 + ch,
            label=self.label(ch, what),
            category=self.category,
            channel=ch,
        )
        self._last_compute[(gpu, ch)] = tid
        return tid

    def delay(self, gpu: str, duration_s: float, deps: Iterable[int], ch: int, what: str = "step") -> int:
        """``duration_s`` after ``deps`` on no stream: a step's protocol latency on the edge into ``gpu``.

        The latency of a ring step delays the data it carries, not the receiver's later steps: a rank that
        receives over the network at every step (one per node of a multi-node ring) pays that latency once
        per lap of the dependency chain, as NCCL's ``(steps - inter) x intra + inter x network`` model
        (:func:`~hetero_ns3.collectives.cost.ring_latency_s`) counts it, not at every step."""
        tid = self.b.add_delay(gpu, duration_s, deps, label=self.label(ch, what), category=self.category, channel=ch)
        self._last_delay[(gpu, ch)] = tid
        return tid

    def reduce(self, gpu: str, nbytes: int, deps: Iterable[int], ch: int, extra_s: float = 0.0) -> int:
        """Reduce ``nbytes`` received bytes into ``gpu``'s buffer (memory-bound), plus ``extra_s``."""
        return self.compute(gpu, self.env.reduce_time_s(gpu, nbytes) + extra_s, deps, ch, "reduce")

    def step_latency_s(self, src: str, dst: str, family: str, one_per_node: bool = False) -> float:
        """Per-step protocol latency of a hop minus the wire delay the backend simulates itself (s).

        ``one_per_node``: a ring with one rank per node, whose network steps cost the tree's network
        latency in NCCL v2.30.7 (as :func:`~hetero_ns3.collectives.cost.ring_latency_s`)."""
        p = self.env.path(src, dst)
        exposed = family == "ring" and p.kind == "network" and one_per_node
        lat = self.tuning.hw_latency(p.kind, "tree" if exposed else family, self.protocol)
        if self.protocol == "LL" and p.kind != "network" and self.multi_node:
            lat *= self.tuning.ll_multinode_intra_latency_factor
        if family == "ring" and p.kind != "network" and self.multi_node:  # cost.ring_latency_s
            lat = max(lat, self.tuning.net_overhead_s.get(self.protocol, 0.0))
        return max(0.0, lat - p.delay_s)

    def touch(self, gpu: str, tid: int) -> None:
        """Record ``tid`` as work of ``gpu`` that the call's exit on ``gpu`` must wait for."""
        self._tails.setdefault(gpu, []).append(tid)

    def finish(self, gpus: Iterable[str]) -> dict[str, tuple[int, ...]]:
        """One exit barrier per GPU over everything the call did there (and its flows' completions)."""
        w = self.window
        for (src, dst, _), ids in self._conn.items():
            self._tails.setdefault(src, []).extend(ids[-w:])
            self._tails.setdefault(dst, []).extend(ids[-w:])
        for (gpu, _), tid in self._last_compute.items():
            self._tails.setdefault(gpu, []).append(tid)
        for (gpu, _), tid in self._last_delay.items():
            self._tails.setdefault(gpu, []).append(tid)
        exits: dict[str, tuple[int, ...]] = {}
        for g in gpus:
            tails = self._tails.get(g)
            if not tails:
                tails = [self.entry(g)]
            exits[g] = (
                self.b.add_compute(
                    g, 0.0, tails, stream=self._stream0, label=self.label(0, "exit"), category=self.category, channel=0
                ),
            )
        return exits
