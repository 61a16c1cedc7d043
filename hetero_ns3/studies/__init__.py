"""Studies: a base scenario swept over axes, run point by point on a local pool or a Dask cluster.

Public API: :func:`load_study_file`, :func:`expand`, :func:`run_sweep`, :class:`LocalPool`,
:class:`DaskCluster`, :func:`study_frame`. Reference: ``docs/studies.md``.
"""

from hetero_ns3.studies.executors import DaskCluster, LocalPool, make_executor
from hetero_ns3.studies.point import PointResult, PointTask, run_point
from hetero_ns3.studies.spec import Axis, Point, Study, expand, load_study_file, point_id_of, study_from_dict
from hetero_ns3.studies.sweep import SweepOutcome, plan_sweep, run_sweep
from hetero_ns3.studies.table import study_frame, write_table

__all__ = [
    "Axis",
    "DaskCluster",
    "LocalPool",
    "Point",
    "PointResult",
    "PointTask",
    "Study",
    "SweepOutcome",
    "expand",
    "load_study_file",
    "make_executor",
    "plan_sweep",
    "point_id_of",
    "run_point",
    "run_sweep",
    "study_frame",
    "study_from_dict",
    "write_table",
]
