"""Max-min fair rates of flows over shared resources (progressive filling / water-filling).

A flow is a row of resource ids; every resource has a capacity. Max-min fairness (Bertsekas & Gallager,
*Data Networks*, 2nd ed., section 6.5.2) raises all rates together; when a resource fills up, the flows
through it freeze at the fair share of that resource (its bottleneck), and the rest go on growing.
The vectorized form below freezes, per round, every flow that crosses a resource whose fair share
``remaining capacity / unfrozen flows`` equals the smallest one, so a round costs O(flows x path length)
and the number of rounds is the number of distinct bottleneck levels.
"""

from __future__ import annotations

import numpy as np

#: Resources whose fair share is within this relative distance of the minimum saturate in the same round.
LEVEL_RTOL = 1e-12


def maxmin_rates(res: np.ndarray, capacity: np.ndarray) -> tuple[np.ndarray, int]:
    """Max-min fair rates.

    ``res`` is an int (A, H) array of resource ids per flow (padding ids must have ``capacity`` inf);
    ``capacity`` is the capacity of every resource (any unit, e.g. bytes/s). Returns the rates (same
    unit, float64, shape (A,)) and the number of water-filling rounds used.
    """
    a = res.shape[0]
    rate = np.zeros(a)
    if a == 0:
        return rate, 0
    n_res = capacity.shape[0]
    remcap = capacity.astype(np.float64, copy=True)
    live = np.arange(a)
    rows = res
    rounds = 0
    while live.size:
        rounds += 1
        cnt = np.bincount(rows.ravel(), minlength=n_res)
        with np.errstate(divide="ignore", invalid="ignore"):
            share = remcap / cnt
        share[cnt == 0] = np.inf
        level = share.min()
        if not np.isfinite(level):
            raise ValueError("a flow crosses only resources of infinite capacity")
        bottleneck = share <= level * (1.0 + LEVEL_RTOL)
        hit = bottleneck[rows].any(axis=1)
        rate[live[hit]] = level
        used = np.bincount(rows[hit].ravel(), minlength=n_res) * level
        remcap -= used
        keep = ~hit
        live = live[keep]
        rows = rows[keep]
    return rate, rounds
