"""Scorecard of a validation run: how many cases land within tolerance and how large the errors are, per group.

Input: the records ``hetero-ns3 validate`` writes (``validation.json``: one dict per case with ``case``,
``metric``, ``error_pct``, ``within_tolerance``, ``pending``, ``heldout``, ``failure`` and, in tables written
since 2026-12-05, ``kind`` and ``gpu_types``). Pure functions; the CLI prints :func:`format_scorecard`, the HTML validation
report (:mod:`hetero_ns3.studies.validation_report`) shows the same rows.

Definitions (docs/validation.md, "Scorecard and page"): a group counts its cases that are not ``pending``; a case that
could not be simulated counts as a case not within tolerance and has no error. MAPE is the mean of
``|error_pct|`` over the counted cases that ran, the worst case the largest ``|error_pct|``. The optimism is the
mean signed error oriented by the metric (:func:`optimism_pct`): positive when the simulator is optimistic, i.e.
gives a shorter time (step, collective, kernel, incast makespan) or a higher rate (bandwidth, MFU, fairness)
than measured, so that step-time and MFU cases of the same group add up with one meaning.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

#: Display name of each case kind (``Case.kind``).
KIND_LABELS = {"scenario": "training", "collective": "collective", "layer": "kernel", "incast": "congestion"}
SETS = ("calibration", "held-out")

_SCENARIO_METRICS = frozenset({"step_time_s", "mfu_pct", "compute_only_s"})
_INCAST_METRICS = frozenset({"makespan_over_ideal", "jain_index"})
#: Metrics whose higher value means a faster (or better) system; the others are times (lower is faster).
HIGHER_IS_BETTER = frozenset({"busbw_GBps", "algbw_GBps", "mfu_pct", "jain_index"})


@dataclass(frozen=True)
class GroupScore:
    """One row of the scorecard.

    Attributes:
        group: ``all``, a set (``calibration`` / ``held-out``), ``<set> / <kind>``, or the GPU types of
            :func:`by_gpu`.
        cases: counted cases (not pending), including those that could not be simulated.
        within: cases within their tolerance.
        failed: cases that could not be simulated.
        mape_pct: mean absolute error over the cases that ran (percent); NaN when none ran.
        median_abs_pct: median absolute error (percent); NaN when none ran.
        optimism_pct: mean of :func:`optimism_pct` (percent; positive: the simulator is optimistic); NaN when
            none ran.
        worst_case: name of the case with the largest absolute error ("" when none ran).
        worst_error_pct: its signed error (percent); NaN when none ran.
    """

    group: str
    cases: int
    within: int
    failed: int
    mape_pct: float
    median_abs_pct: float
    optimism_pct: float
    worst_case: str
    worst_error_pct: float


def case_kind(record: Mapping[str, Any]) -> str:
    """The case kind of a record (``scenario``, ``collective``, ``layer``, ``incast``); records written before the
    ``kind`` column are classified by their metric (and ``.layer.`` in the name)."""
    kind = record.get("kind")
    if kind:
        return str(kind)
    metric = str(record.get("metric", ""))
    if metric in _SCENARIO_METRICS:
        return "scenario"
    if metric in _INCAST_METRICS:
        return "incast"
    return "layer" if ".layer." in str(record.get("case", "")) else "collective"


def kind_label(record: Mapping[str, Any]) -> str:
    """The display name of the record's kind (``training`` for a scenario case; :data:`KIND_LABELS`)."""
    kind = case_kind(record)
    return KIND_LABELS.get(kind, kind)


def optimism_pct(record: Mapping[str, Any]) -> float:
    """The record's error oriented so that positive means the simulator is optimistic: ``error_pct`` for a rate
    (:data:`HIGHER_IS_BETTER`), ``-error_pct`` for a time. NaN for a case that did not run."""
    e = _error(record)
    if e is None:
        return math.nan
    return e if record.get("metric") in HIGHER_IS_BETTER else -e


def case_set(record: Mapping[str, Any]) -> str:
    return "held-out" if record.get("heldout") else "calibration"


def _error(record: Mapping[str, Any]) -> float | None:
    e = record.get("error_pct")
    if e is None or record.get("failure"):
        return None
    e = float(e)
    return None if math.isnan(e) else e


def score(group: str, records: Iterable[Mapping[str, Any]]) -> GroupScore:
    """The :class:`GroupScore` of ``records`` (pending ones are left out)."""
    counted = [r for r in records if not r.get("pending")]
    errors = [(str(r["case"]), e) for r in counted if (e := _error(r)) is not None]
    within = sum(1 for r in counted if r.get("within_tolerance") and _error(r) is not None)
    nan = math.nan
    if not errors:
        return GroupScore(group, len(counted), within, len(counted), nan, nan, nan, "", nan)
    absolute = [abs(e) for _, e in errors]
    worst_case, worst = max(errors, key=lambda ce: abs(ce[1]))
    return GroupScore(
        group=group,
        cases=len(counted),
        within=within,
        failed=len(counted) - len(errors),
        mape_pct=statistics.fmean(absolute),
        median_abs_pct=statistics.median(absolute),
        optimism_pct=statistics.fmean(optimism_pct(r) for r in counted if _error(r) is not None),
        worst_case=worst_case,
        worst_error_pct=worst,
    )


def _grouped(
    records: Sequence[Mapping[str, Any]], key: Callable[[Mapping[str, Any]], str], prefix: str = ""
) -> list[GroupScore]:
    keys = sorted({key(r) for r in records})
    return [score(prefix + k, [r for r in records if key(r) == k]) for k in keys]


