"""Validation suite: simulated figures against published measurements (``hetero-ns3 validate``).

Cases are data (``hetero_ns3/data/validation/suite.toml``): each names what to simulate (a scenario
file, or one collective on a topology), the published value with its source URL, the metric and a
relative tolerance. :func:`run_case` simulates one case on the analytic backend without writing a
run directory; :func:`run_cases` runs a list of them, in worker processes if asked. docs/validation.md lists
the cases.
"""

from __future__ import annotations

import math
import time
import tomllib
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from hetero_ns3.errors import HeteroNs3Error, ScenarioError, SimulationError, field_error
from hetero_ns3.paths import PACKAGE_DATA

if TYPE_CHECKING:
    from hetero_ns3.results.summary import Summary

SUITE_PATH = PACKAGE_DATA / "validation" / "suite.toml"
KINDS = ("scenario", "collective", "incast", "layer")
METRICS = (
    "step_time_s",
    "busbw_GBps",
    "algbw_GBps",
    "mfu_pct",
    "compute_only_s",
    "time_s",
    "makespan_over_ideal",
    "jain_index",
)


@dataclass(frozen=True)
class Case:
    """One validation case.

    Attributes:
        name: identifier (``megatron.gpt-1.7b``).
        kind: ``scenario`` (a training iteration), ``collective`` (one collective call), ``incast`` (N flows
            into one host on a star, packet level) or ``layer`` (one transformer layer's forward + backward
            kernels on one rank, roofline only, against a layer timed on a real GPU).
        metric: step_time_s, mfu_pct, compute_only_s (scenario; the last is the iteration with every collective
            free, to compare with a profile's GPU kernel time outside communication) or busbw_GBps, algbw_GBps,
            time_s (collective; time_s where the published bandwidth rounds to 0, e.g. 8 B); makespan_over_ideal, jain_index (incast: the last
            flow's finish over the line-rate time of all bytes; Jain's index of the flows' throughputs).
        published: the published value, in the metric's unit.
        tolerance: allowed relative error, e.g. 0.10.
        source: URL or citation of the published value.
        quick: part of ``validate --quick``.
        pending: expected to fail until a named feature lands (reported, not counted).
        heldout: a held-out public measurement: no model constant was fitted to it (it counts in the
            exit status like any other case unless also ``pending``; ``validate --heldout`` runs only these).
        scenario: scenario path relative to the suite file (kind scenario).
        op, topology, gpus, size: collective, topology (a preset name, or a cluster TOML path relative
            to the suite file), first N GPUs, bytes (kind collective).
        algo: forced algorithm (collective), e.g. ``ring``.
        ranks: explicit GPU names of the collective's group (instead of ``gpus``).
        senders, size, rate_gbps, cc, cc_preset: incast: ``senders`` flows of ``size`` bytes into ``h0`` on
            ``star:senders+1`` at ``rate_gbps`` (1 us links, the default 32 MiB buffer), congestion control
            ``cc`` (default: the network default, DCQCN) with preset ``cc_preset`` (default: the kind's).
        measured, layer, gpu_type: layer: the folder under ``hetero_ns3/data/measured`` (``h200``), the
            layer's name in its ``layers.csv`` (its shape) and the catalog GPU type to time it on.
        note: free text.
        extrapolate_batches: two smaller global batches ``(g1, g2)`` to simulate instead of the scenario's own, too
            large for this host; the step (and compute-only) time is read off their line (:func:`extrapolated`):
            a pipeline's step is a fixed part plus one steady cost per micro-batch (docs/validation.md,
            "Extrapolated global batch").
    """

    name: str
    kind: str
    metric: str
    published: float
    tolerance: float
    source: str
    quick: bool = False
    pending: str = ""
    heldout: bool = False
    scenario: str = ""
    op: str = ""
    topology: str = ""
    gpus: int = 0
    size: int = 0
    algo: str = ""
    ranks: tuple[str, ...] = field(default=())
    note: str = ""
    overrides: tuple[str, ...] = field(default=())
    senders: int = 0
    rate_gbps: float = 100.0
    cc: str = ""
    cc_preset: str = ""
    measured: str = ""
    layer: str = ""
    gpu_type: str = ""
    extrapolate_batches: tuple[int, ...] = field(default=())


