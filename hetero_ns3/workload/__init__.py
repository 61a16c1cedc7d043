"""Workload compiler: model + parallel plan + schedule + placement -> per-rank ops (pure Python, no ns-3).

Public entry points:

* :func:`~hetero_ns3.workload.planner.plan_scenario`, :func:`~hetero_ns3.workload.planner.build_plan`,
  :func:`~hetero_ns3.workload.planner.resolve` -> :class:`~hetero_ns3.workload.planner.CompiledIteration`;
* :class:`~hetero_ns3.workload.artefact.Workload` (the artefact), :class:`~hetero_ns3.workload.artefact.Op`;
* :class:`~hetero_ns3.workload.models.ModelSpec`, :func:`~hetero_ns3.workload.models.get_model`;
* :class:`~hetero_ns3.workload.parallel.ParallelismSpec`; :func:`~hetero_ns3.workload.schedule.pipeline_schedule`.
"""

from hetero_ns3.workload.artefact import Op, Program, ProgramOp, Workload
from hetero_ns3.workload.models import ModelSpec, get_model, model_catalog
from hetero_ns3.workload.parallel import ParallelismSpec

__all__ = ["ModelSpec", "Op", "ParallelismSpec", "Program", "ProgramOp", "Workload", "get_model", "model_catalog"]
