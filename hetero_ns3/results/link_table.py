"""Per-link traffic by job: the ``links`` table of a multi-job run and each job's contention figures.

Input: the payload bytes each job put on each directed link (``Backend.link_load``, float64
``(jobs, links, 2)``), the graph and the run's span. One row per (directed link, job) that carried bytes.
Utilisation is payload bits over what the link could carry during the run (``bytes * 8 / (rate * span)``,
the span from the first task start to the last task finish),
so a link that is busy for half the run at line rate reads about 0.5 less the header share.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import pandas as pd

from hetero_ns3.topology.graph import SWITCH, NetGraph

#: Columns of the ``links`` table, in order.
LINK_COLUMNS = (
    "link", "from", "to", "kind", "fabric", "rate_bps", "job", "bytes", "utilisation", "jobs_on_link",
)  # fmt: skip


def link_table(graph: NetGraph, by_job: np.ndarray, jobs: Sequence[str], span_s: float) -> pd.DataFrame:
    """The ``links`` table: one row per directed link and job with bytes on it (:data:`LINK_COLUMNS`).

    ``fabric`` is True for links between two switches of the network (leaf-spine, spine-core: both ends
    outside any server, not NIC/PCIe/NVSwitch elements of a node); ``jobs_on_link`` counts the jobs with
    bytes on that directed link.
    """
    n_jobs, n_links = len(jobs), len(graph.links)
    if by_job.shape != (n_jobs, n_links, 2):
        raise ValueError(f"by_job has shape {by_job.shape}; expected ({n_jobs}, {n_links}, 2)")
    flat = by_job.reshape(n_jobs, 2 * n_links)
    on = flat > 0
    sharing = on.sum(axis=0)
    j, r = np.nonzero(on)
    li, back = r // 2, r % 2 == 1
    ends = [(lk.a, lk.b) for lk in graph.links]
    frm = [ends[k][1] if bk else ends[k][0] for k, bk in zip(li, back, strict=True)]
    to = [ends[k][0] if bk else ends[k][1] for k, bk in zip(li, back, strict=True)]
    is_switch = {n.name for n in graph.nodes if n.kind == SWITCH and not n.zone}
    rate = np.array([graph.links[k].rate_bps for k in li], np.float64)
    nbytes = flat[j, r]
    util = nbytes * 8 / (rate * span_s) if span_s > 0 else np.zeros_like(nbytes)
    return pd.DataFrame(
        {
            "link": [f"{a}->{b}" for a, b in zip(frm, to, strict=True)],
            "from": frm,
            "to": to,
            "kind": [graph.links[k].kind for k in li],
            "fabric": [a in is_switch and b in is_switch for a, b in zip(frm, to, strict=True)],
            "rate_bps": rate,
            "job": np.asarray(jobs, dtype=object)[j] if n_jobs else np.array([], dtype=object),
            "bytes": nbytes,
            "utilisation": util,
            "jobs_on_link": sharing[r].astype(np.int64),
        },
        columns=list(LINK_COLUMNS),
    )


def job_link_figures(table: pd.DataFrame, job: str) -> dict[str, Any]:
    """One job's contention figures from the ``links`` table.

    ``network_bytes``: payload bytes the job put on links (summed over every link of every path);
    ``fabric_bytes``: of which on switch-to-switch links; ``shared_fabric_fraction``: the share of
    ``fabric_bytes`` on directed links that another job also used (0 when the job kept to itself);
    ``busiest_link`` / ``busiest_link_utilisation``: its most loaded directed link (all jobs' bytes);
    ``fabric_peak_utilisation``: the same over the fabric links it uses (0 without any).
    """
    mine = table[table["job"] == job]
    fabric = mine[mine["fabric"]]
    fabric_bytes = float(fabric["bytes"].sum())
    shared = float(fabric.loc[fabric["jobs_on_link"] > 1, "bytes"].sum())
    out: dict[str, Any] = {
        "network_bytes": float(mine["bytes"].sum()),
        "fabric_bytes": fabric_bytes,
        "shared_fabric_fraction": shared / fabric_bytes if fabric_bytes > 0 else 0.0,
        "busiest_link": None,
        "busiest_link_utilisation": 0.0,
        "fabric_peak_utilisation": 0.0,
    }
    if not mine.empty:
        total = table.groupby("link")["utilisation"].sum()
        links = total.loc[mine["link"].unique()]
        out["busiest_link"] = str(links.idxmax())
        out["busiest_link_utilisation"] = float(links.max())
        if not fabric.empty:
            out["fabric_peak_utilisation"] = float(total.loc[fabric["link"].unique()].max())
    return out