def load_suite(path: str | Path | None = None) -> tuple[Path, tuple[Case, ...]]:
    """Read the suite file; errors name the case index and field."""
    p = Path(path) if path else SUITE_PATH
    if not p.is_file():
        raise ScenarioError(f"validation suite {str(p)!r} does not exist")
    with open(p, "rb") as fh:
        data = tomllib.load(fh)
    cases = []
    known = set(Case.__dataclass_fields__)
    for i, tbl in enumerate(data.get("case", [])):
        where = f"{p.name}: case[{i}]"
        unknown = sorted(set(tbl) - known)
        if unknown:
            raise field_error(
                f"{where}.{unknown[0]}", tbl[unknown[0]], "is not a case field", f"valid: {sorted(known)}"
            )
        for key in ("name", "kind", "metric", "published", "tolerance", "source"):
            if key not in tbl:
                raise ScenarioError(f"{where}.{key} is missing")
        if tbl["kind"] not in KINDS:
            raise field_error(f"{where}.kind", tbl["kind"], "is not a case kind", f"use one of {list(KINDS)}")
        if tbl["metric"] not in METRICS:
            raise field_error(f"{where}.metric", tbl["metric"], "is not a metric", f"use one of {list(METRICS)}")
        if tbl["kind"] == "incast":
            for key, example in (("senders", "8"), ("size", "10000000"), ("rate_gbps", "100.0")):
                value = tbl.get(key, Case.__dataclass_fields__[key].default)
                if not isinstance(value, (int, float)) or isinstance(value, bool) or value <= 0:
                    raise field_error(f"{where}.{key}", value, "must be a positive number for an incast case",
                                      f"e.g. {key} = {example}")  # fmt: skip
        if tbl["kind"] == "layer":
            for key, example in (("measured", "h200"), ("layer", "llama2-7b-tp1"), ("gpu_type", "H200-SXM")):
                if not isinstance(tbl.get(key), str) or not tbl[key]:
                    raise field_error(
                        f"{where}.{key}", tbl.get(key), "is required for a layer case", f'e.g. {key} = "{example}"'
                    )
        if not isinstance(tbl.get("heldout", False), bool):
            raise field_error(f"{where}.heldout", tbl["heldout"], "is not a boolean", "write heldout = true or false")
        tbl = dict(tbl)
        if "extrapolate_batches" in tbl:
            tbl["extrapolate_batches"] = _check_batches(tbl["extrapolate_batches"], tbl, f"{where}.extrapolate_batches")
        tbl["overrides"] = tuple(tbl.get("overrides", ()))
        tbl["ranks"] = tuple(tbl.get("ranks", ()))
        cases.append(Case(**tbl))
    return p.parent, tuple(cases)


def _check_batches(value: Any, tbl: Mapping[str, Any], where: str) -> tuple[int, ...]:
    """``extrapolate_batches``: two increasing positive integers, on a training case of a time metric."""
    ok = (
        isinstance(value, list)
        and len(value) == 2
        and all(isinstance(v, int) and not isinstance(v, bool) and v > 0 for v in value)
        and value[0] < value[1]
    )
    if not ok:
        raise field_error(
            where, value, "must be two increasing global batches", "e.g. extrapolate_batches = [512, 1024]"
        )
    if tbl["kind"] != "scenario" or tbl["metric"] not in ("step_time_s", "mfu_pct", "compute_only_s"):
        raise field_error(where, value, "applies to scenario cases only", "remove it")
    return tuple(value)


def extrapolated(batches: Sequence[int], values: Sequence[float], batch: int) -> float:
    """The value at ``batch`` of the line through ``(batches[i], values[i])`` (two points)."""
    (g1, g2), (v1, v2) = batches, values
    return v2 + (v2 - v1) * (batch - g2) / (g2 - g1)


