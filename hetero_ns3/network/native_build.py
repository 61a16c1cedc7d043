"""Compile C++ ns-3 modules against the installed ``ns3`` wheel, with a content-keyed cache.

The wheel ships headers (``ns3/include``) and shared libraries (``ns3/lib64``) but no build
system for out-of-tree modules. :func:`build_module` compiles a module directory laid out like an
ns-3 module (``model/``, ``helper/``, an umbrella header) into one shared library with the same
preprocessor defines as the wheel, and caches it under a key that hashes everything that can change
the binary: sources, headers, flags, compiler version and ns-3 version.

Concurrency: builds happen in a private temporary directory; the finished library is published
with an atomic ``os.replace``; an ``fcntl`` lock on the cache entry makes a second process wait
for the first instead of compiling twice.

This module never imports ns-3 (it only locates the wheel on disk), so ``hetero-ns3 build`` and
``doctor`` stay fast.
"""

from __future__ import annotations

import fcntl
import hashlib
import importlib.util
import os
import shutil
import subprocess
import tempfile
import time
from collections.abc import Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from hetero_ns3.errors import NativeBuildError

#: Preprocessor defines the ``ns3`` wheel was built with (release profile, asserts and logs on).
WHEEL_DEFINES: tuple[str, ...] = ("NS3_BUILD_PROFILE_RELEASE", "NS3_ASSERT_ENABLE", "NS3_LOG_ENABLE")
#: Compiler flags besides defines and include paths.
CXX_FLAGS: tuple[str, ...] = ("-std=c++20", "-O2", "-fPIC", "-g0", "-Wall", "-Wno-unused-variable")
#: Environment variable that overrides the cache directory.
CACHE_ENV = "HETERO_NS3_CACHE"
#: Environment variable that overrides the C++ compiler (default ``g++``).
CXX_ENV = "CXX"

NATIVE_DIR = Path(__file__).resolve().parent / "ns3" / "native"


@dataclass(frozen=True)
class Ns3Wheel:
    """Where the installed ``ns3`` wheel keeps its headers and libraries."""

    prefix: Path
    include_dir: Path
    lib_dir: Path
    version: str
    """ns-3 release of the libraries, e.g. ``3.44`` (from ``libns3.<version>-core.so``)."""

    def library_name(self, module: str) -> str:
        """Linker name of an ns-3 module library, e.g. ``ns3.44-core``."""
        return f"ns{self.version}-{module}"


@dataclass(frozen=True)
class ModuleSpec:
    """One C++ module to build: a directory in ns-3 layout."""

    name: str
    """Library base name: the output is ``lib<name>.so``."""
    root: Path
    """Module directory holding ``model/``, ``helper/`` and the umbrella header."""
    umbrella_header: str
    """Header (relative to ``root``) that includes every public header; cppyy includes it."""
    ns3_modules: tuple[str, ...] = ("core", "network")
    """ns-3 libraries to link against (``core``, ``network``, ``point-to-point``...)."""
    source_dirs: tuple[str, ...] = ("model", "helper")
    """Subdirectories (relative to ``root``) whose ``*.cc`` files are compiled."""

    def sources(self) -> list[Path]:
        out: list[Path] = []
        for sub in self.source_dirs:
            out.extend(sorted((self.root / sub).glob("*.cc")))
        return out

    def headers(self) -> list[Path]:
        return sorted(p for p in self.root.rglob("*.h"))

    def include_dirs(self) -> list[Path]:
        return [self.root, *(self.root / s for s in self.source_dirs)]


@dataclass(frozen=True)
class BuiltModule:
    """A compiled module in the cache."""

    spec: ModuleSpec
    library: Path
    key: str
    cached: bool
    """True when the library came from the cache without compiling."""
    seconds: float
    """Wall time of this call (hashing, and compiling when not cached)."""


#: The hetero_ns3 RoCE module (PFC, ECN, DCQCN, HPCC, DAG replay) shipped with the package.
ROCE_MODULE = ModuleSpec(
    name="hetero-ns3-native",
    root=NATIVE_DIR,
    umbrella_header="hetero-ns3-module.h",
    ns3_modules=("core", "network"),
)


def find_ns3_wheel() -> Ns3Wheel:
    """Locate the installed ``ns3`` wheel without importing ns-3."""
    spec = importlib.util.find_spec("ns3")
    if spec is None or not spec.submodule_search_locations:
        raise NativeBuildError("the 'ns3' package is not installed; run: pip install ns3==3.44.post0")
    # ``ns3`` is a namespace package: other directories named ns3 on sys.path (a test folder, say)
    # merge into it, so pick the location that actually holds the wheel's files.
    locations = [Path(p) for p in spec.submodule_search_locations]
    for prefix in locations:
        include_dir = prefix / "include"
        lib_dir = next((prefix / d for d in ("lib64", "lib") if (prefix / d).is_dir()), prefix / "lib64")
        cores = sorted(lib_dir.glob("libns*-core.so"))
        if include_dir.is_dir() and cores:
            break
    else:
        where = ", ".join(map(str, locations))
        raise NativeBuildError(
            f"no ns3 wheel with include/ and lib64/libns*-core.so in {where}; reinstall ns3==3.44.post0"
        )
    version = cores[0].name[len("libns") : -len("-core.so")]
    return Ns3Wheel(prefix, include_dir, lib_dir, version)


