"""The ``collective`` point kind: one collective call (like one row of ``hetero-ns3 collective``) as a run.

A study with ``study.kind = "collective"`` has a base with three tables, each loaded like a scenario
section (dotted-path errors, unknown keys rejected)::

    [collective]   op, size, algo, protocol, channels, root, dtype
    [cluster]      topology (star:N, leafspine:L,S,H, a preset or a file), gpus, link_rate, link_delay
    [run]          backend (analytic | ns3), seed, cc (ns3 only)

The point plans the call with the NCCL-like planner, replays it on the backend and writes an ordinary
run directory (plan, tasks, flows, trace, summary); ``summary.json``'s ``collective`` table holds the
nccl-tests columns (time, algbw, busbw) and the planner's choice.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from hetero_ns3.errors import ScenarioError, SimulationError, field_error
from hetero_ns3.scenario.fields import load_dataclass, to_plain

SECTIONS = ("collective", "cluster", "run")


@dataclass(frozen=True)
class CollectiveCallSection:
    op: str = "all_reduce"
    size: int = field(default=1 << 20, metadata={"unit": "size", "doc": "message size, bytes"})
    algo: str | None = None
    protocol: Literal["LL", "LL128", "Simple"] | None = None
    channels: int | None = None
    root: int = 0

    def validate(self, where: str = "collective") -> None:
        from hetero_ns3.collectives import normalize_op

        normalize_op(self.op, f"{where}.op")
        if self.size <= 0:
            raise field_error(f"{where}.size", self.size, "must be a positive size", "e.g. '64MiB'")
        if self.channels is not None and self.channels < 1:
            raise field_error(f"{where}.channels", self.channels, "must be >= 1")


@dataclass(frozen=True)
class CollectiveClusterSection:
    topology: str = "star:8"
    gpus: int | None = None
    """Use the topology's first N GPUs (default: all)."""
    link_rate: float = field(default=100e9, metadata={"unit": "rate"})
    link_delay: float = field(default=1e-6, metadata={"unit": "time"})


@dataclass(frozen=True)
class CollectiveRunSection:
    backend: Literal["analytic", "ns3"] = "analytic"
    seed: int = 1
    cc: Literal["none", "dcqcn", "hpcc", "dctcp", "timely"] | None = None
    """Congestion control of the ns3 backend (the kinds of ``network.cc.kind``)."""


@dataclass(frozen=True)
class CollectivePoint:
    collective: CollectiveCallSection
    cluster: CollectiveClusterSection
    run: CollectiveRunSection
    base_dir: Path

    def resolved(self) -> dict[str, Any]:
        return {k: to_plain(getattr(self, k)) for k in SECTIONS}


def load_collective(raw: Mapping[str, Any], base_dir: Path | str = ".") -> CollectivePoint:
    for key in raw:
        if key not in SECTIONS:
            raise field_error(str(key), raw[key], "is not a table of a collective point", f"use {list(SECTIONS)}")
    return CollectivePoint(
        load_dataclass(CollectiveCallSection, raw.get("collective", {}), "collective"),
        load_dataclass(CollectiveClusterSection, raw.get("cluster", {}), "cluster"),
        load_dataclass(CollectiveRunSection, raw.get("run", {}), "run"),
        Path(base_dir),
    )


def run_collective(point: CollectivePoint, out_dir: Path) -> dict[str, Any]:
    """Plan, replay and record one collective call; returns the nccl-tests columns."""
    from hetero_ns3.collectives import CollectiveCall, CollectiveEnv, busbw_factor, normalize_op, plan_collective
    from hetero_ns3.plan.builder import PlanBuilder
    from hetero_ns3.results import versions_info, write_run
    from hetero_ns3.topology import resolve_topology

    c, cl, run = point.collective, point.cluster, point.run
    topo = cl.topology
    if (point.base_dir / topo).is_file():
        topo = str(point.base_dir / topo)
    graph = resolve_topology(topo, cl.link_rate, cl.link_delay)
    env = CollectiveEnv.from_graph(graph, None)
    group = env.gpus if cl.gpus is None else env.gpus[: cl.gpus]
    if cl.gpus is not None and not 1 <= cl.gpus <= len(env.gpus):
        raise field_error("cluster.gpus", cl.gpus, f"must be in 1..{len(env.gpus)} (GPUs of the topology)")
    op = normalize_op(c.op, "collective.op")
    call = CollectiveCall(op, group, c.size, algo=c.algo, protocol=c.protocol, channels=c.channels, root=c.root)
    builder = PlanBuilder(group)
    res = plan_collective(builder, call, env)
    plan = builder.build()
    from hetero_ns3.network.backend import get_backend
    from hetero_ns3.network.config import CcConfig, NetworkConfig

    config = NetworkConfig(cc=CcConfig(kind=run.cc)) if run.cc else NetworkConfig()
    rep = get_backend(run.backend, "run.backend").run(plan, graph, config, seed=run.seed)
    if not rep.completed:
        raise SimulationError(
            f"the {run.backend} replay stopped before every task finished (at {rep.sim_time_s:.6f} s)"
        )
    times, flows = rep.times, rep.flows
    t = float(times.makespan_s)
    if not t > 0:
        raise ScenarioError(f"collective.size ({c.size}) gave an empty plan on {cl.topology}; use more GPUs")
    algbw = c.size / t / 1e9
    cols = {
        "op": op,
        "size_bytes": int(c.size),
        "ranks": len(group),
        "time_s": t,
        "algbw_GBps": algbw,
        "busbw_GBps": algbw * busbw_factor(op, len(group)),
        "algo": res.algo,
        "protocol": res.protocol,
        "channels": int(res.channels),
        "predicted_s": float(res.predicted_s),
    }
    write_run(
        out_dir,
        scenario_resolved={"source": "<collective point>", **point.resolved()},
        versions=versions_info(run.seed),
        plan=plan,
        times=times,
        gpu_meta=None,
        flows_df=flows,
        extra_summary={"collective": cols, "run": {"backend": run.backend, "seed": run.seed}},
        plots=False,
    )
    return cols