def gpu_types_label(types: Iterable[str]) -> str:
    """The GPU types of a case as one label: sorted, distinct, joined by ``+`` (``A100-SXM-80GB+H100-SXM``)."""
    return "+".join(sorted({t for t in types if t}))


def simulate_scenario(path: Path, overrides: Sequence[str] = ()) -> dict[str, float]:
    """Plan, lower and replay one iteration of a scenario on the analytic backend (no run directory).

    Returns ``step_time_s``, ``mfu_pct`` (model FLOPs without recomputation over the summed peaks)
    and ``compute_only_s``.
    """
    return _simulate_scenario(path, overrides)[0]


def _simulate_scenario(
    path: Path, overrides: Sequence[str] = (), batches: Sequence[int] = ()
) -> tuple[dict[str, float], str]:
    """:func:`simulate_scenario` and the cluster's GPU types (:func:`gpu_types_label`). ``batches`` (two global
    batches, ``Case.extrapolate_batches``): simulate those instead and extrapolate to the scenario's own."""
    if not batches:
        _, detail, types = scenario_summary(path, overrides)
        return detail, types
    from hetero_ns3.scenario.loader import load_scenario

    scenario = load_scenario(path, list(overrides))
    scenario.require("parallelism", purpose="extrapolate_batches")
    assert scenario.parallelism is not None
    batch = scenario.parallelism.global_batch
    if batches[-1] >= batch:
        raise field_error(
            "extrapolate_batches",
            list(batches),
            f"must lie below the scenario's global batch ({batch})",
            "use smaller batches or run the case whole",
        )
    runs = [scenario_summary(path, (*overrides, f"parallelism.global_batch={g}"))[1:] for g in batches]
    details = [d for d, _ in runs]
    step = extrapolated(batches, [d["step_time_s"] for d in details], batch)
    last = details[-1]
    detail = {
        "step_time_s": step,
        # model FLOPs grow with the batch: the last run's MFU scaled by batch / g2 and its step over the new one
        "mfu_pct": last["mfu_pct"] * (batch / batches[-1]) * (last["step_time_s"] / step),
        "compute_only_s": extrapolated(batches, [d["compute_only_s"] for d in details], batch),
        **{f"step_time_s@{g}": d["step_time_s"] for g, d in zip(batches, details, strict=True)},
    }
    return detail, runs[-1][1]


def scenario_summary(path: Path, overrides: Sequence[str] = ()) -> tuple[Summary, dict[str, float], str]:
    """:func:`simulate_scenario`'s run with its iteration summary (the breakdown: compute, exposed communication,
    bubble, other), its values and the cluster's GPU types."""
    from hetero_ns3.network.analytic.backend import AnalyticBackend
    from hetero_ns3.pipeline import gpu_meta, load_run_cluster, lower_scenario
    from hetero_ns3.results import summarize
    from hetero_ns3.results.summary import summary_columns
    from hetero_ns3.scenario.loader import load_scenario
    from hetero_ns3.topology import build_graph

    scenario = load_scenario(path, list(overrides))
    cluster = load_run_cluster(scenario)
    graph = build_graph(cluster)
    engine = AnalyticBackend()
    wplan, lowered = lower_scenario(scenario, graph, cluster, engine=engine)
    # What the summary needs of the compiled workload, taken now: the workload (GiBs on the largest rows)
    # and the op exits are dropped before the replay, which lowers the peak (docs/validation.md).
    meta = gpu_meta(cluster, wplan, scenario.faults)
    model_flops, peak_flops, compute_only = wplan.model_flops, wplan.peak_flops, wplan.compute_time
    plan = lowered.plan
    del wplan, lowered
    # Task times only, in two steps (docs/validation.md, "held-out GPT-3 175B"): route, then drop the plan's
    # columns neither the loop nor the summary reads any more, then replay (it raises SimulationError if a
    # task never runs).
    job = engine.prepare_times(plan, graph, scenario.network, seed=scenario.run.seed, faults=scenario.faults)
    plan = summary_columns(plan)
    summary = summarize(plan, job.run().times, meta, None)
    t = summary.iteration_time_s
    detail = {
        "step_time_s": t,
        "mfu_pct": 100.0 * model_flops / (t * peak_flops) if t else 0.0,
        "compute_only_s": compute_only,
    }
    return summary, detail, gpu_types_label(g.gpu_type for g in cluster.gpus())


