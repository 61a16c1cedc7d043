"""The host issue model of an imported Chakra trace: the ``hns3_host_*`` attributes an exported workload carries
(:mod:`hetero_ns3.workload.host`), replayed into host tasks as :func:`~hetero_ns3.plan.lower.lower_workload` does."""

from __future__ import annotations

from typing import Any, Protocol

from hetero_ns3.plan.builder import PlanBuilder
from hetero_ns3.plan.lower import SyncGaps, host_gate, host_wait_gate
from hetero_ns3.workload.chakra_format import attr_value

#: Host issue model (:mod:`hetero_ns3.workload.host`): the op's issue cost in seconds, whether the host waits for
#: the op on the GPU, and (on such an op) the mean host gap after the wait and the share of it drawn per rank
#: (absent: 1, the whole gap, as traces exported before the share existed meant).
ATTR_HOST = "hns3_host_s"
ATTR_HOST_SYNC = "hns3_host_sync"
ATTR_HOST_GAP = "hns3_host_sync_gap_s"
ATTR_HOST_JITTER = "hns3_host_sync_jitter"
#: The host waits for the op's dependencies on the GPU before issuing it (``ProgramOp.host_wait``).
ATTR_HOST_WAIT = "hns3_host_wait"


class TraceNode(Protocol):
    """What the replay reads of an imported node: its rank and its Chakra node."""

    rank: int
    node: Any


class HostReplay:
    """The host issue model of an exported workload (``hns3_host_*`` attributes), replayed as
    :func:`~hetero_ns3.plan.lower.lower_workload` does: a host task before an op with an issue cost, a
    synchronising op or the first op after a synchronisation, in emission order."""

    def __init__(self) -> None:
        self.wait: dict[int, int] = {}
        """Rank -> the GPU task its host waits for before issuing its next op."""
        self.gaps: SyncGaps | None = None

    @staticmethod
    def waits(n: TraceNode) -> bool:
        """Whether the host synchronises on node ``n``'s dependencies before issuing it."""
        return bool(attr_value(n.node, ATTR_HOST_WAIT, False))

    def _gaps_of(self, n: TraceNode) -> None:
        """Start the gap draws at the first node that carries their mean."""
        gap_s = float(attr_value(n.node, ATTR_HOST_GAP, 0.0) or 0.0)
        if gap_s > 0 and self.gaps is None:
            self.gaps = SyncGaps(gap_s, float(attr_value(n.node, ATTR_HOST_JITTER, 1.0)))

    def gate(self, builder: PlanBuilder, gpu: str, n: TraceNode, deps: list[int]) -> list[int]:
        """``deps`` with the host task that issues node ``n`` on ``gpu``, where the model gives it one."""
        host_s = float(attr_value(n.node, ATTR_HOST, 0.0) or 0.0)
        if self.waits(n):
            self._gaps_of(n)
            return host_wait_gate(builder, builder.gpu_index(gpu), host_s, n.node.name, deps, self.gaps)
        if host_s > 0 or bool(attr_value(n.node, ATTR_HOST_SYNC, False)) or n.rank in self.wait:
            return host_gate(builder, builder.gpu_index(gpu), host_s, n.node.name, deps, self.wait, n.rank, self.gaps)
        return deps

    def after(self, n: TraceNode, task: int) -> None:
        """Record a synchronising compute op (the host waits for ``task``) and the gaps' mean it carries."""
        if bool(attr_value(n.node, ATTR_HOST_SYNC, False)):
            self.wait[n.rank] = task
            self._gaps_of(n)
