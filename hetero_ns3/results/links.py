"""Traffic on the GPUs' own links over time, from a run's flows table.

Every flow leaves its source GPU on one port and enters its destination GPU on one port: the NIC
(host <-> first switch) for inter-node flows, the NVLink / PCIe port for intra-node ones. Those links
are known from the flows table alone, so their load over time is exact given the flows' start and
finish times, taking each flow's bytes as spread evenly over its lifetime (its mean rate). Fabric links
(switch to switch) depend on the ECMP path of each flow, which the run directory does not store. An
NVSwitch's NVLS endpoint (``n0.nvls``, the switch's reduction engine) is not a GPU: flows to and from it
count on the GPU's port only.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from hetero_ns3.results.meta import is_endpoint

PORT_KINDS = ("nic-out", "nic-in", "nvlink-out", "nvlink-in")


def _ports(flows: pd.DataFrame) -> pd.DataFrame:
    ok = flows[np.isfinite(flows["start_s"]) & np.isfinite(flows["finish_s"])]
    intra = ok["intra_node"].astype(bool).to_numpy()
    out_kind = np.where(intra, "nvlink-out", "nic-out")
    in_kind = np.where(intra, "nvlink-in", "nic-in")
    cols = ["start_s", "finish_s", "size_bytes"]
    src, dst = ok["src"].astype(str).to_numpy(), ok["dst"].astype(str).to_numpy()
    a = ok[cols].assign(port=src + " " + out_kind)[[not is_endpoint(x) for x in src]]
    b = ok[cols].assign(port=dst + " " + in_kind)[[not is_endpoint(x) for x in dst]]
    return pd.concat([a, b], ignore_index=True)


def _bytes_at(edges: np.ndarray, start: np.ndarray, finish: np.ndarray, size: np.ndarray) -> np.ndarray:
    """Cumulative bytes carried by ``edges`` (s), each flow at its mean rate over [start, finish]."""
    dur = finish - start
    inst = dur <= 0
    rate = np.where(inst, 0.0, size / np.where(inst, 1.0, dur))
    t = np.concatenate([start, finish, start[inst]])
    d_rate = np.concatenate([rate, -rate, np.zeros(int(inst.sum()))])
    d_jump = np.concatenate([np.zeros(len(start) * 2), size[inst]])
    order = np.argsort(t, kind="stable")
    t, d_rate, d_jump = t[order], d_rate[order], d_jump[order]
    r = np.cumsum(d_rate)  # rate after each event
    cum = np.concatenate([[0.0], np.cumsum(r[:-1] * np.diff(t))]) + np.cumsum(d_jump)
    return np.interp(edges, t, cum, left=0.0, right=cum[-1] if len(cum) else 0.0)


def busiest_ports(flows: pd.DataFrame, top: int = 8, bins: int = 100) -> tuple[pd.DataFrame, pd.DataFrame]:
    """The ``top`` GPU ports by bytes carried, and their rate over time.

    Returns ``(ports, series)``: ``ports`` has ``port`` ("n0.g3 nic-out"), ``bytes``, ``mean_rate_Gbps``
    (over the run), ``peak_rate_Gbps`` (highest bin); ``series`` has ``time_s`` (bin middles) and one
    column per port in Gbit/s.
    """
    p = _ports(flows)
    if p.empty:
        return pd.DataFrame(columns=["port", "bytes", "mean_rate_Gbps", "peak_rate_Gbps"]), pd.DataFrame()
    t0, t1 = float(p["start_s"].min()), float(p["finish_s"].max())
    edges = np.linspace(t0, t1 if t1 > t0 else t0 + 1e-9, bins + 1)
    width = edges[1] - edges[0]
    totals = p.groupby("port")["size_bytes"].sum().sort_values(ascending=False).head(top)
    series = {"time_s": (edges[:-1] + edges[1:]) / 2}
    rows = []
    for port, nbytes in totals.items():
        q = p[p["port"] == port]
        cum = _bytes_at(edges, *(q[c].to_numpy(dtype=float) for c in ("start_s", "finish_s", "size_bytes")))
        gbps = np.diff(cum) * 8 / width / 1e9
        series[str(port)] = gbps
        rows.append((str(port), int(nbytes), nbytes * 8 / (edges[-1] - edges[0]) / 1e9, float(gbps.max())))
    ports = pd.DataFrame(rows, columns=["port", "bytes", "mean_rate_Gbps", "peak_rate_Gbps"])
    return ports, pd.DataFrame(series)
