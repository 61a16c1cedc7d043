"""NCCL-like collective planner: collective calls -> flows and compute tasks with dependencies.

Pure Python (no ns-3). Public API:

* :func:`plan_collective` (``planner``): one call into a :class:`~hetero_ns3.plan.builder.PlanBuilder`.
* :class:`CollectiveCall`, :class:`CollectiveResult`, :class:`Choice`, :class:`Hop` (``types``).
* :class:`CollectiveEnv` (``env``): the topology view, ``CollectiveEnv.from_graph(graph)``.
* :func:`choose` (``select``): the cost-model choice alone; :func:`busbw_factor`.
* :func:`load_tuning` (``tuning``), :func:`load_schedule_file` (``schedules``),
  :func:`get_algorithm` / :func:`algorithms` / :func:`register` (``registry``).
* :func:`estimate_plan` (``estimate``): the closed-form (alpha-beta) replay of a plan.

See docs/collectives.md.
"""

from hetero_ns3.collectives.env import CollectiveEnv, PairPath
from hetero_ns3.collectives.estimate import estimate_plan
from hetero_ns3.collectives.planner import plan_collective
from hetero_ns3.collectives.registry import algorithms, get_algorithm, register
from hetero_ns3.collectives.schedules import load_schedule_file
from hetero_ns3.collectives.select import choose
from hetero_ns3.collectives.tuning import Tuning, load_tuning
from hetero_ns3.collectives.types import (
    OPS,
    PROTOCOLS,
    Choice,
    CollectiveCall,
    CollectiveResult,
    Hop,
    busbw_factor,
    normalize_op,
)

__all__ = [
    "OPS",
    "PROTOCOLS",
    "Choice",
    "CollectiveCall",
    "CollectiveEnv",
    "CollectiveResult",
    "Hop",
    "PairPath",
    "Tuning",
    "algorithms",
    "busbw_factor",
    "choose",
    "estimate_plan",
    "get_algorithm",
    "load_schedule_file",
    "load_tuning",
    "normalize_op",
    "plan_collective",
    "register",
]