def scorecard(records: Sequence[Mapping[str, Any]]) -> list[GroupScore]:
    """Rows ``all``, then per set (calibration, held-out) the set and its kinds (training, collective, ...);
    groups without a counted case are left out."""
    counted = [r for r in records if not r.get("pending")]
    rows = [score("all", counted)]
    for s in SETS:
        members = [r for r in counted if case_set(r) == s]
        if not members:
            continue
        rows.append(score(s, members))
        rows += _grouped(members, kind_label, prefix=f"{s} / ")
    return rows


def by_gpu(records: Sequence[Mapping[str, Any]], held_out_only: bool = True) -> list[GroupScore]:
    """Rows per GPU type (``gpu_types`` of the record: the sorted types of the GPUs the case simulates, joined by
    ``+``; "-" for the incast, which has none), over the held-out cases by default."""
    counted = [r for r in records if not r.get("pending") and (not held_out_only or r.get("heldout"))]
    return _grouped(counted, lambda r: str(r.get("gpu_types") or "-"))


def fmt(value: Any, spec: str, missing: str = "-") -> str:
    """``value`` formatted with ``spec`` (``".1f"``, ``"+.2f"``); ``missing`` for None or NaN (a case that did not
    run, a group without a run case)."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return missing
    return format(float(value), spec)


def format_scorecard(rows: Sequence[GroupScore]) -> str:
    """Fixed-width text table of ``rows`` (what ``hetero-ns3 validate`` prints after the cases)."""
    width = max([len("group"), *(len(r.group) for r in rows)])
    lines = [f"{'group':<{width}} {'cases':>5} {'within':>6} {'MAPE%':>6} {'median%':>7} {'optim%':>6}  worst case"]
    for r in rows:
        worst = f"{r.worst_case} ({r.worst_error_pct:+.1f}%)" if r.worst_case else "-"
        failed = f" [{r.failed} failed]" if r.failed else ""
        lines.append(
            f"{r.group:<{width}} {r.cases:>5} {r.within:>6} {fmt(r.mape_pct, '.1f'):>6} {fmt(r.median_abs_pct, '.1f'):>7} "
            f"{fmt(r.optimism_pct, '+.1f'):>6}  {worst}{failed}"
        )
    return "\n".join(lines)


@dataclass(frozen=True)
class Change:
    """A case whose simulated value differs between a baseline run and this one (``validate --baseline``).

    Attributes:
        case: the case name.
        before, after: simulated values (None: the case could not be simulated in that run).
        error_before_pct, error_after_pct: errors against the published value (None as above).
        within_before, within_after: within tolerance in each run.
    """

    case: str
    before: float | None
    after: float | None
    error_before_pct: float | None
    error_after_pct: float | None
    within_before: bool
    within_after: bool


def _value(record: Mapping[str, Any]) -> float | None:
    v = record.get("simulated")
    return None if v is None or record.get("failure") else float(v)


def compare(
    records: Sequence[Mapping[str, Any]], baseline: Sequence[Mapping[str, Any]], rel_tol: float = 1e-9
) -> list[Change]:
    """The cases counted in both runs (pending ones left out) whose simulated value differs by more than ``rel_tol``
    (relative), or that could be simulated in one of the two runs only; in the order of ``records``."""
    old = {str(r["case"]): r for r in baseline if not r.get("pending")}
    out = []
    for r in records:
        b = old.get(str(r["case"]))
        if b is None or r.get("pending"):
            continue
        after, before = _value(r), _value(b)
        if after is not None and before is not None and abs(after - before) <= rel_tol * max(abs(before), 1e-300):
            continue
        out.append(
            Change(str(r["case"]), before, after, _error(b), _error(r),
                   bool(b.get("within_tolerance")), bool(r.get("within_tolerance")))
        )  # fmt: skip
    return out


def within_change(c: Change) -> str:
    """``yes -> no`` and the like: within tolerance before and after."""
    return f"{'yes' if c.within_before else 'no'} -> {'yes' if c.within_after else 'no'}"


@dataclass(frozen=True)
class BaselineComparison:
    """A run against a baseline run (``validate --baseline``): the changed cases, the number of counted cases the two
    share and the scorecards of each run over those shared cases."""

    changes: list[Change]
    common: int
    before: list[GroupScore]
    now: list[GroupScore]


def baseline_comparison(
    records: Sequence[Mapping[str, Any]], baseline: Sequence[Mapping[str, Any]]
) -> BaselineComparison:
    now, before = common_cases(records, baseline)
    return BaselineComparison(compare(records, baseline), len(now), scorecard(before), scorecard(now))


def common_cases(
    records: Sequence[Mapping[str, Any]], baseline: Sequence[Mapping[str, Any]]
) -> tuple[list[Mapping[str, Any]], list[Mapping[str, Any]]]:
    """The records of each run restricted to the cases both counted (for scorecards on the same set)."""
    names = {str(r["case"]) for r in records if not r.get("pending")}
    names &= {str(r["case"]) for r in baseline if not r.get("pending")}
    return [r for r in records if r["case"] in names], [r for r in baseline if r["case"] in names]


def format_changes(changes: Sequence[Change]) -> str:
    """Fixed-width table of ``changes``."""
    width = max([len("case"), *(len(c.case) for c in changes)])
    lines = [f"{'case':<{width}} {'before':>11} {'after':>11} {'err before%':>11} {'err after%':>10}  within"]
    for c in changes:
        lines.append(
            f"{c.case:<{width}} {fmt(c.before, '.5g'):>11} {fmt(c.after, '.5g'):>11} "
            f"{fmt(c.error_before_pct, '+.2f'):>11} {fmt(c.error_after_pct, '+.2f'):>10}  {within_change(c)}"
        )
    return "\n".join(lines)
