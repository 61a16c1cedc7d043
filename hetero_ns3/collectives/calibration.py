"""Small-message latency of the collective model, fitted on a public nccl-tests sweep (issue 14).

Data: ``hetero_ns3/data/validation/nccl_tests_h100x8.csv``, NVIDIA's sample ``all_reduce_perf`` output
on one DGX H100 (8 B .. 16 GiB; source in the file). Model: the planner's plan of that all-reduce on
``dgx-h100-rail`` (first 8 GPUs), replayed by the analytic backend, i.e. what ``hetero-ns3 validate``
and ``hetero-ns3 collective --backend analytic`` report.

NCCL v2.30.7's latency tables (``collectives/tuning.toml``) are used as they are. The one fitted
constant is the launch cost of a call (``[latency] launch_us``), which NCCL's tuner leaves out because it
is the same for every algorithm and protocol: the planner puts it once in every rank's entry task, so
the replayed time is exactly ``t0(S) + x`` (:func:`fit_launch` checks this). A single GPU count cannot
separate NCCL's base latency from its per-step NVLink latency (both enter as ``base + 2(n-1) hop``),
so those keep NCCL's values.

* **Outliers** (:func:`outlier_sizes`): a point whose time exceeds the time of the next larger size
  by more than :data:`OUTLIER_RISE`. Time cannot fall when the size doubles in any latency + size /
  bandwidth model, so such a spike is a hiccup of the run (32 B at 68 us, 4 KiB at 23.6 us).
* **Fit points** (:func:`fit_sizes`): the latency-bound sizes, published time below
  :data:`LATENCY_BOUND` x the smallest published time (8 B .. 512 KiB), outliers excluded.
* **Fit** (:func:`fit_launch`): least squares of the relative time residuals, closed form
  ``x = sum((p - t0) / p^2) / sum(1 / p^2)``.
"""

from __future__ import annotations

import csv
import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from hetero_ns3.collectives.tuning import Tuning
from hetero_ns3.errors import PlanningError, ScenarioError
from hetero_ns3.paths import PACKAGE_DATA

SWEEP_CSV = PACKAGE_DATA / "validation" / "nccl_tests_h100x8.csv"
RESIDUALS_CSV = PACKAGE_DATA / "validation" / "nccl_latency_fit.csv"
TOPOLOGY = "dgx-h100-rail"
GPUS = 8
OUTLIER_RISE = 0.20
"""A point more than this fraction above the next larger size's time is an outlier."""
LATENCY_BOUND = 2.0
"""Fit points: published time below this multiple of the smallest published time."""


@dataclass(frozen=True)
class SweepPoint:
    """One published row: size (bytes), time (s), bus bandwidth (GB/s)."""

    size_bytes: int
    time_s: float
    busbw_GBps: float


@dataclass(frozen=True)
class Replay:
    """One simulated all-reduce: time (s) and the choice the selector made."""

    size_bytes: int
    time_s: float
    algo: str
    protocol: str


def load_sweep(path: str | Path | None = None) -> tuple[SweepPoint, ...]:
    """The published sweep, sizes ascending."""
    p = Path(path) if path is not None else SWEEP_CSV
    with open(p, newline="") as fh:
        rows = list(csv.DictReader(ln for ln in fh if not ln.startswith("#")))
    if not rows:
        raise ScenarioError(f"{p}: no rows; expected size_bytes,time_us,algbw_GBps,busbw_GBps")
    pts = [SweepPoint(int(r["size_bytes"]), float(r["time_us"]) * 1e-6, float(r["busbw_GBps"])) for r in rows]
    return tuple(sorted(pts, key=lambda q: q.size_bytes))


def outlier_sizes(points: Sequence[SweepPoint], rise: float = OUTLIER_RISE) -> frozenset[int]:
    """Sizes whose time exceeds the next larger size's time by more than ``rise`` (module docstring)."""
    return frozenset(
        a.size_bytes for a, b in zip(points, points[1:], strict=False) if a.time_s > (1.0 + rise) * b.time_s
    )


