"""The plan stage: the :class:`ExecutionPlan` (a DAG of compute and flow tasks as arrays), its builder, the
lowering of a compiled workload into it, and the repeat over training iterations.

* :mod:`.dag`: :class:`ExecutionPlan` (struct of arrays, CSR dependencies), critical path.
* :mod:`.builder`: :class:`PlanBuilder` (task by task, per-stream order, block capture/replay).
* :mod:`.lower`: :func:`lower_workload` (workload + collective planner -> ExecutionPlan).
* :mod:`.calls`: the call of one collective instance (:func:`make_call`, shared by the lowering) and the tasks a call
  of each shape emits (:class:`CallTasks`, for the up-front estimate).
* :mod:`.iterations`: :func:`repeat_plan` (one iteration's plan -> N iterations chained per GPU).
"""

from typing import Any

from hetero_ns3.plan.dag import ExecutionPlan
from hetero_ns3.plan.iterations import RepeatedPlan, repeat_plan


def __getattr__(name: str) -> Any:
    # The lowering imports the collective planner, which imports plan.dag and plan.builder: load it lazily.
    if name in ("Lowered", "lower_workload"):
        from hetero_ns3.plan import lower

        return getattr(lower, name)
    raise AttributeError(f"module 'hetero_ns3.plan' has no attribute {name!r}")


__all__ = ["ExecutionPlan", "Lowered", "RepeatedPlan", "lower_workload", "repeat_plan"]
