"""Draw a topology as layers: GPUs at the bottom, intra-node fabric, NICs, then network tiers."""

from __future__ import annotations

from pathlib import Path

from hetero_ns3.topology.graph import NetGraph

LAYER = {
    "gpu": 0, "host": 0, "nvls": 0.4, "nvswitch": 0.8, "nvlink-bridge": 0.8, "pcie-switch": 1.4, "pcie-root": 1.9, "nic": 2.5,
    "rail": 3.5, "leaf": 3.5, "edge": 3.5, "agg": 4.5, "spine": 5.5, "core": 5.5,
}  # fmt: skip
COLOR = {"nvlink": "tab:green", "pcie": "tab:orange", "network": "tab:blue"}


def layer_rows(graph: NetGraph) -> dict[float, list[int]]:
    """Node indices by drawing layer (height): GPUs at 0, NVSwitch NVLS endpoints (role ``nvls``, not GPUs)
    on their own row under the NVSwitches, then the fabric up to the spines."""
    rows: dict[float, list[int]] = {}
    for i, n in enumerate(graph.nodes):
        rows.setdefault(LAYER.get(n.role, 3.0 if n.kind == "switch" else 0.0), []).append(i)
    return rows


def row_label(graph: NetGraph, members: list[int]) -> str:
    """``role (count)`` of one layer."""
    return f"{graph.nodes[members[0]].role or graph.nodes[members[0]].kind} ({len(members)})"


def plot_topology(graph: NetGraph, path: str | Path, title: str = "") -> Path:
    """Write a PNG of ``graph`` to ``path``; line colour by link kind, width by rate."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = layer_rows(graph)
    # Servers side by side: each zone gets an equal slice of the width; its elements of one layer
    # spread inside the slice. Network switches spread over the whole width.
    zones = list(dict.fromkeys(n.zone for n in graph.nodes if n.zone))
    slot = {z: k for k, z in enumerate(zones)}
    pos: dict[int, tuple[float, float]] = {}
    for y, members in rows.items():
        by_zone: dict[str, list[int]] = {}
        for i in members:
            by_zone.setdefault(graph.nodes[i].zone, []).append(i)
        for z, ms in by_zone.items():
            lo, width = (slot[z] / len(zones), 1 / len(zones)) if z else (0.0, 1.0)
            for j, i in enumerate(ms):
                pos[i] = (lo + width * (j + 0.5) / len(ms), y)
    fig, ax = plt.subplots(figsize=(14, 6))
    top = max((link.rate_bps for link in graph.links), default=1.0)
    for link in graph.links:
        (x0, y0), (x1, y1) = pos[graph.index(link.a)], pos[graph.index(link.b)]
        w = 0.3 + 1.5 * link.rate_bps / top
        ax.plot([x0, x1], [y0, y1], color=COLOR.get(link.kind, "grey"), lw=w, alpha=0.5)
    for y, members in rows.items():
        xs = [pos[i][0] for i in members]
        ax.scatter(xs, [y] * len(xs), s=12, color="black", zorder=3)
        ax.text(-0.02, y, row_label(graph, members), ha="right", va="center", fontsize=8)
    for kind, c in COLOR.items():
        ax.plot([], [], color=c, label=kind)
    ax.legend(loc="upper right", fontsize=8)
    ax.set_xlim(-0.2, 1.02)
    ax.axis("off")
    ax.set_title(title)
    out = Path(path)
    fig.savefig(out, dpi=110, bbox_inches="tight")
    plt.close(fig)
    return out
