"""Results of a native RoCE simulation as pandas DataFrames."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pandas as pd

PORT_COUNTERS: tuple[str, ...] = (
    "tx_bytes",
    "tx_packets",
    "tx_data_bytes",
    "pfc_pause_sent",
    "pfc_resume_sent",
    "pfc_pause_received",
    "ecn_marks",
)
"""Per-port integer counters read from the simulator (besides drops and paused time)."""

DROP_REASONS: tuple[str, ...] = ("no_route", "lossy_buffer_full", "headroom_overflow", "link_down")
"""Named drop reasons (RoceDropReason in C++), each a ``drops_<reason>`` column of ``ports``."""


CC_TRACE_KINDS: tuple[str, ...] = (
    "rate",
    "target_rate",
    "alpha",
    "window",
    "cnp_sent",
    "cnp_received",
    "ecn_mark",
    "rtt",
)
"""Record kinds of ``FlowResults.cc_trace`` (in ``ns3::RdmaCcProbe::Kind`` order)."""


@dataclass(frozen=True)
class FlowResults:
    """Everything a run returns.

    ``flows``: one row per flow: flow_id, src, dst, size_bytes, start_s, priority, finish_s (last byte
    received; NaN if unfinished), fct_s, ack_s (sender saw the last ACK), ideal_fct_s, slowdown
    (fct / ideal), base_rtt_s, retransmits, first_switch_port (port id the flow leaves its first switch
    by, showing its ECMP choice; 4294967295 when src and dst share no switch hop), cnps and acks (CNPs
    and in-order ACKs its receiver sent).
    ``ports``: one row per port (2 per link: port 2l at link l's end ``a``, 2l+1 at ``b``): port, link,
    node, peer, rate_bps, counters of :data:`PORT_COUNTERS`, paused_s, drops_<reason>, drops_total.
    ``queues``: periodic samples: time_s, port, bytes (queued), tx_bytes (cumulative bytes sent by the
    port); empty when sampling was off.
    """

    flows: pd.DataFrame
    ports: pd.DataFrame
    queues: pd.DataFrame = field(default_factory=lambda: pd.DataFrame(columns=["time_s", "port", "bytes", "tx_bytes"]))
    wall_s: float = 0.0
    """Wall-clock seconds of the simulation run (build + run + readback)."""
    events: int = 0
    """Simulator events executed."""
    sim_time_s: float = 0.0
    """Simulated time at the end of the run, seconds."""
    seed: int = 1
    cc_trace: pd.DataFrame | None = None
    """With ``simulate_flows(..., trace_cc=True)``: every congestion-control state change and signal
    (``ns3::RdmaCcProbe``): time_s, flow_id, kind (one of :data:`CC_TRACE_KINDS`), value (bit/s for
    rates, bytes for windows, alpha, egress port index for ECN marks, seconds for TIMELY RTT samples). None
    otherwise."""
    profile: dict[str, int] | None = None
    """Events by kind and DATA frames (:func:`~hetero_ns3.network.ns3.profile.event_profile`)."""

    @property
    def completed(self) -> int:
        """Number of flows whose last byte arrived."""
        return int(self.flows["finish_s"].notna().sum())

    def summary(self) -> str:
        """One line: flows done, FCT percentiles, drops, pauses, wall time."""
        f = self.flows
        fct = f["fct_s"].dropna()
        p50 = float(np.percentile(fct, 50)) * 1e6 if len(fct) else float("nan")
        p99 = float(np.percentile(fct, 99)) * 1e6 if len(fct) else float("nan")
        sd = f["slowdown"].dropna()
        return (
            f"{self.completed}/{len(f)} flows done; FCT p50 {p50:.2f} us, p99 {p99:.2f} us; "
            f"slowdown mean {sd.mean() if len(sd) else float('nan'):.3f}; "
            f"drops {int(self.ports['drops_total'].sum())}; PFC pauses {int(self.ports['pfc_pause_sent'].sum())}; "
            f"ECN marks {int(self.ports['ecn_marks'].sum())}; sim {self.sim_time_s * 1e3:.3f} ms; "
            f"wall {self.wall_s:.2f} s"
        )
