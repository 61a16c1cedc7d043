"""The collective call the lowering plans for one instance (:func:`make_call`), and the tasks a call of each shape
lowers into (:class:`CallTasks`, what the up-front estimate of :mod:`hetero_ns3.limits` counts on the run path)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from hetero_ns3.collectives import CollectiveCall, CollectiveEnv, plan_collective
from hetero_ns3.collectives.types import CollectiveOverride
from hetero_ns3.errors import PlanningError
from hetero_ns3.plan.builder import PlanBuilder


def make_call(
    op: str,
    group: Sequence[str],
    size: float,
    dim: str,
    overrides: Mapping[str, CollectiveOverride],
    routing: tuple[int, ...] | None = None,
    peer: str | None = None,
    name: str = "",
) -> CollectiveCall:
    """The (unnamed) call the lowering plans for one collective instance: op, group and bytes with the ``dim``'s
    ``overrides`` applied, and an MoE token exchange of the ``flex`` dispatcher (``routing``: the workload's
    ``moe_routing``) on the ``expert_dispatch`` algorithm unless overridden. ``name``: the instance's, for errors."""
    ov = overrides.get(dim) or CollectiveOverride()
    if ov.algo is not None:
        _check_override_op(ov.algo, op, dim, name)
    algo, call_routing = ov.algo, None
    if routing is not None and op == "all_to_all" and dim == "ep":
        algo, call_routing = algo or "expert_dispatch", routing
    return CollectiveCall(
        op,
        tuple(group),
        int(size),
        algo=algo,
        protocol=ov.protocol,
        channels=ov.channels,
        peer=peer,
        routing=call_routing,
    )


class CallTasks:
    """Tasks one collective instance lowers into, counted by emitting one call of each shape into a scratch builder
    (what :func:`hetero_ns3.limits.workload_tasks` takes as ``call_tasks``): the up-front estimate then counts what
    the algorithm the selector picks really emits (an MoE exchange of 64 ranks lowers to about a twelfth of what
    sixteen tasks per ring step said) instead of a ring rule. Shapes are keyed by collective, the group's ranks per
    node, bytes and dimension; the first group seen stands for its shape."""

    def __init__(
        self,
        env: CollectiveEnv,
        overrides: Mapping[str, CollectiveOverride] | None = None,
        routing: Sequence[int] | None = None,
    ) -> None:
        self.env, self.overrides = env, overrides or {}
        self.routing = tuple(int(v) for v in routing) if routing else None
        self._count: dict[tuple, int] = {}

    def __call__(self, collective: str, group: Sequence[str], size: float, dim: str) -> int:
        """Tasks of one instance of ``collective`` over ``group`` (GPU names) of ``size`` bytes on dimension
        ``dim`` (a ``send`` or ``recv`` op: its pair's transfer)."""
        node_of = self.env.node_of
        per_node: dict[str, int] = {}
        for g in group:
            per_node[node_of(g)] = per_node.get(node_of(g), 0) + 1
        key = (collective, tuple(per_node.values()), int(size), dim)
        n = self._count.get(key)
        if n is None:
            if collective in ("send", "recv"):
                call = make_call("send_recv", group[:2], size, dim, self.overrides, peer=group[1])
            else:
                call = make_call(collective, group, size, dim, self.overrides, self.routing)
            builder = PlanBuilder(list(dict.fromkeys(call.group + ((call.peer,) if call.peer else ()))))
            plan_collective(builder, call, self.env)
            n = self._count[key] = len(builder)
        return n


def _check_override_op(algo_name: str, op: str, dim: str, call_name: str) -> None:
    """``[collectives.<dim>] algo`` must implement every collective that dimension issues."""
    from hetero_ns3.collectives.registry import get_algorithm

    algo = get_algorithm(algo_name)
    if op not in algo.ops:
        raise PlanningError(
            f"collectives.{dim}.algo ({algo_name!r}) does not implement {op}, which the {dim} dimension issues "
            f"({call_name}); it implements {sorted(algo.ops)}: pick one that implements every op of that dimension "
            f"or leave collectives.{dim}.algo unset"
        )