def simulate_collective(case: Case, base: Path | None = None) -> dict[str, float]:
    """One collective of ``case.size`` bytes over the first ``case.gpus`` GPUs of ``case.topology``.

    A topology ending in ``.toml`` is read relative to ``base`` (the suite's folder) when it exists there.
    """
    return _simulate_collective(case, base)[0]


def _simulate_collective(case: Case, base: Path | None = None) -> tuple[dict[str, float], str]:
    """:func:`simulate_collective` and the group's GPU types (:func:`gpu_types_label`)."""
    from hetero_ns3.collectives import CollectiveCall, CollectiveEnv, busbw_factor, plan_collective
    from hetero_ns3.network.analytic import simulate_plan
    from hetero_ns3.plan.builder import PlanBuilder
    from hetero_ns3.topology import resolve_topology

    topo: str | Path = case.topology
    if base is not None and case.topology.endswith(".toml") and (base / case.topology).is_file():
        topo = base / case.topology
    graph = resolve_topology(topo)
    env = CollectiveEnv.from_graph(graph)
    group = case.ranks or (env.gpus[: case.gpus] if case.gpus else env.gpus)
    call = CollectiveCall(case.op, group, int(case.size), algo=case.algo or None)
    builder = PlanBuilder(group)
    plan_collective(builder, call, env)
    t = simulate_plan(graph, builder.build(), seed=1).times.makespan_s
    algbw = case.size / t / 1e9
    detail = {"time_s": t, "algbw_GBps": algbw, "busbw_GBps": algbw * busbw_factor(call.op, len(group))}
    return detail, gpu_types_label(env.gpu_type(g) for g in group)


def simulate_incast(case: Case) -> dict[str, float]:
    """``case.senders`` x ``case.size`` bytes into ``h0`` at t = 0 on the packet level (docs/roce.md, "The
    8-to-1 incast"): makespan (s), makespan over the line-rate ideal, Jain's index of the flows' throughputs."""
    from hetero_ns3.network.config import CcConfig, NetworkConfig
    from hetero_ns3.network.incast import ideal_makespan_s, incast_flows, jain_index
    from hetero_ns3.network.ns3.roce import simulate_flows
    from hetero_ns3.topology import resolve_topology

    rate = case.rate_gbps * 1e9
    cc = CcConfig(kind=case.cc or CcConfig().kind, preset=case.cc_preset or None)
    graph = resolve_topology(f"star:{case.senders + 1}", rate, 1e-6)
    res = simulate_flows(graph, incast_flows(case.senders, int(case.size)), NetworkConfig(cc=cc))
    if res.completed != case.senders:
        raise SimulationError(f"incast case {case.name!r}: {res.completed} of {case.senders} flows finished")
    makespan = float(res.flows["finish_s"].max())
    ideal = ideal_makespan_s(case.senders, int(case.size), rate, int_header=cc.kind == "hpcc")
    return {"makespan_s": makespan, "makespan_over_ideal": makespan / ideal, "jain_index": jain_index(res.flows)}


def simulate_layer(case: Case) -> dict[str, float]:
    """Roofline time of one rank's layer (forward, forward + backward; seconds) whose shape is the row
    ``case.layer`` of ``measured/<case.measured>/layers.csv``, on ``case.gpu_type`` (docs/compute.md,
    "Measured on H200")."""
    from hetero_ns3.compute.measured import MEASURED_DIR, layer_times, read_table

    rows = read_table(MEASURED_DIR / case.measured, "layers")
    row = next((r for r in rows if r["layer"] == case.layer), None)
    if row is None:
        names = [r["layer"] for r in rows]
        raise field_error(f"case {case.name}.layer", case.layer, f"is not in measured/{case.measured}/layers.csv",
                          f"use one of {names}")  # fmt: skip
    fwd, both = layer_times(row, case.gpu_type)
    return {"time_s": both, "forward_s": fwd}