def cache_dir() -> Path:
    """Cache directory: ``$HETERO_NS3_CACHE``, else ``$XDG_CACHE_HOME/hetero_ns3``, else ``~/.cache/hetero_ns3``."""
    env = os.environ.get(CACHE_ENV)
    if env:
        return Path(env).expanduser()
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "hetero_ns3"


def compiler() -> str:
    """The C++ compiler command (``$CXX`` or ``g++``); raises NativeBuildError when missing."""
    cxx = os.environ.get(CXX_ENV, "g++")
    if shutil.which(cxx) is None:
        raise NativeBuildError(
            f"C++ compiler {cxx!r} not found; install g++ (Debian/Ubuntu: apt-get install g++) or set ${CXX_ENV}"
        )
    return cxx


def compiler_version(cxx: str) -> str:
    out = subprocess.run([cxx, "--version"], capture_output=True, text=True, check=False)
    return out.stdout.splitlines()[0] if out.stdout else cxx


def compile_flags(spec: ModuleSpec, wheel: Ns3Wheel) -> list[str]:
    flags = [*CXX_FLAGS, *(f"-D{d}" for d in WHEEL_DEFINES)]
    flags += [f"-I{d}" for d in spec.include_dirs()]
    flags.append(f"-I{wheel.include_dir}")
    return flags


def link_flags(spec: ModuleSpec, wheel: Ns3Wheel) -> list[str]:
    flags = ["-shared", f"-L{wheel.lib_dir}", f"-Wl,-rpath,{wheel.lib_dir}"]
    flags += [f"-l{wheel.library_name(m)}" for m in spec.ns3_modules]
    return flags


def cache_key(spec: ModuleSpec, wheel: Ns3Wheel, cxx: str) -> str:
    """SHA-256 over sources, headers, flags, compiler version and ns-3 version."""
    h = hashlib.sha256()
    for path in [*spec.sources(), *spec.headers()]:
        h.update(str(path.relative_to(spec.root)).encode())
        h.update(b"\0")
        h.update(path.read_bytes())
        h.update(b"\0")
    # Flags without absolute paths, so the key survives moving the checkout or the venv.
    h.update(" ".join([*CXX_FLAGS, *WHEEL_DEFINES, *spec.ns3_modules]).encode())
    h.update(compiler_version(cxx).encode())
    h.update(wheel.version.encode())
    return h.hexdigest()


def library_path(spec: ModuleSpec, key: str) -> Path:
    return cache_dir() / f"{spec.name}-{key[:16]}" / f"lib{spec.name}.so"


@contextmanager
def _locked(path: Path) -> Iterator[None]:
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


def _run(cmd: Sequence[str], what: str) -> None:
    proc = subprocess.run(list(cmd), capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        raise NativeBuildError(f"{what} failed (exit {proc.returncode})", (proc.stderr or proc.stdout).strip())


def build_module(spec: ModuleSpec = ROCE_MODULE, force: bool = False, jobs: int | None = None) -> BuiltModule:
    """Compile ``spec`` into the cache unless an up-to-date library is there; return where it is.

    ``force`` rebuilds even when cached. ``jobs`` is the number of parallel compiler processes
    (default: CPU count). Raises NativeBuildError (with the compiler's output) on failure.
    """
    t0 = time.perf_counter()
    wheel = find_ns3_wheel()
    cxx = compiler()
    sources = spec.sources()
    if not sources:
        raise NativeBuildError(f"module {spec.name!r} has no .cc sources under {spec.root}")
    key = cache_key(spec, wheel, cxx)
    target = library_path(spec, key)
    if target.exists() and not force:
        return BuiltModule(spec, target, key, True, time.perf_counter() - t0)
    with _locked(target.parent.with_suffix(".lock")):
        if target.exists() and not force:  # another process built it while we waited
            return BuiltModule(spec, target, key, True, time.perf_counter() - t0)
        target.parent.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryDirectory(dir=target.parent, prefix=".build-") as tmp:
            cflags = compile_flags(spec, wheel)
            objects = [Path(tmp) / f"{i:03d}-{src.stem}.o" for i, src in enumerate(sources)]

            def compile_one(pair: tuple[Path, Path]) -> None:
                src, obj = pair
                _run([cxx, *cflags, "-c", str(src), "-o", str(obj)], f"compiling {src.name}")

            with ThreadPoolExecutor(max_workers=jobs or os.cpu_count() or 1) as pool:
                list(pool.map(compile_one, zip(sources, objects, strict=True)))
            tmp_lib = Path(tmp) / target.name
            _run([cxx, *map(str, objects), "-o", str(tmp_lib), *link_flags(spec, wheel)], f"linking {target.name}")
            os.replace(tmp_lib, target)
    return BuiltModule(spec, target, key, False, time.perf_counter() - t0)
