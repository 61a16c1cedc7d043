"""``hetero-ns3 report``: a self-contained HTML page of a run, study or validation directory."""

from __future__ import annotations

import argparse

NAME = "report"
HELP = (
    "render a self-contained HTML report of a run directory, a study directory (hetero-ns3 sweep) or a validation "
    "directory (hetero-ns3 validate --out)"
)


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "dir", help="a run directory (summary.json), a study directory (study.parquet) or a validation directory"
    )
    p.add_argument(
        "--out",
        default=None,
        help="HTML file to write (default: DIR/report.html; DIR/validation.html for a validation directory)",
    )
    p.add_argument("--top", type=int, default=15, help="slowest flows listed in a run report (default 15)")


def run(args: argparse.Namespace) -> int:
    from hetero_ns3.errors import field_error
    from hetero_ns3.outputs import check_out_file
    from hetero_ns3.studies.report import render_report

    if args.top < 0:
        raise field_error("--top", args.top, "must be >= 0", "e.g. --top 15 (the slowest flows listed)")
    if args.out is not None:
        check_out_file(args.out, "--out", None)
    path = render_report(args.dir, args.out, args.top)
    print(f"report: {path}")
    return 0
