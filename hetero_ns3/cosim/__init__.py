"""Co-simulation of training iterations: lower the workload into one execution plan, replay it on a
network backend (packet-level ``ns3`` or flow-level ``analytic``), and write a self-describing run.

* :func:`lower_workload` (``lower``): Workload + collective planner -> ExecutionPlan.
* :func:`repeat_plan` (``iterations``): one iteration's plan -> N iterations chained per GPU.
* :func:`run_scenario` (``runner``): scenario -> run directory (``hetero-ns3 run``).
* Scenario sections ``[network]``, ``[run]``, ``[faults]``, ``[collectives]`` (``scenario_section``).
"""

from hetero_ns3.cosim.iterations import RepeatedPlan, repeat_plan
from hetero_ns3.cosim.lower import Lowered, lower_workload

__all__ = ["Lowered", "RepeatedPlan", "lower_workload", "repeat_plan"]
