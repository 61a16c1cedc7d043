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
        on_path = share[rows]
        low = on_path.min(axis=1)
        if not np.all(np.isfinite(low)):
            raise ValueError("a flow crosses only resources of infinite capacity")
        # A resource whose share is the lowest on every path through it saturates now: shares only grow
        # as flows freeze elsewhere, so none of its flows can freeze lower (local-minimum rule).
        higher = on_path > low[:, None] * (1.0 + LEVEL_RTOL)
        blocked = np.zeros(n_res, bool)
        blocked[rows[~higher]] = True  # resources that are some flow's minimum...
        not_min = np.zeros(n_res, bool)
        not_min[rows[higher]] = True  # ...and those above some flow's minimum
        bottleneck = blocked & ~not_min
        hit = bottleneck[rows].any(axis=1)
        rate[live[hit]] = low[hit]
        used = np.bincount(rows[hit].ravel(), weights=np.repeat(low[hit], rows.shape[1]), minlength=n_res)
        remcap -= used
        keep = ~hit
        live = live[keep]
        rows = rows[keep]
    return rate, rounds


def unchanged_level(
    res: np.ndarray, rate: np.ndarray, capacity: np.ndarray, added: np.ndarray, removed_min_rate: float
) -> float:
    """Level below which a max-min allocation survives a change of the flow set.

    ``res`` / ``rate`` are the flows that stay, with their old max-min rates; ``added`` (int (G, H)) the
    paths of new flows; ``removed_min_rate`` the smallest old rate among removed flows (inf if none).
    Progressive filling of the new flow set runs exactly as the old one up to the returned level, so
    every staying flow whose old rate is below it keeps that rate (docs/analytic.md, "Incremental
    updates"). A removed flow of rate r cannot have crossed a link that saturated below r; a link crossed
    by new flows saturates at the water level x solving ``sum(min(r_i, x)) + a x = capacity`` over its
    old flows' rates r_i and its a new flows, which is ``max_j (capacity - sum of the j smallest r_i) /
    (k - j + a)`` for a link with k old flows (each term is a tangent from above of a concave function).
    """
    level = removed_min_rate
    if added.shape[0] == 0:
        return level
    n_res = capacity.shape[0]
    pad = n_res - 1
    n_new = np.bincount(added.ravel(), minlength=n_res)
    n_new[pad] = 0
    touched = n_new > 0
    on = touched[res]
    rows = np.nonzero(on)[0]
    lk = res[on]
    r = rate[rows]
    # Links crossed by new flows only: the new flows split the whole capacity.
    sat = np.where(touched, capacity / np.maximum(n_new, 1), np.inf)
    if lk.size:
        order = np.lexsort((r, lk))
        lk, r = lk[order], r[order]
        first = np.concatenate(([0], np.flatnonzero(np.diff(lk)) + 1))
        links = lk[first]
        k = np.diff(np.append(first, lk.size))
        csum = np.cumsum(r)
        before = csum - r  # sum of smaller rates on the same link, plus earlier links' totals
        base = np.repeat(before[first], k)
        pos = np.arange(lk.size) - np.repeat(first, k)
        cap = capacity[lk]
        cand = (cap - (before - base)) / (np.repeat(k, k) - pos + n_new[lk])
        best = np.maximum.reduceat(cand, first)
        total = csum[np.append(first[1:], lk.size) - 1] - before[first]
        best = np.maximum(best, (capacity[links] - total) / n_new[links])
        sat[links] = best
    return min(level, float(sat.min()))
