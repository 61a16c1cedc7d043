"""The flow-level (``analytic``) network backend: the same DAG as the packet backend, max-min fair flows.

Public API: :func:`simulate_plan`, :func:`simulate_flows`, :class:`AnalyticConfig`, :class:`Framing`,
:class:`AnalyticResult`; :func:`replay_times` / :func:`prepare_times` (:class:`AnalyticTimes`: task times only, in less memory).
See docs/analytic.md.
"""

from hetero_ns3.network.analytic.api import AnalyticResult, AnalyticStats, simulate_flows, simulate_plan
from hetero_ns3.network.analytic.config import ETHERNET_PREAMBLE_IFG_BYTES, ROCEV2_HEADER_BYTES, AnalyticConfig, Framing
from hetero_ns3.network.analytic.maxmin import maxmin_rates
from hetero_ns3.network.analytic.times_only import AnalyticTimes, PreparedTimes, prepare_times, replay_times

__all__ = [
    "ETHERNET_PREAMBLE_IFG_BYTES",
    "ROCEV2_HEADER_BYTES",
    "AnalyticConfig",
    "AnalyticResult",
    "AnalyticStats",
    "AnalyticTimes",
    "Framing",
    "PreparedTimes",
    "maxmin_rates",
    "prepare_times",
    "replay_times",
    "simulate_flows",
    "simulate_plan",
]
