"""``hetero-ns3 validate``: run the validation suite (simulated vs published) and report the errors.

With ``--out DIR`` it writes ``validation.csv`` / ``.json`` after every case and ``validation.html`` (the
scorecard, figures and case table: :mod:`hetero_ns3.studies.validation_report`) after the last; it prints the
scorecard (:mod:`hetero_ns3.results.scorecard`). Exit status 0 only if every counted case is within its
tolerance; cases marked ``pending`` in the suite are reported but not counted (and run only with ``--pending``).
Cases and sources: ``hetero_ns3/data/validation/suite.toml``, docs/validation.md.
"""

from __future__ import annotations

import argparse
import csv
import difflib
import fnmatch
import io
import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from hetero_ns3.validation import Case, Outcome

NAME = "validate"
HELP = (
    "run the validation suite (Megatron SC'21 rows, nccl-tests curves, NIC ceilings) and compare with published values"
)


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--quick", action="store_true", help="only the quick cases (analytic backend, about a minute)")
    p.add_argument(
        "--out",
        metavar="DIR",
        help="write validation.csv and validation.json here (after every case) and validation.html",
    )
    p.add_argument("--suite", help="suite TOML (default: the one shipped in hetero_ns3/data/validation)")
    p.add_argument("--pending", action="store_true", help="also run cases marked pending (reported, not counted)")
    p.add_argument(
        "--heldout", action="store_true", help="only the held-out cases (public measurements no constant was fitted to)"
    )
    p.add_argument(
        "--case", action="append", default=[], metavar="NAME",
        help="run only these cases: names or shell-style patterns, e.g. 'heldout.mbridge.gpt-oss-*' (repeatable)",
    )  # fmt: skip
    p.add_argument(
        "--list", action="store_true",
        help="print the selected cases (name, kind, metric, published value, tolerance, flags) and run nothing",
    )  # fmt: skip
    p.add_argument(
        "--set", action="append", default=[], metavar="KEY=VALUE", dest="overrides",
        help="override a scenario field in every training case, after the case's own overrides (a what-if over the "
        "suite; repeatable), e.g. --set compute.launch_overhead=5us",
    )  # fmt: skip
    p.add_argument(
        "--workers", type=int, default=1, metavar="N",
        help="cases run at once, each in its own process (default 1); memory peaks at up to N times one case's",
    )  # fmt: skip
    p.add_argument(
        "--baseline", metavar="PATH",
        help="validation.json of an earlier run (or its directory): print the cases whose value changed and both "
        "scorecards over the cases the two runs share",
    )  # fmt: skip


def select_cases(cases: tuple[Case, ...], patterns: list[str]) -> tuple[Case, ...]:
    """The cases, in the suite's order, whose name equals one of ``patterns`` or matches it as a shell-style pattern
    (``*``, ``?``, ``[...]``); a pattern that selects nothing is refused, naming it."""
    from hetero_ns3.errors import field_error

    names = [c.name for c in cases]
    chosen: set[str] = set()
    for pat in patterns:
        hits = fnmatch.filter(names, pat) if any(ch in pat for ch in "*?[") else [n for n in names if n == pat]
        if not hits:
            near = difflib.get_close_matches(pat, names, n=3, cutoff=0.6)
            hint = f"did you mean {near}?" if near else "`hetero-ns3 validate --list` prints them"
            raise field_error("--case", pat, "matches no case of the suite", f"give a case name or a pattern ({hint})")
        chosen.update(hits)
    return tuple(c for c in cases if c.name in chosen)


def _listing(cases: tuple[Case, ...]) -> str:
    """What ``--list`` prints: one line per case, then the count."""
    lines = [f"{'case':<52} {'kind':<10} {'metric':<12} {'published':>11} {'tol%':>5}  flags"]
    for c in cases:
        flags = ",".join(
            f
            for f, on in (
                ("quick", c.quick),
                ("heldout", c.heldout),
                ("pending", c.pending),
                ("extrapolated", c.extrapolate_batches),
            )
            if on
        )
        lines.append(
            f"{c.name:<52} {c.kind:<10} {c.metric:<12} {c.published:>11.4g} {100 * c.tolerance:>5.0f}  {flags}"
        )
    lines.append(f"{len(cases)} case(s)")
    return "\n".join(lines)


def _row(o) -> str:
    c = o.case
    if o.failure:
        return f"{c.name:<38} {c.metric:<12} {c.published:>11.4g} {'-':>11} {'-':>8} {100 * c.tolerance:>5.0f}  FAILED: {o.failure}"
    flag = "yes" if o.within else ("pending" if c.pending else "NO")
    if c.extrapolate_batches:
        flag += f" (extrapolated from global_batch {c.extrapolate_batches[0]} and {c.extrapolate_batches[1]})"
    return f"{c.name:<38} {c.metric:<12} {c.published:>11.4g} {o.simulated:>11.4g} {o.error_pct:>+8.2f} {100 * c.tolerance:>5.0f}  {flag}"


