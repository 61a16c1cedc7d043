"""Results of a run: iteration time, breakdown, tables, Chrome trace, plots, the run directory.

Definitions of every breakdown term: ``docs/results.md``.
"""

from hetero_ns3.results.breakdown import TERMS, Breakdown
from hetero_ns3.results.categories import CATEGORY_CLASSES, category_class
from hetero_ns3.results.meta import GpuMeta, resolve_gpu_meta
from hetero_ns3.results.reader import RunData, load_run
from hetero_ns3.results.recorder import RunRecorder, recording_run
from hetero_ns3.results.rundir import RunPaths, load_plan, save_plan, write_partial, write_run
from hetero_ns3.results.study_reader import load_study
from hetero_ns3.results.summary import Summary, format_summary, summarize
from hetero_ns3.results.tables import flows_frame, tasks_frame
from hetero_ns3.results.trace import chrome_trace
from hetero_ns3.results.versions import versions_info

__all__ = [
    "CATEGORY_CLASSES",
    "TERMS",
    "Breakdown",
    "GpuMeta",
    "RunData",
    "RunPaths",
    "RunRecorder",
    "Summary",
    "category_class",
    "chrome_trace",
    "flows_frame",
    "format_summary",
    "load_plan",
    "load_run",
    "load_study",
    "recording_run",
    "resolve_gpu_meta",
    "save_plan",
    "summarize",
    "tasks_frame",
    "versions_info",
    "write_partial",
    "write_run",
]
