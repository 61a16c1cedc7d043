"""Events of a packet-level run by kind (``--profile``): what the event loop spends its time on.

The native module counts its events by kind (``native/model/roce-profile.h``: frame arrivals per frame
type, transmit-complete and pacing wake-ups of ports, PFC timers, retransmit timers, task completions
of the DAG replay, scheduled flow starts, DCQCN's alpha, decrease and increase timers) and the DATA frames
its NICs make. :func:`event_profile`
adds the simulator's total and what the module does not count itself (``other``: the other congestion
controls' timers, link-fault events); :func:`format_profile` prints it with the cost per DATA frame.
"""

from __future__ import annotations

from collections.abc import Mapping

#: Counter names of the native profile (``RoceProfile::Name``), in its order, then ``data_frames``.
KINDS: tuple[str, ...] = (
    "data_hop",
    "ack_hop",
    "nack_hop",
    "cnp_hop",
    "pfc_hop",
    "tx_complete",
    "pacing_wake",
    "pfc_resume_timer",
    "pfc_refresh",
    "rto",
    "task_done",
    "flow_start",
    "sample",
    "dcqcn_alpha",
    "dcqcn_decrease",
    "dcqcn_increase",
)


def event_profile(counts: Mapping[str, int], total_events: int) -> dict[str, int]:
    """``counts`` (from the engine's ``profile()``) plus ``other`` (total minus the counted kinds) and ``total``."""
    out = {k: int(counts.get(k, 0)) for k in KINDS}
    counted = sum(out.values())
    out["other"] = max(0, int(total_events) - counted)
    out["total"] = int(total_events)
    out["data_frames"] = int(counts.get("data_frames", 0))
    return out


def format_profile(profile: Mapping[str, int], cpu_s: float | None = None) -> str:
    """A table of events by kind (count, share, per DATA frame) and, with ``cpu_s``, CPU per event and frame."""
    total = max(1, int(profile.get("total", 0)))
    frames = int(profile.get("data_frames", 0))
    lines = [f"{'event kind':<18} {'events':>14} {'share':>7} {'per frame':>10}"]
    for k in (*KINDS, "other"):
        v = int(profile.get(k, 0))
        if v == 0:
            continue
        per = f"{v / frames:10.3f}" if frames else f"{'-':>10}"
        lines.append(f"{k:<18} {v:>14,} {100.0 * v / total:6.1f}% {per}")
    lines.append(f"{'total':<18} {total:>14,} {100.0:6.1f}% " + (f"{total / frames:10.3f}" if frames else ""))
    lines.append(f"DATA frames made by NICs: {frames:,}")
    if cpu_s is not None and cpu_s > 0:
        lines.append(
            f"CPU per event: {cpu_s / total * 1e9:.0f} ns; per DATA frame: {cpu_s / max(frames, 1) * 1e9:.0f} ns"
        )
    return "\n".join(lines)
