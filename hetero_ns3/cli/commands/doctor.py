"""``hetero-ns3 doctor``: report versions and paths, and check that the native module loads."""

from __future__ import annotations

import argparse
import importlib.metadata
import platform
import shutil
import sys
import time

from hetero_ns3 import __version__
from hetero_ns3.errors import NativeBuildError
from hetero_ns3.network import native_build

NAME = "doctor"
HELP = "report Python / ns3 / cppyy / compiler versions, wheel and cache paths, and whether the module loads"


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--no-load", action="store_true", help="skip importing ns-3 and loading the module")


def _version(dist: str) -> str:
    try:
        return importlib.metadata.version(dist)
    except importlib.metadata.PackageNotFoundError:
        return "not installed"


def run(args: argparse.Namespace) -> int:
    rows: list[tuple[str, str]] = [
        ("hetero_ns3", __version__),
        ("python", f"{platform.python_version()} ({sys.executable})"),
        ("ns3 wheel", _version("ns3")),
        ("cppyy", _version("cppyy")),
    ]
    ok = True
    try:
        cxx = native_build.compiler()
        rows.append(("compiler", f"{native_build.compiler_version(cxx)} ({shutil.which(cxx)})"))
    except NativeBuildError as err:
        rows.append(("compiler", f"MISSING: {err}"))
        ok = False
    try:
        wheel = native_build.find_ns3_wheel()
        rows += [
            ("ns-3 release", wheel.version),
            ("ns-3 include", str(wheel.include_dir)),
            ("ns-3 libs", str(wheel.lib_dir)),
        ]
    except NativeBuildError as err:
        rows.append(("ns3 wheel", f"MISSING: {err}"))
        ok = False
    rows.append(("cache", f"{native_build.cache_dir()} (set ${native_build.CACHE_ENV} to move it)"))
    if ok and not args.no_load:
        from hetero_ns3.network.ns3 import capi, ns3env

        t0 = time.perf_counter()
        try:
            capi.load_library()
            rows.append(
                ("C ABI (run path)", f"loads OK (ctypes, ABI {capi.ABI_VERSION}, {time.perf_counter() - t0:.2f} s)")
            )
        except NativeBuildError as err:
            rows.append(("C ABI (run path)", f"FAILED: {str(err).splitlines()[0]}"))
            ok = False

        t0 = time.perf_counter()
        try:
            built = ns3env.load_module(native_build.ROCE_MODULE)
            rows.append(("native module", f"loads OK ({built.library}, {'cached' if built.cached else 'compiled'})"))
            rows.append(("ns-3 import", f"{ns3env.ns_import_seconds():.1f} s; total {time.perf_counter() - t0:.1f} s"))
        except NativeBuildError as err:
            rows.append(("native module", f"FAILED: {str(err).splitlines()[0]}"))
            ok = False
    width = max(len(k) for k, _ in rows)
    for key, value in rows:
        print(f"{key:<{width}}  {value}")
    print("status".ljust(width) + ("  OK" if ok else "  PROBLEMS (see above)"))
    if not ok:
        raise NativeBuildError("doctor found problems; fix the lines marked MISSING or FAILED above")
    return 0
