"""Entry point of ``hetero-ns3``: parse, dispatch to a command module, map errors to exit codes.

Exit status: 0 success, 1 a run that completed but reports failure, 2 a user-caused error
(bad input, failed build), printed as one line without a traceback unless ``--debug``.
"""

from __future__ import annotations

import argparse
import importlib
import logging
import os
import pkgutil
import sys
import traceback
from types import ModuleType

import hetero_ns3.cli.commands as _commands_pkg
from hetero_ns3 import __version__
from hetero_ns3.errors import HeteroNs3Error, NativeBuildError
from hetero_ns3.signals import exit_status, interrupt_reason, stop_on_signals


def _command_modules() -> list[ModuleType]:
    mods = []
    for info in sorted(pkgutil.iter_modules(_commands_pkg.__path__), key=lambda i: i.name):
        if info.name.startswith("_"):
            continue
        mods.append(importlib.import_module(f"{_commands_pkg.__name__}.{info.name}"))
    return mods


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="hetero-ns3",
        description="Packet-level simulation of LLM training on heterogeneous GPU clusters (ns-3).",
    )
    parser.add_argument("--version", action="version", version=f"hetero-ns3 {__version__}")
    parser.add_argument("--debug", action="store_true", help="show tracebacks and debug logging")
    parser.add_argument("-q", "--quiet", action="store_true", help="only warnings and errors on stderr")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    sub.required = True
    for mod in _command_modules():
        p = sub.add_parser(mod.NAME, help=mod.HELP, description=mod.HELP)
        mod.add_arguments(p)
        p.set_defaults(_run=mod.run)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)  # argparse itself exits 2 on bad flags
    level = logging.DEBUG if args.debug else (logging.WARNING if args.quiet else logging.INFO)
    logging.basicConfig(level=level, format="%(levelname)s %(name)s: %(message)s", stream=sys.stderr)
    try:
        with stop_on_signals():
            return int(args._run(args) or 0)
    except HeteroNs3Error as err:
        if args.debug:
            traceback.print_exc()
        msg = str(err) if isinstance(err, NativeBuildError) else " ".join(str(err).split())  # one line
        print(f"hetero-ns3 {args.command}: error: {type(err).__name__}: {msg}", file=sys.stderr)
        return 2
    except MemoryError:
        if args.debug:
            traceback.print_exc()
        print(
            f"hetero-ns3 {args.command}: error: MemoryError: ran out of memory; make the run smaller (fewer "
            "microbatches or iterations, a coarser plan, --backend analytic)",
            file=sys.stderr,
        )
        return 2
    except KeyboardInterrupt as err:  # Ctrl-C or SIGTERM (hetero_ns3.signals)
        print(f"hetero-ns3 {args.command}: {interrupt_reason(err)}", file=sys.stderr)
        return exit_status(err)
    except BrokenPipeError:  # the reader of stdout went away (``| head``): stop quietly, as a shell tool does
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())  # no second error when Python flushes at exit
        return 128 + 13  # SIGPIPE's conventional status


def entry() -> None:
    """Console-script entry point."""
    sys.exit(main())


if __name__ == "__main__":
    entry()
