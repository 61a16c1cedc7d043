"""Chakra execution traces -> one :class:`~hetero_ns3.plan.dag.ExecutionPlan` (see docs/chakra.md).

Per rank, every node of its ET file becomes work on that rank's GPU (rank r -> the r-th GPU):

* ``COMP_NODE``: a compute task on the GPU's compute stream, timed by the trace's ``duration_micros``
  (``durations = "trace"``, when it has one) or by the roofline of its ``num_ops`` FLOPs and
  ``tensor_size`` bytes on the rank's GPU type (:func:`roofline_time`);
* ``COMM_COLL_NODE``: one member of a collective; the k-th collective of each rank on a communicator
  (``pg_name`` in the comm-group JSON, else all ranks) is one call, planned by our collective planner
  (:func:`~hetero_ns3.collectives.plan_collective`, as :mod:`hetero_ns3.plan.lower` does);
* ``COMM_SEND_NODE`` / ``COMM_RECV_NODE``: the k-th send from a to b with tag t and the k-th receive on b
  from a with tag t are one point-to-point transfer (a ``send_recv`` call);
* ``METADATA`` / ``MEM_LOAD`` / ``MEM_STORE`` nodes and, by default, host ops (``is_cpu_op``): zero-time
  joins that keep the dependencies.

``data_deps`` become dependencies, ``ctrl_deps`` too with ``ctrl_deps = true`` (off by default, as in the
Chakra feeder: PyTorch-converted traces keep the host call tree there); references to ids absent from the file (PyTorch
traces point at host ops the converter dropped) and self-references are dropped and counted. Tasks are
emitted in a topological order of the cross-rank graph (a call is one node), smallest node id first, the
order :func:`~hetero_ns3.plan.lower.lower_workload` uses, so an exported workload imports to its own plan.
"""

from __future__ import annotations

import heapq
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from hetero_ns3.collectives import CollectiveCall, CollectiveEnv, plan_collective
from hetero_ns3.collectives.emit import comm_stream
from hetero_ns3.collectives.moe_routing import routing_problem
from hetero_ns3.collectives.templates import CallTemplates
from hetero_ns3.collectives.types import CollectiveOverride
from hetero_ns3.compute.gpus import GpuSpec
from hetero_ns3.compute.roofline import Roofline
from hetero_ns3.errors import ScenarioError
from hetero_ns3.plan.builder import PlanBuilder
from hetero_ns3.plan.dag import COMM_STREAM, COMPUTE_STREAM, ExecutionPlan
from hetero_ns3.plan.lower import DEFAULT_PRIORITY
from hetero_ns3.workload.chakra_format import RankTrace, attr_value, chakra_modules
from hetero_ns3.workload.chakra_host import HostReplay

#: Chakra ``CollectiveCommType`` name -> our collective (None: a cross-rank barrier).
COMM_TYPES: Mapping[str, str | None] = {
    "ALL_REDUCE": "all_reduce",
    "REDUCE": "reduce",
    "ALL_GATHER": "all_gather",
    "BROADCAST": "broadcast",
    "ALL_TO_ALL": "all_to_all",
    "REDUCE_SCATTER": "reduce_scatter",
    "REDUCE_SCATTER_BLOCK": "reduce_scatter",
    "BARRIER": None,
}
#: Our extension attributes (ignored by other readers): exact duration, stream and parallel dimension.
ATTR_DURATION = "hns3_duration_s"
ATTR_STREAM = "hns3_stream"
ATTR_DIM = "hns3_dim"
#: On an expert-parallel ALL_TO_ALL exported from a ``moe_dispatcher = "flex"`` workload: the router's expert
#: count and top-k, so that the import plans it with ``expert_dispatch`` as :mod:`hetero_ns3.plan.lower` does.
ATTR_MOE_EXPERTS = "hns3_moe_experts"
ATTR_MOE_TOP_K = "hns3_moe_top_k"
#: With a group-limited router (:mod:`hetero_ns3.collectives.moe_routing`): its groups and the groups a token picks.
ATTR_MOE_GROUPS = "hns3_moe_groups"
ATTR_MOE_GROUP_TOPK = "hns3_moe_group_topk"
ATTR_MOE = (ATTR_MOE_EXPERTS, ATTR_MOE_TOP_K, ATTR_MOE_GROUPS, ATTR_MOE_GROUP_TOPK)