@dataclass(frozen=True)
class Outcome:
    """Result of one case."""

    case: Case
    simulated: float
    error_pct: float
    within: bool
    wall_s: float
    detail: dict[str, float]
    failure: str = ""
    """Why the case could not be simulated (its input error, as the CLI would print it); "" when it ran."""
    gpu_types: str = ""
    """The GPU types the case simulates (:func:`gpu_types_label`); "" for the incast (hosts, no GPU) and a failure."""
    applied: tuple[str, ...] = ()
    """``validate --set`` overrides this case ran with (training cases only; the others ignore them)."""

    def record(self) -> dict[str, Any]:
        c = self.case
        return {
            "case": c.name,
            "kind": c.kind,
            "gpu_types": self.gpu_types,
            "metric": c.metric,
            "published": c.published,
            "simulated": None if self.failure else self.simulated,
            "error_pct": None if self.failure else self.error_pct,
            "tolerance_pct": 100.0 * c.tolerance,
            "within_tolerance": self.within,
            "pending": c.pending,
            "heldout": c.heldout,
            "source": c.source,
            "wall_s": self.wall_s,
            "failure": self.failure or None,
            "set": "; ".join(self.applied),
            "extrapolated_from": ", ".join(map(str, c.extrapolate_batches)),
        }


def unrun_record(case: Case) -> dict[str, Any]:
    """The table record of a case that was not run (pending), with the columns of :meth:`Outcome.record`."""
    rec = Outcome(case, math.nan, math.nan, False, 0.0, {}).record()
    rec.update(simulated=None, error_pct=None, within_tolerance=None)
    return rec


def run_case(case: Case, base: Path, extra: Sequence[str] = ()) -> Outcome:
    """Simulate one case and compare it with its published value; ``extra``: ``--set`` overrides applied after the
    case's own to a training (scenario) case, ignored by the other kinds (``validate --set``, a what-if)."""
    t0 = time.perf_counter()
    types = ""
    if case.kind == "scenario":
        detail, types = _simulate_scenario(base / case.scenario, (*case.overrides, *extra), case.extrapolate_batches)
    elif case.kind == "incast":
        detail = simulate_incast(case)
    elif case.kind == "layer":
        detail, types = simulate_layer(case), case.gpu_type
    else:
        detail, types = _simulate_collective(case, base)
    sim = detail[case.metric]
    err = 100.0 * (sim - case.published) / case.published
    within = abs(err) <= 100.0 * case.tolerance
    applied = tuple(extra) if case.kind == "scenario" else ()
    return Outcome(case, sim, err, within, time.perf_counter() - t0, detail, gpu_types=types, applied=applied)


def run_case_or_failure(case: Case, base: Path, extra: Sequence[str] = ()) -> Outcome:
    """:func:`run_case`, with an input or planning error of this case (``HeteroNs3Error``: a scenario that does not
    load, a plan that does not fit) recorded as a failed outcome instead of ending the suite."""
    t0 = time.perf_counter()
    try:
        return run_case(case, base, extra)
    except HeteroNs3Error as e:
        msg = f"{type(e).__name__}: {e}"
        applied = tuple(extra) if case.kind == "scenario" else ()
        return Outcome(case, math.nan, math.nan, False, time.perf_counter() - t0, {}, msg, applied=applied)


def check_overrides(cases: Sequence[Case], base: Path, extra: Sequence[str]) -> None:
    """Load the first training case's scenario with ``extra`` (``validate --set``) so that a bad key or value
    fails once, naming the field, before any case runs (``ScenarioError``)."""
    first = next((c for c in cases if c.kind == "scenario"), None)
    if extra and first is not None:
        from hetero_ns3.scenario.loader import load_scenario

        load_scenario(base / first.scenario, [*first.overrides, *extra])