def _against_baseline(records: list[dict], baseline: list[dict], path: str) -> str:
    """What ``--baseline`` prints: the changed cases, then both scorecards over the cases the runs share."""
    from hetero_ns3.results.scorecard import baseline_comparison, format_changes, format_scorecard

    cmp = baseline_comparison(records, baseline)
    lines = [f"against the baseline {path}: {cmp.common} counted cases in common, {len(cmp.changes)} changed"]
    if cmp.changes:
        lines.append(format_changes(cmp.changes))
    if cmp.common:
        lines += ["", "baseline, same cases:", format_scorecard(cmp.before)]
        lines += ["this run, same cases:", format_scorecard(cmp.now)]
    return "\n".join(lines)


def _write_tables(out: Path, outcomes: list, skipped: list) -> None:
    """validation.json and validation.csv of the cases run so far (and the pending ones not run), each written
    atomically: rewritten after every case, so a stopped or failing run keeps what it finished."""
    from hetero_ns3.results import atomic
    from hetero_ns3.validation import unrun_record

    records = [o.record() for o in outcomes] + [unrun_record(c) for c in skipped]
    atomic.write_text(out / "validation.json", json.dumps(records, indent=1))
    buf = io.StringIO(newline="")
    w = csv.DictWriter(buf, fieldnames=list(records[0]) if records else ["case"])
    w.writeheader()
    w.writerows(records)
    atomic.write_text(out / "validation.csv", buf.getvalue())


def run(args: argparse.Namespace) -> int:
    from hetero_ns3.validation import check_overrides, load_suite, run_cases

    if args.workers < 1:
        from hetero_ns3.errors import field_error

        raise field_error("--workers", args.workers, "must be >= 1", "e.g. --workers 2 (cases run at once)")
    if args.out:
        from hetero_ns3.outputs import check_out_dir

        check_out_dir(args.out)  # before the cases run (a full suite takes minutes)
    base, cases = load_suite(args.suite)
    if args.case:
        cases = select_cases(cases, args.case)
    if args.quick:
        cases = tuple(c for c in cases if c.quick)
    if args.heldout:
        cases = tuple(c for c in cases if c.heldout)
    if args.list:
        print(_listing(cases))
        return 0
    skipped = [c for c in cases if c.pending and not args.pending]
    cases = tuple(c for c in cases if args.pending or not c.pending)
    check_overrides(cases, base, args.overrides)  # a bad --set fails once, before any case runs
    baseline = None
    if args.baseline:
        from hetero_ns3.studies.validation_report import read_records

        baseline = read_records(Path(args.baseline), "--baseline")
    out = Path(args.out) if args.out else None
    if out is not None:
        from hetero_ns3.results import atomic

        out.mkdir(parents=True, exist_ok=True)
        if baseline is not None:  # the page compares with it (studies/validation_report.py)
            atomic.write_text(out / "baseline.json", json.dumps(baseline, indent=1))
    print(f"{'case':<38} {'metric':<12} {'published':>11} {'simulated':>11} {'error%':>8} {'tol%':>5}  within")
    done: dict[int, Outcome] = {}
    for i, o in run_cases(cases, base, args.overrides, args.workers):
        done[i] = o
        print(_row(o), flush=True)
        if out is not None:  # in the suite's order, whatever order the workers finish in
            _write_tables(out, [done[k] for k in sorted(done)], skipped)
    outcomes = [done[k] for k in sorted(done)]
    for c in skipped:
        print(
            f"{c.name:<38} {c.metric:<12} {c.published:>11.4g} {'-':>11} {'-':>8} {100 * c.tolerance:>5.0f}  pending (not run)"
        )
    counted = [o for o in outcomes if not o.case.pending]
    bad = [o for o in counted if not o.within]
    failed = [o for o in outcomes if o.failure]
    print(f"{len(counted) - len(bad)}/{len(counted)} counted cases within tolerance; {len(skipped)} pending not run")
    if counted:
        from hetero_ns3.results.scorecard import format_scorecard, scorecard

        print("\n" + format_scorecard(scorecard([o.record() for o in counted])))
    if baseline is not None:
        print("\n" + _against_baseline([o.record() for o in outcomes], baseline, args.baseline))
    if out is not None:
        from hetero_ns3.studies.validation_report import render_validation

        _write_tables(out, outcomes, skipped)
        page = render_validation(out)
        print(f"wrote {out / 'validation.csv'}, {out / 'validation.json'} and {page}", file=sys.stderr)
    if failed:
        names = ", ".join(o.case.name for o in failed)
        print(f"hetero-ns3 validate: error: {len(failed)} case(s) could not be simulated: {names}", file=sys.stderr)
        return 2
    return 0 if not bad else 1