@dataclass(frozen=True)
class ImportOptions:
    """How nodes are timed and which ``[collectives]`` choices apply (defaults: as ``[workload]``)."""

    durations: str = "trace"
    cpu_ops: str = "skip"
    ctrl_deps: bool = False
    roofline: Roofline = field(default_factory=Roofline)
    slowdown: Mapping[str, float] = field(default_factory=dict)
    overrides: Mapping[str, CollectiveOverride] = field(default_factory=dict)
    priority: Mapping[str, int] = field(default_factory=dict)
    reuse: bool = True


@dataclass(frozen=True)
class ChakraImport:
    """The imported plan of one iteration and what the import found."""

    plan: ExecutionPlan
    n_ranks: int
    n_collectives: int
    choices: Mapping[str, int]
    node_counts: Mapping[str, int]
    """Nodes per Chakra node type (all ranks)."""
    flops: float
    """Sum of ``num_ops`` of the timed compute nodes (all ranks)."""
    dropped_deps: int
    """Dependencies on ids absent from their file (or on the node itself), dropped."""
    untimed: int
    """Compute nodes with neither a duration nor FLOPs/bytes (zero time)."""


def roofline_time(flops: float, nbytes: float, gpu: GpuSpec, roofline: Roofline) -> float:
    """Seconds of a kernel known only by its FLOPs and HBM bytes: ``max(F / (peak x gemm), B / (HBM x memory))``
    plus launch overhead, with the GPU type's catalog efficiencies (no shape or wave factors: a trace
    gives no GEMM shape)."""
    e = roofline.efficiency(gpu)
    t_comp = flops / (gpu.peak_flops(roofline.precision) * e.gemm) if flops > 0 else 0.0
    t_mem = nbytes / (gpu.hbm_bw_Bps * e.memory) if nbytes > 0 else 0.0
    return max(t_comp, t_mem) + e.launch_overhead_s


@dataclass
class _Node:
    rank: int
    node: Any
    kind: str
    """compute, join, coll, send or recv."""
    deps: list[int]
    """Positions (in the global node list) this node depends on."""
    member_of: int = -1
    """Index of its call in the call list (coll / send / recv)."""


@dataclass
class _Call:
    members: list[int]
    op: str | None
    size: int
    group: tuple[int, ...]
    """Ranks in group order (send_recv: (src, dst))."""
    name: str
    dim: str
    routing: tuple[int, ...] | None = None
    """(experts, top_k[, groups, group_topk]) of a deduplicating MoE token exchange (``hns3_moe_*``), else None."""


def _int_attr(node: Any, *names: str) -> int | None:
    for n in names:
        v = attr_value(node, n)
        if v is not None:
            return int(v)
    return None


