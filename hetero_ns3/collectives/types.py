"""Inputs and outputs of the collective planner: the call, the choice, the result.

Sizes follow nccl-tests' ``size`` column (bytes per rank), so that a plan's algbw/busbw compare
directly with published nccl-tests tables:

==================  ===========================================================  =============
op                  ``size_bytes`` is ...                                        busbw factor
==================  ===========================================================  =============
``all_reduce``      the buffer of every rank (input = output)                    2(n-1)/n
``reduce_scatter``  the *input* buffer of every rank (output = size / n)         (n-1)/n
``all_gather``      the *output* buffer of every rank (input = size / n)         (n-1)/n
``broadcast``       the buffer (root sends it, every rank receives it)           1
``reduce``          the buffer (every rank contributes it, root gets the sum)    1
``all_to_all``      the send buffer of every rank (size / n to each rank)        (n-1)/n
``all_to_all_v``    ``sum(pair_bytes[r])`` of the busiest rank (see below)        (n-1)/n
``send_recv``       the bytes sent from ``group[0]`` to ``peer``                 1
==================  ===========================================================  =============

algbw = size_bytes / time; busbw = algbw x factor (nccl-tests ``doc/PERFORMANCE.md``).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from hetero_ns3.collectives.moe_routing import routing_of, routing_problem
from hetero_ns3.errors import field_error

ALL_REDUCE = "all_reduce"
REDUCE_SCATTER = "reduce_scatter"
ALL_GATHER = "all_gather"
BROADCAST = "broadcast"
REDUCE = "reduce"
ALL_TO_ALL = "all_to_all"
ALL_TO_ALL_V = "all_to_all_v"
SEND_RECV = "send_recv"

OPS = (ALL_REDUCE, REDUCE_SCATTER, ALL_GATHER, BROADCAST, REDUCE, ALL_TO_ALL, ALL_TO_ALL_V, SEND_RECV)
REDUCING_OPS = frozenset({ALL_REDUCE, REDUCE_SCATTER, REDUCE})

_ALIASES = {
    "allreduce": ALL_REDUCE,
    "reducescatter": REDUCE_SCATTER,
    "allgather": ALL_GATHER,
    "alltoall": ALL_TO_ALL,
    "alltoallv": ALL_TO_ALL_V,
    "sendrecv": SEND_RECV,
    "p2p": SEND_RECV,
}

PROTOCOLS = ("LL", "LL128", "Simple")


def normalize_op(name: str, path: str = "op") -> str:
    """``all-reduce``, ``allreduce``, ``all_reduce`` -> ``all_reduce``; ScenarioError listing valid ops."""
    key = name.strip().lower().replace("-", "_")
    key = _ALIASES.get(key.replace("_", ""), key)
    if key not in OPS:
        raise field_error(path, name, "is not a collective", f"use one of {list(OPS)}")
    return key


def busbw_factor(op: str, n: int) -> float:
    """nccl-tests' bus-bandwidth factor for ``op`` on ``n`` ranks (busbw = algbw x factor)."""
    if op == ALL_REDUCE:
        return 2.0 * (n - 1) / n
    if op in (REDUCE_SCATTER, ALL_GATHER, ALL_TO_ALL, ALL_TO_ALL_V):
        return (n - 1) / n
    return 1.0


@dataclass(frozen=True)
class CollectiveOverride:
    """Algorithm / protocol / channel choices for the collectives of one parallel dimension (unset: selected)."""

    algo: str | None = None
    protocol: str | None = None
    channels: int | None = None