def run_cases(
    cases: Sequence[Case], base: Path, extra: Sequence[str] = (), workers: int = 1
) -> Iterator[tuple[int, Outcome]]:
    """Simulate ``cases``, yielding ``(index in cases, outcome)`` as each finishes.

    ``workers`` > 1 runs up to that many cases at once, each in a fresh spawned process that ends with its case
    (its memory goes back to the system before the next case starts there; the peak is up to ``workers`` times
    one case's). A worker that dies (killed for memory) raises :class:`SimulationError` naming its case; the
    outcomes yielded before it stand. When the caller stops early (Ctrl-C, SIGTERM, an error), the running workers
    are terminated rather than left to finish their cases. The workers ignore SIGINT from their first instruction
    (:func:`_start_ignoring_sigint`): Ctrl-C in a terminal reaches the whole process group, and this process alone
    answers it, so no worker prints a traceback, not even one still starting.
    """
    if workers <= 1:
        for i, c in enumerate(cases):
            yield i, run_case_or_failure(c, base, extra)
        return
    import multiprocessing
    from multiprocessing.connection import wait

    ctx = multiprocessing.get_context("spawn")
    todo = list(enumerate(cases))[::-1]  # popped from the end: the suite's order
    running: dict[int, tuple[Any, Any]] = {}  # case index -> (process, the end its outcome arrives on)
    try:
        while todo or running:
            while todo and len(running) < workers:
                i, c = todo.pop()
                recv, send = ctx.Pipe(duplex=False)
                proc = ctx.Process(target=_case_worker, args=(send, c, base, tuple(extra)))
                _start_ignoring_sigint(proc)
                send.close()  # the worker holds the only sending end: its death shows as EOF here
                running[i] = (proc, recv)
            ready = wait([recv for _, recv in running.values()])
            for i in [i for i, (_, recv) in running.items() if recv in ready]:
                proc, recv = running.pop(i)
                try:
                    outcome = recv.recv()
                except EOFError:
                    raise SimulationError(
                        f"a worker process died while case {cases[i].name!r} ran (out of memory?); the cases "
                        "finished so far are kept; rerun with fewer --workers"
                    ) from None
                finally:
                    recv.close()
                    proc.join()
                if isinstance(outcome, str):  # an unexpected error inside the worker (_case_worker)
                    raise SimulationError(
                        f"case {cases[i].name!r} failed in its worker process: {outcome}; the cases finished so far "
                        "are kept; rerun it with --workers 1 for the traceback"
                    )
                yield i, outcome
    except BaseException:
        for proc, _ in running.values():  # an interrupted run exits now, not after its longest case
            proc.terminate()
        raise
    finally:
        for proc, recv in running.values():
            proc.join()
            recv.close()


def _case_worker(conn: Any, case: Case, base: Path, extra: Sequence[str]) -> None:
    """A worker process's whole life: one case, its outcome sent back on ``conn`` (or, for an error that
    :func:`run_case_or_failure` does not record, a bug, the error as one line of text)."""
    try:
        result: Outcome | str = run_case_or_failure(case, base, extra)
    except Exception as e:  # reported to the run, which names the case
        result = f"{type(e).__name__}: {e}"
    conn.send(result)
    conn.close()


def _start_ignoring_sigint(proc: Any) -> None:
    """Start ``proc`` with SIGINT ignored: a spawned Python that starts with SIGINT ignored keeps it ignored (it
    installs its KeyboardInterrupt handler only over the default), so Ctrl-C cannot interrupt it even while it
    imports. The ignore lasts the few milliseconds of the spawn here (a Ctrl-C inside them is lost); off the main
    thread, where signal handlers cannot be set, the process starts as it is."""
    import signal
    import threading

    if threading.current_thread() is not threading.main_thread():
        proc.start()
        return
    old = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        proc.start()
    finally:
        signal.signal(signal.SIGINT, old)