class _Importer:
    def __init__(self, traces: Sequence[RankTrace], groups: Mapping[str, tuple[int, ...]], opts: ImportOptions):
        self.pb, _ = chakra_modules()
        self.traces, self.groups, self.opts = traces, groups, opts
        self.nodes: list[_Node] = []
        self.calls: list[_Call] = []
        self.counts: dict[str, int] = {}
        self.dropped = 0

    def where(self, n: _Node) -> str:
        return f"{self.traces[n.rank].path.name}: node {n.node.id} ({n.node.name!r})"

    def classify(self, rank: int, node: Any) -> str:
        nt = self.pb.NodeType.Name(node.type)
        self.counts[nt] = self.counts.get(nt, 0) + 1
        if bool(attr_value(node, "is_cpu_op", False)):
            return "compute" if self.opts.cpu_ops == "compute" else "join"
        kind = {"COMP_NODE": "compute", "COMM_COLL_NODE": "coll", "COMM_SEND_NODE": "send"}.get(nt)
        kind = kind or {"COMM_RECV_NODE": "recv", "METADATA_NODE": "join"}.get(nt)
        kind = kind or {"MEM_LOAD_NODE": "join", "MEM_STORE_NODE": "join"}.get(nt)
        if kind is None:
            raise ScenarioError(f"{self.traces[rank].path.name}: node {node.id} has node type {nt}; not importable")
        return kind

    def read(self) -> None:
        for t in self.traces:
            base = len(self.nodes)
            pos: dict[int, int] = {}
            for i, node in enumerate(t.nodes):
                if node.id in pos:
                    raise ScenarioError(f"{t.path.name}: node id {node.id} appears twice; ids must be unique per file")
                pos[node.id] = base + i
            for node in t.nodes:
                me = pos[node.id]
                deps = []
                for d in (*node.data_deps, *(node.ctrl_deps if self.opts.ctrl_deps else ())):
                    p = pos.get(d)
                    if p is None or p == me:
                        self.dropped += 1
                    elif p not in deps:
                        deps.append(p)
                self.nodes.append(_Node(t.rank, node, self.classify(t.rank, node), deps))

    def new_call(self, call: _Call) -> int:
        self.calls.append(call)
        return len(self.calls) - 1

    def group_of(self, n: _Node) -> tuple[int, ...]:
        pg = str(attr_value(n.node, "pg_name", "") or "")
        if not (pg and self.groups):
            return tuple(range(len(self.traces)))
        if pg not in self.groups:
            raise ScenarioError(
                f"{self.where(n)}: pg_name {pg!r} is not in the comm-group JSON "
                f"(groups: {sorted(self.groups)[:8]}); add it there"
            )
        return self.groups[pg]

    def routing_of(self, n: _Node, op: str | None) -> tuple[int, ...] | None:
        """(experts, top_k[, groups, group_topk]) from the ``hns3_moe_*`` attributes of an ALL_TO_ALL node, else
        None."""
        experts, top_k, groups, gk = (_int_attr(n.node, name) for name in ATTR_MOE)
        if experts is None and top_k is None and groups is None and gk is None:
            return None
        if op != "all_to_all" or experts is None or top_k is None or not 1 <= top_k <= experts:
            raise ScenarioError(
                f"{self.where(n)}: {ATTR_MOE_EXPERTS} = {experts}, {ATTR_MOE_TOP_K} = {top_k} on a "
                f"{op or 'barrier'} node; they go together on an ALL_TO_ALL node, with 1 <= top_k <= experts (or "
                "leave both out)"
            )
        if groups is None and gk is None:
            return experts, top_k
        problem = routing_problem((experts, top_k, groups, gk)) if groups is not None and gk is not None else ""
        if problem or groups is None or gk is None:
            raise ScenarioError(
                f"{self.where(n)}: {ATTR_MOE_GROUPS} = {groups}, {ATTR_MOE_GROUP_TOPK} = {gk} with "
                f"{ATTR_MOE_EXPERTS} = {experts}, {ATTR_MOE_TOP_K} = {top_k}: {problem or 'they go together'} (or leave both "
                "out)"
            )
        return experts, top_k, groups, gk

    def match(self) -> None:
        """Group the comm nodes of all ranks into calls (see the module docstring)."""
        n_ranks = len(self.traces)
        coll: dict[tuple[tuple[int, ...], int], int] = {}
        seen: dict[tuple[int, tuple[int, ...]], int] = {}
        p2p: dict[tuple[str, int, int, int], int] = {}
        pending: dict[tuple[int, int, int, int], int] = {}
        for i, n in enumerate(self.nodes):
            node = n.node
            dim = str(attr_value(node, ATTR_DIM, "") or "")
            if n.kind == "coll":
                group = self.group_of(n)
                if n.rank not in group:
                    raise ScenarioError(f"{self.where(n)}: rank {n.rank} is not a member of its group {list(group)}")
                ct = _int_attr(node, "comm_type")
                if ct is None:
                    raise ScenarioError(f"{self.where(n)}: a COMM_COLL_NODE without comm_type; set the attribute")
                names = self.pb.CollectiveCommType.keys()
                tname = names[ct] if 0 <= ct < len(names) else str(ct)
                if tname not in COMM_TYPES:
                    raise ScenarioError(
                        f"{self.where(n)}: comm_type {tname} is not supported; use one of {sorted(COMM_TYPES)}"
                    )
                op, size = COMM_TYPES[tname], _int_attr(node, "comm_size") or 0
                k = seen.get((n.rank, group), 0)
                seen[(n.rank, group)] = k + 1
                ci = coll.get((group, k))
                if ci is None:
                    ci = coll[(group, k)] = self.new_call(_Call([], op, size, group, node.name, dim))
                call = self.calls[ci]
                routing = self.routing_of(n, op)
                if len(call.members) == 0:
                    call.routing = routing
                if call.op != op or call.size != size or call.routing != routing:
                    raise ScenarioError(
                        f"{self.where(n)}: collective #{k} of group {list(group)} is {tname} of {size} B"
                        f"{_routing_text(routing)} here but {call.op or 'barrier'} of {call.size} B"
                        f"{_routing_text(call.routing)} on another rank; every member must issue the same calls in "
                        "the same order"
                    )
                call.members.append(i)
                n.member_of = ci
            elif n.kind in ("send", "recv"):
                attr = "comm_dst" if n.kind == "send" else "comm_src"
                peer = _int_attr(node, attr)
                if peer is None or not 0 <= peer < n_ranks or peer == n.rank:
                    raise ScenarioError(f"{self.where(n)}: {attr} ({peer}) must name another rank in 0..{n_ranks - 1}")
                src, dst = (n.rank, peer) if n.kind == "send" else (peer, n.rank)
                tag = _int_attr(node, "comm_tag") or 0
                size = _int_attr(node, "comm_size", "tensor_size") or 0
                k = p2p.get((n.kind, src, dst, tag), 0)
                p2p[(n.kind, src, dst, tag)] = k + 1
                key = (src, dst, tag, k)
                ci = pending.pop(key, None)
                if ci is None:
                    ci = pending[key] = self.new_call(_Call([], "send_recv", size, (src, dst), node.name, dim))
                call = self.calls[ci]
                call.members.append(i)
                n.member_of = ci
                if n.kind == "send":
                    call.name, call.size, call.dim = node.name, size, dim
        for (group, k), ci in coll.items():
            call = self.calls[ci]
            if len(call.members) != len(group):
                have = sorted(self.nodes[m].rank for m in call.members)
                raise ScenarioError(
                    f"collective #{k} of group {list(group)} ({call.name!r}) is issued by ranks {have} only; "
                    "every member rank must issue it"
                )
        if pending:
            (src, dst, tag, k), ci = next(iter(pending.items()))
            what = "receive" if self.nodes[self.calls[ci].members[0]].kind == "send" else "send"
            raise ScenarioError(
                f"the transfer from rank {src} to rank {dst} (tag {tag}, #{k}, {self.calls[ci].name!r}) has no "
                f"matching {what}"
            )

    def duration(self, n: _Node, gpu: GpuSpec) -> tuple[float, float, bool]:
        """(seconds, FLOPs, timed) of a compute node on ``gpu`` (see :class:`~hetero_ns3.scenario.workload.
        WorkloadSection` ``durations``)."""
        node = n.node
        flops = float(attr_value(node, "num_ops", 0) or 0)
        nbytes = float(attr_value(node, "tensor_size", 0) or 0)
        if self.opts.durations == "trace":
            exact = attr_value(node, ATTR_DURATION)
            if exact is not None:
                return float(exact), flops, True
            if node.duration_micros > 0:
                return node.duration_micros * 1e-6, flops, True
        if flops > 0 or nbytes > 0:
            return roofline_time(flops, nbytes, gpu, self.opts.roofline), flops, True
        return 0.0, flops, False

    def emit(self, gpus: Sequence[tuple[str, GpuSpec]], env: CollectiveEnv) -> ChakraImport:
        """Emit every node and call into one plan, in topological order, smallest node id first."""
        nodes, calls, opts = self.nodes, self.calls, self.opts
        names = [g for g, _ in gpus]
        gnode = [n.member_of + len(nodes) if n.member_of >= 0 else i for i, n in enumerate(nodes)]
        # Graph nodes: positions 0..len(nodes)-1 (single nodes; members' slots unused), then one per call.
        total = len(nodes) + len(calls)
        members_of: list[list[int]] = [[i] for i in range(len(nodes))] + [c.members for c in calls]
        key = [(n.node.id, n.rank) for n in nodes] + [
            min((nodes[m].node.id, nodes[m].rank) for m in c.members) for c in calls
        ]
        live = [gnode[i] == i for i in range(len(nodes))] + [True] * len(calls)
        succ: list[list[int]] = [[] for _ in range(total)]
        indeg = [0] * total
        for v in range(total):
            if not live[v]:
                continue
            preds = {gnode[d] for m in members_of[v] for d in nodes[m].deps} - {v}
            indeg[v] = len(preds)
            for u in preds:
                succ[u].append(v)
        heap = [(key[v], v) for v in range(total) if live[v] and indeg[v] == 0]
        heapq.heapify(heap)
        builder = PlanBuilder(names)
        templates = CallTemplates() if opts.reuse else None
        prio = {**DEFAULT_PRIORITY, **opts.priority}
        exit_of: list[tuple[int, ...]] = [()] * len(nodes)
        choices: dict[str, int] = {}
        untimed = 0
        flops_total = 0.0
        emitted = 0
        host = HostReplay()

        def deps_of(i: int) -> list[int]:
            return [t for d in nodes[i].deps for t in exit_of[d]]

        while heap:
            _, v = heapq.heappop(heap)
            emitted += 1
            if v < len(nodes):
                n = nodes[v]
                g, spec = gpus[n.rank]
                if n.kind == "compute":
                    dur, fl, timed = self.duration(n, spec)
                    untimed += not timed
                    flops_total += fl
                    side = attr_value(n.node, ATTR_STREAM, 0) == COMM_STREAM
                    stream = comm_stream(str(attr_value(n.node, ATTR_DIM, "") or "")) if side else COMPUTE_STREAM
                    dur *= float(opts.slowdown.get(g, 1.0))
                    deps = host.gate(builder, g, n, deps_of(v))
                    tid = builder.add_compute(g, dur, deps, stream, n.node.name, "compute")
                    host.after(n, tid)
                else:
                    tid = builder.add_barrier(g, deps_of(v), label=n.node.name)
                exit_of[v] = (tid,)
            else:
                call = calls[v - len(nodes)]
                self.emit_call(builder, call, names, env, templates, prio, exit_of, deps_of, choices, host)
            for s in succ[v]:
                indeg[s] -= 1
                if indeg[s] == 0:
                    heapq.heappush(heap, (key[s], s))
        if emitted != sum(live):
            stuck = [v for v in range(total) if live[v] and indeg[v] > 0][:4]
            where = [self.where(nodes[members_of[v][0]]) for v in stuck]
            raise ScenarioError(
                f"the trace has a dependency cycle: {sum(live) - emitted} nodes never ready, e.g. {where}"
            )
        n_coll = sum(c.op is not None and c.size > 0 and len(c.group) > 1 for c in calls)
        return ChakraImport(
            builder.build(copy=False), len(self.traces), n_coll, choices, dict(self.counts), flops_total,
            self.dropped, untimed,
        )  # fmt: skip

    def emit_call(
        self,
        builder: PlanBuilder,
        call: _Call,
        names: Sequence[str],
        env: CollectiveEnv,
        templates: CallTemplates | None,
        prio: Mapping[str, int],
        exit_of: list[tuple[int, ...]],
        deps_of: Any,
        choices: dict[str, int],
        host: HostReplay,
    ) -> None:
        """One call: planned by the collective planner; barriers when it moves nothing or syncs only. Each member's
        host issues it first where the host model is on (as :func:`~hetero_ns3.plan.lower.lower_workload`)."""
        by_gpu = {names[self.nodes[m].rank]: m for m in call.members}
        entry = {g: deps_of(m) for g, m in by_gpu.items()}
        for g, m in by_gpu.items():
            if host.waits(self.nodes[m]) or attr_value(self.nodes[m].node, ATTR_STREAM, 0) != COMM_STREAM:
                entry[g] = host.gate(builder, g, self.nodes[m], entry[g])
        category = call.dim or "comm"
        if call.op is None:  # BARRIER: every member leaves once every member has arrived
            head = names[call.group[0]]
            join = builder.add_barrier(head, [t for ts in entry.values() for t in ts], call.name, category)
            for g, m in by_gpu.items():
                exit_of[m] = (builder.add_barrier(g, [join], call.name, category),)
            return
        if call.size <= 0 or len(call.group) < 2:  # nothing to move (as lower_workload for size 0)
            for g, m in by_gpu.items():
                exit_of[m] = (builder.add_barrier(g, entry[g], label=call.name, category=category),)
            return
        ov = self.opts.overrides.get(call.dim) or CollectiveOverride()
        group = tuple(names[r] for r in call.group)
        peer = group[1] if call.op == "send_recv" else None
        algo = ov.algo or ("expert_dispatch" if call.routing is not None else None)
        cc = CollectiveCall(
            call.op, group, int(call.size), algo, ov.protocol, ov.channels, peer=peer, routing=call.routing
        )
        cls = prio.get(call.dim, 0)
        if templates is not None:
            res = templates.plan(builder, cc, env, entry, category, cls, name=call.name)
        else:
            res = plan_collective(builder, replace(cc, name=call.name), env, entry, category, cls)
        k = f"{call.dim}:{cc.op}:{res.algo}/{res.protocol}/{res.channels}"
        choices[k] = choices.get(k, 0) + 1
        for g, m in by_gpu.items():
            exit_of[m] = tuple(res.exits[g])


