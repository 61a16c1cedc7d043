"""``hetero-ns3 build``: compile (or verify the cache of) the native ns-3 module."""

from __future__ import annotations

import argparse

from hetero_ns3.network.native_build import ROCE_MODULE, build_module

NAME = "build"
HELP = "compile the native ns-3 module against the installed ns3 wheel (cached by source hash)"


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--force", action="store_true", help="rebuild even when the cache is up to date")
    p.add_argument("--jobs", type=int, default=None, help="parallel compiler processes (default: CPU count)")
    p.add_argument("--load", action="store_true", help="also import ns-3 and load the module (about 15 s more)")


def run(args: argparse.Namespace) -> int:
    built = build_module(ROCE_MODULE, force=args.force, jobs=args.jobs)
    state = "cached" if built.cached else "compiled"
    print(f"{ROCE_MODULE.name}: {state} in {built.seconds:.2f} s")
    print(f"library: {built.library}")
    print(f"key: {built.key[:16]}")
    if args.load:
        from hetero_ns3.network.ns3 import ns3env

        ns3env.load_module(ROCE_MODULE)
        print(f"loaded into ns-3 (import took {ns3env.ns_import_seconds():.1f} s)")
    return 0
