"""The N-to-1 incast of issue 14 as a reproducible case: its flows, its line-rate ideal and Jain's index.

Pure functions (no ns-3): ``scripts/incast_table.py`` and the ``incast`` cases of ``hetero-ns3 validate``
run the flows with :func:`hetero_ns3.network.ns3.roce.simulate_flows` on ``star:N+1`` and score them here.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

#: RoCEv2 payload and header bytes of a DATA frame (the packet backend's defaults), and HPCC's INT bytes.
PAYLOAD_BYTES = 4096
HEADER_BYTES = 62
INT_BYTES = 42


def incast_flows(senders: int, size_bytes: int) -> pd.DataFrame:
    """``senders`` flows of ``size_bytes`` from ``h1..hN`` to ``h0``, all at t = 0 (a ``flows`` CSV's columns)."""
    return pd.DataFrame(
        {
            "src": [f"h{i}" for i in range(1, senders + 1)],
            "dst": ["h0"] * senders,
            "size_bytes": [size_bytes] * senders,
            "start_s": [0.0] * senders,
        }
    )


def ideal_makespan_s(senders: int, size_bytes: int, rate_bps: float, int_header: bool = False) -> float:
    """Wire bytes of all flows through the receiver's one link at line rate, seconds (framing included)."""
    frame = PAYLOAD_BYTES + HEADER_BYTES + (INT_BYTES if int_header else 0)
    return senders * size_bytes * frame / PAYLOAD_BYTES * 8 / rate_bps


def jain_index(flows: pd.DataFrame) -> float:
    """Jain's fairness index of the flows' mean throughputs (``size_bytes / fct_s``): 1 = equal shares."""
    thr = (flows["size_bytes"] / flows["fct_s"]).to_numpy(dtype=np.float64)
    return float(thr.sum() ** 2 / (len(thr) * (thr**2).sum()))
