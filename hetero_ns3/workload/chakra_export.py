"""A compiled :class:`~hetero_ns3.workload.artefact.Workload` -> per-rank Chakra ET files + comm-group JSON.

One file per rank, ``<name>.<rank>.et`` (schema version :data:`~hetero_ns3.workload.chakra_format.
WRITE_VERSION`), one node per op of the rank in program order, node id = op id, ``data_deps`` = the op's
dependencies (complete, as in the workload):

=====================  ==========================================================================
op                     node
=====================  ==========================================================================
compute                ``COMP_NODE``: ``duration_micros`` (rounded), ``num_ops`` (FLOPs), ``tensor_size``
                       (HBM bytes), ``is_cpu_op`` false
collective member      ``COMM_COLL_NODE``: ``comm_type``, ``comm_size`` (NCCL ``size``, nccl-tests
                       convention), ``pg_name`` (a key of ``comm_group.json``: the group's ranks in order)
send / recv            ``COMM_SEND_NODE`` / ``COMM_RECV_NODE``: ``comm_dst`` / ``comm_src`` (global ranks),
                       ``comm_tag`` (the transfer's instance id), ``comm_size``
comm op of no call     ``METADATA_NODE`` (a zero-time join)
=====================  ==========================================================================

Every node also carries our extension attributes (ignored by other readers): ``hns3_duration_s`` (the
exact duration), ``hns3_stream`` (0 compute, 1 comm stream), ``hns3_dim`` (tp / pp / dp / ep) and, on the
expert-parallel ALL_TO_ALL nodes of a ``moe_dispatcher = "flex"`` workload, ``hns3_moe_experts`` /
``hns3_moe_top_k`` (the router's shape, for the deduplicating token exchange; a group-limited router adds
``hns3_moe_groups`` / ``hns3_moe_group_topk``), and where the host issue model
is on (:mod:`hetero_ns3.workload.host`) ``hns3_host_s`` (the op's issue cost), ``hns3_host_sync`` (the host waits
for this op), ``hns3_host_wait`` (the host waits for the op's dependencies before issuing it: the dispatch under
expert-parallel overlap) and, on those two, ``hns3_host_sync_gap_s`` (the mean gap after the wait) and
``hns3_host_sync_jitter`` (the share of it drawn per rank), so that
:mod:`hetero_ns3.workload.chakra_import` rebuilds the same plan as :func:`~hetero_ns3.plan.lower.
lower_workload`. See docs/chakra.md.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from hetero_ns3.errors import PlanningError
from hetero_ns3.workload.artefact import Op, Workload
from hetero_ns3.workload.chakra_format import COMM_GROUP_FILE, chakra_modules, write_comm_groups, write_trace
from hetero_ns3.workload.chakra_host import ATTR_HOST, ATTR_HOST_GAP, ATTR_HOST_JITTER, ATTR_HOST_SYNC, ATTR_HOST_WAIT
from hetero_ns3.workload.chakra_import import ATTR_DIM, ATTR_DURATION, ATTR_MOE, ATTR_STREAM

#: Our collective -> Chakra ``CollectiveCommType`` name.
COMM_TYPE_OF = {
    "all_reduce": "ALL_REDUCE",
    "reduce_scatter": "REDUCE_SCATTER",
    "all_gather": "ALL_GATHER",
    "all_to_all": "ALL_TO_ALL",
    "broadcast": "BROADCAST",
}


class _Exporter:
    def __init__(self, workload: Workload) -> None:
        self.pb, _ = chakra_modules()
        self.workload = workload
        self.rank_of = {slot.gpu: r for r, slot in enumerate(workload.ranks)}
        self.groups: dict[tuple[int, ...], str] = {}
        routing = workload.meta.get("moe_routing")
        self.routing = tuple(int(v) for v in routing) if routing else None
        self.gap_s = float(workload.meta.get("host_sync_gap_s", 0.0))
        self.jitter = float(workload.meta.get("host_sync_jitter", 1.0))
        # (rank, op id) -> (issue seconds, host sync, host wait) of the ops the host model touches (none when off)
        self.host: dict[tuple[int, int], tuple[float, bool, bool]] = {}
        for prog in workload.programs:
            for t, rank in enumerate(prog.ranks):
                for p in prog.ops:
                    if p.host > 0 or p.host_sync or p.host_wait:
                        self.host[(rank, p.id * workload.tp + t)] = (p.host, p.host_sync, p.host_wait)

    def attr(self, name: str, **value: Any) -> Any:
        return self.pb.AttributeProto(name=name, **value)

    def pg_name(self, group: tuple[str, ...]) -> str:
        ranks = tuple(self.rank_of[g] for g in group)
        name = self.groups.get(ranks)
        if name is None:
            name = self.groups[ranks] = str(len(self.groups))
        return name

    def node(self, op: Op) -> Any:
        pb = self.pb
        n = pb.Node(id=op.id, name=op.name)
        n.data_deps.extend(op.deps)
        a = self.attr
        n.attr.append(a("is_cpu_op", bool_val=False))
        n.attr.append(a(ATTR_STREAM, int32_val=1 if op.stream == "comm" else 0))
        if op.dim:
            n.attr.append(a(ATTR_DIM, string_val=op.dim))
        host_s, sync, wait = self.host.get((op.rank, op.id), (0.0, False, False))
        if host_s > 0:
            n.attr.append(a(ATTR_HOST, double_val=host_s))
        if sync or wait:
            n.attr.append(a(ATTR_HOST_WAIT if wait else ATTR_HOST_SYNC, bool_val=True))
            if self.gap_s > 0:
                n.attr.append(a(ATTR_HOST_GAP, double_val=self.gap_s))
                n.attr.append(a(ATTR_HOST_JITTER, double_val=self.jitter))
        if op.kind == "compute":
            n.type = pb.COMP_NODE
            n.duration_micros = round(op.duration * 1e6)
            n.attr.extend([
                a("num_ops", int64_val=int(op.flops)),
                a("tensor_size", uint64_val=max(0, int(op.bytes))),
                a(ATTR_DURATION, double_val=float(op.duration)),
            ])  # fmt: skip
            return n
        if op.instance < 0:
            n.type = pb.METADATA_NODE
            return n
        size = a("comm_size", int64_val=int(op.bytes))
        if op.collective in ("send", "recv"):
            src, dst = (self.rank_of[g] for g in op.group)
            send = op.collective == "send"
            n.type = pb.COMM_SEND_NODE if send else pb.COMM_RECV_NODE
            peer = a("comm_dst", int32_val=dst) if send else a("comm_src", int32_val=src)
            n.attr.extend([peer, a("comm_tag", int32_val=op.instance), size])
            return n
        ctype = COMM_TYPE_OF.get(op.collective)
        if ctype is None:
            raise PlanningError(f"op {op.id} ({op.name}): collective {op.collective!r} has no Chakra comm_type")
        n.type = pb.COMM_COLL_NODE
        n.attr.extend([
            a("comm_type", int64_val=pb.CollectiveCommType.Value(ctype)),
            size,
            a("pg_name", string_val=self.pg_name(op.group)),
        ])  # fmt: skip
        if self.routing is not None and op.collective == "all_to_all" and op.dim == "ep":
            n.attr.extend(a(name, int64_val=v) for name, v in zip(ATTR_MOE, self.routing, strict=False))
        return n


def export_chakra(workload: Workload, out_dir: str | Path, name: str = "workload") -> list[Path]:
    """Write ``<out_dir>/<name>.<rank>.et`` for every rank and ``comm_group.json``; return the paths.

    Raises PlanningError for a dependency on another rank's op (a Chakra file holds one rank's nodes).
    """
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    ex = _Exporter(workload)
    paths = []
    for r in range(len(workload.ranks)):
        ops = workload.rank_ops(r)
        own = {op.id for op in ops}
        for op in ops:
            if any(d not in own for d in op.deps):
                bad = next(d for d in op.deps if d not in own)
                raise PlanningError(f"rank {r} op {op.id} ({op.name}) depends on op {bad} of another rank")
        p = out / f"{name}.{r}.et"
        write_trace(p, (ex.node(op) for op in ops))
        paths.append(p)
    groups = out / COMM_GROUP_FILE
    write_comm_groups(groups, {pg: ranks for ranks, pg in ex.groups.items()})
    return [*paths, groups]
