"""Run the CLI in-process (no subprocess: ~1 s of imports each) and capture what it printed."""

from __future__ import annotations

import contextlib
import io
import time
from dataclasses import dataclass

from hetero_ns3.cli.main import main


@dataclass(frozen=True)
class CliResult:
    rc: int
    out: str
    err: str
    wall_s: float


def run_cli(argv: list[str]) -> CliResult:
    """``hetero-ns3 argv...`` in this process; argparse's SystemExit becomes the exit status."""
    out, err = io.StringIO(), io.StringIO()
    t0 = time.perf_counter()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            rc = main(argv)
        except SystemExit as exc:
            rc = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 2)
    return CliResult(int(rc), out.getvalue(), err.getvalue(), time.perf_counter() - t0)


def assert_clean(res: CliResult, argv: list[str], *, allowed: tuple[int, ...] = (0, 2)) -> None:
    """Exit 0 or 2; on 2, the error is one line (argparse's usage lines aside); never a traceback."""
    assert "Traceback" not in res.err and "Traceback" not in res.out, (argv, res.err[-2000:])
    assert res.rc in allowed, (argv, res.rc, res.err[-2000:])
    if res.rc == 2:
        errors = [ln for ln in res.err.splitlines() if "error:" in ln]
        assert len(errors) == 1, (argv, res.err[-2000:])
