"""Results of a run: iteration time, breakdown, tables, Chrome trace, plots, the run directory."""

from hetero_ns3.results.breakdown import TERMS, Breakdown
from hetero_ns3.results.meta import GpuMeta, resolve_gpu_meta
from hetero_ns3.results.summary import Summary, format_summary, summarize

__all__ = ["TERMS", "Breakdown", "GpuMeta", "Summary", "format_summary", "resolve_gpu_meta", "summarize"]