def fit_sizes(points: Sequence[SweepPoint]) -> list[int]:
    """The latency-bound sizes the fit uses (module docstring)."""
    bad = outlier_sizes(points)
    t_min = min(q.time_s for q in points if q.size_bytes not in bad)
    return [q.size_bytes for q in points if q.size_bytes not in bad and q.time_s < LATENCY_BOUND * t_min]


def replay(sizes: Sequence[int], tuning: Tuning, gpus: int = GPUS, algo: str | None = None) -> list[Replay]:
    """All-reduce of each size over the first ``gpus`` GPUs of :data:`TOPOLOGY`, analytic backend."""
    from hetero_ns3.collectives import CollectiveCall, CollectiveEnv, plan_collective
    from hetero_ns3.network.analytic import simulate_plan
    from hetero_ns3.plan.builder import PlanBuilder
    from hetero_ns3.topology import resolve_topology

    graph = resolve_topology(TOPOLOGY)
    env = CollectiveEnv.from_graph(graph, tuning)
    group = env.gpus[:gpus]
    out = []
    for size in sizes:
        b = PlanBuilder(group)
        res = plan_collective(b, CollectiveCall("all_reduce", group, int(size), algo=algo), env)
        t = simulate_plan(graph, b.build(), seed=1).times.makespan_s
        out.append(Replay(int(size), t, res.algo, res.protocol))
    return out


@dataclass(frozen=True)
class LaunchFit:
    """Result of :func:`fit_launch`."""

    launch_s: float
    sizes: tuple[int, ...]
    """The fit points."""
    t0_s: tuple[float, ...]
    """Replayed times of the fit points without launch cost."""


def fit_launch(points: Sequence[SweepPoint], tuning: Tuning, probe_s: float = 1e-6) -> LaunchFit:
    """Least-squares launch cost (s) of ``tuning``'s model on the latency-bound points of ``points``.

    Checks first that the replayed time moves by exactly the launch cost (a ``probe_s`` launch adds
    ``probe_s`` at every fit point, 1 ns tolerance) and that the choice does not depend on it.
    """
    sizes = fit_sizes(points)
    base = dataclasses.replace(tuning, launch_s=0.0)
    r0 = replay(sizes, base)
    r1 = replay(sizes, dataclasses.replace(tuning, launch_s=probe_s))
    for a, b in zip(r0, r1, strict=True):
        if abs(b.time_s - a.time_s - probe_s) > 1e-9 or (a.algo, a.protocol) != (b.algo, b.protocol):
            raise PlanningError(
                f"launch cost is not a constant offset at {a.size_bytes} B ({a.time_s:.9f} -> {b.time_s:.9f} s, "
                f"{a.algo}/{a.protocol} -> {b.algo}/{b.protocol}); the closed-form fit does not apply"
            )
    pub = {q.size_bytes: q.time_s for q in points}
    num = sum((pub[r.size_bytes] - r.time_s) / pub[r.size_bytes] ** 2 for r in r0)
    den = sum(1.0 / pub[r.size_bytes] ** 2 for r in r0)
    return LaunchFit(num / den, tuple(sizes), tuple(r.time_s for r in r0))


def residual_table(points: Sequence[SweepPoint], tuning: Tuning) -> list[dict[str, str]]:
    """Per published size: published and simulated time (us), busbw error, the choice, the role."""
    bad = outlier_sizes(points)
    fit = set(fit_sizes(points))
    rows = []
    for q, r in zip(points, replay([q.size_bytes for q in points], tuning), strict=True):
        role = "outlier" if q.size_bytes in bad else ("fit" if q.size_bytes in fit else "check")
        rows.append(
            {
                "size_bytes": str(q.size_bytes),
                "published_us": f"{q.time_s * 1e6:.2f}",
                "simulated_us": f"{r.time_s * 1e6:.2f}",
                "busbw_error_pct": f"{100.0 * (q.time_s / r.time_s - 1.0):+.1f}",
                "choice": f"{r.algo}/{r.protocol}",
                "role": role,
            }
        )
    return rows