@dataclass(frozen=True)
class CollectiveCall:
    """One collective call of a communicator.

    ``group`` is the ranks' GPU names in rank order. Overrides (``algo``, ``protocol``, ``channels``)
    bypass the selector; None lets the cost model choose, as NCCL's tuner does.
    """

    op: str
    group: tuple[str, ...]
    size_bytes: int
    """nccl-tests ``size`` in bytes (see the module table)."""
    algo: str | None = None
    protocol: str | None = None
    """``LL``, ``LL128`` or ``Simple``."""
    channels: int | None = None
    root: int = 0
    """Rank (index into ``group``) of the root of ``broadcast`` / ``reduce``."""
    peer: str | None = None
    """Receiving GPU of ``send_recv`` (the sender is ``group[0]``); defaults to ``group[1]``."""
    pair_bytes: tuple[tuple[int, ...], ...] | None = None
    """``all_to_all_v``: ``pair_bytes[i][j]`` bytes from rank i to rank j (diagonal ignored)."""
    name: str = ""
    """Label prefix of the call's tasks (e.g. ``dp.all_reduce[3]``); default: the op."""
    routing: tuple[int, ...] | None = None
    """``all_to_all`` of an MoE layer: (experts, top_k) of its router, or (experts, top_k, groups, group_topk) of a
    group-limited one (:mod:`hetero_ns3.collectives.moe_routing`), for the ``expert_dispatch`` algorithm, which
    sends each token once per destination rank and node (``size_bytes`` counts one copy per expert)."""

    def __post_init__(self) -> None:
        object.__setattr__(self, "op", normalize_op(self.op, "call.op"))
        object.__setattr__(self, "group", tuple(self.group))
        n = len(self.group)
        if n < 1:
            raise field_error("call.group", self.group, "is empty", "name at least one GPU")
        if len(set(self.group)) != n:
            raise field_error("call.group", self.group, "names a GPU twice", "list each rank's GPU once")
        if self.routing is not None:
            self._check_routing()
        if self.op == ALL_TO_ALL_V:
            self._check_pairs(n)
        elif not (isinstance(self.size_bytes, int) and self.size_bytes >= 0):
            raise field_error("call.size_bytes", self.size_bytes, "must be an integer >= 0", "e.g. 1048576")
        if self.protocol is not None and self.protocol not in PROTOCOLS:
            raise field_error("call.protocol", self.protocol, "is not a protocol", f"use one of {list(PROTOCOLS)}")
        if self.channels is not None and not (isinstance(self.channels, int) and 1 <= self.channels <= 64):
            raise field_error("call.channels", self.channels, "must be an integer in 1..64")
        if self.op in (BROADCAST, REDUCE) and not 0 <= self.root < n:
            raise field_error("call.root", self.root, f"must be a rank in 0..{n - 1}")
        if self.op == SEND_RECV:
            if self.peer is None and n < 2:
                raise field_error("call.peer", None, "is missing", "give the receiving GPU or a 2-GPU group")
            if self.peer is not None and self.peer == self.group[0]:
                raise field_error("call.peer", self.peer, "is the sender itself", "name another GPU")

    def _check_routing(self) -> None:
        rt = self.routing
        if self.op != ALL_TO_ALL:
            raise field_error("call.routing", rt, f"applies to all_to_all only (op is {self.op})", "leave it unset")
        problem = routing_problem(rt)
        if problem or rt is None:
            raise field_error("call.routing", rt, problem or "is missing", "e.g. (128, 8) or (256, 8, 8, 4)")
        object.__setattr__(self, "routing", routing_of(*rt))  # one group: plain top-k, (experts, top_k)

    def _check_pairs(self, n: int) -> None:
        pb = self.pair_bytes
        if pb is None or len(pb) != n or any(len(row) != n for row in pb):
            raise field_error("call.pair_bytes", pb, f"must be an {n}x{n} matrix of bytes for all_to_all_v")
        for i, row in enumerate(pb):
            for j, v in enumerate(row):
                if not (isinstance(v, int) and v >= 0):
                    raise field_error(f"call.pair_bytes[{i}][{j}]", v, "must be an integer >= 0")
        object.__setattr__(self, "pair_bytes", tuple(tuple(r) for r in pb))
        if self.size_bytes in (None, 0):
            busiest = max(sum(v for j, v in enumerate(row) if j != i) for i, row in enumerate(pb))
            object.__setattr__(self, "size_bytes", int(busiest))

    @property
    def receiver(self) -> str:
        """Receiving GPU of a ``send_recv``."""
        return self.peer if self.peer is not None else self.group[1]

    @property
    def label(self) -> str:
        return self.name or self.op


@dataclass(frozen=True)
class Hop:
    """A directed GPU-to-GPU transfer of an algorithm and its expected bandwidth."""

    src: str
    dst: str
    bandwidth_Bps: float
    """Expected goodput of the hop for this algorithm and protocol, bytes/s."""
    kind: str
    """Fabric of the path: ``nvlink``, ``pcie`` or ``network``."""


@dataclass(frozen=True)
class Choice:
    """Algorithm, protocol and channel count of a call, with the cost model's prediction."""

    algo: str
    protocol: str
    channels: int
    predicted_s: float
    """Cost-model time of the call, s (latency + size / bandwidth)."""
    bottleneck: Hop | None
    """The slowest hop of the algorithm's graph (None for a single rank or zero bytes)."""
    source: str = "model"
    """``model`` (chosen by the cost model) or ``override`` (fixed by the caller)."""
    candidates: Mapping[str, float] = field(default_factory=dict)
    """``algo/protocol`` -> predicted seconds of every candidate the selector compared."""


@dataclass(frozen=True)
class CollectiveResult:
    """What :func:`plan_collective` returns."""

    exits: Mapping[str, tuple[int, ...]]
    """Per GPU, the task ids after which the collective is complete on that GPU."""
    choice: Choice
    first_task: int
    """Id of the first task the call added (tasks ``first_task .. end_task-1`` are its own)."""
    end_task: int

    @property
    def algo(self) -> str:
        return self.choice.algo

    @property
    def protocol(self) -> str:
        return self.choice.protocol

    @property
    def channels(self) -> int:
        return self.choice.channels

    @property
    def predicted_s(self) -> float:
        return self.choice.predicted_s

    @property
    def bottleneck(self) -> Hop | None:
        return self.choice.bottleneck