def _routing_text(routing: tuple[int, ...] | None) -> str:
    if routing is None:
        return ""
    groups = f", {routing[3]} of {routing[2]} groups" if len(routing) == 4 else ""
    return f" (MoE routing {routing[0]} experts, top {routing[1]}{groups})"


def import_chakra(
    traces: Sequence[RankTrace],
    groups: Mapping[str, tuple[int, ...]],
    gpus: Sequence[tuple[str, GpuSpec]],
    env: CollectiveEnv,
    opts: ImportOptions | None = None,
) -> ChakraImport:
    """Lower per-rank Chakra traces (``traces[r]`` is rank r, on ``gpus[r]`` = (name, type)) into one plan.

    ``groups`` maps a ``pg_name`` to its ranks in group order (empty: every collective on all ranks).
    """
    if len(gpus) != len(traces):
        raise ScenarioError(f"the trace has {len(traces)} ranks but {len(gpus)} GPUs were given; one GPU per rank")
    imp = _Importer(traces, groups, opts or ImportOptions())
    imp.read()
    imp.match()
    return imp.emit(gpus, env)


def load_chakra(
    spec: str, comm_groups: str | None, base_dir: Any
) -> tuple[list[RankTrace], dict[str, tuple[int, ...]]]:
    """Read the rank files of ``spec`` (directory or glob) and the comm-group JSON (``comm_groups``, else
    ``comm_group.json`` beside the traces when present)."""
    from pathlib import Path

    from hetero_ns3.workload.chakra_format import COMM_GROUP_FILE, find_rank_files, load_comm_groups, read_trace

    files = find_rank_files(spec, Path(base_dir))
    traces = [read_trace(f, r) for r, f in enumerate(files)]
    if comm_groups is not None:
        p = Path(comm_groups).expanduser()
        return traces, load_comm_groups(p if p.is_absolute() else Path(base_dir) / p, len(traces))
    auto = files[0].parent / COMM_GROUP_FILE
    return traces, (load_comm_groups(auto, len(traces), str(auto)) if auto.is_file() else {})
