"""Compile shared libraries (C++ ns-3 modules, the C analytic kernel) with a content-keyed cache.

:func:`build_library` compiles a :class:`LibrarySpec` (C or C++ sources) into one shared library and
caches it under a key that hashes everything that can change the binary: sources, headers, language,
flags, compiler version and what the spec adds (the ns-3 version, say).

The ``ns3`` wheel ships headers (``ns3/include``) and shared libraries (``ns3/lib64``) but no build
system for out-of-tree modules. :func:`build_module` compiles a module directory laid out like an
ns-3 module (``model/``, ``helper/``, an umbrella header) through :func:`build_library`, with the same
preprocessor defines as the wheel.

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
#: Language standard of the C++ modules (first of their flags).
CXX_STD = "-std=c++20"
#: Optimisation flags of the C++ modules (after the standard; in the cache key). ``-O3`` and ``-O3 -flto``
#: measured no faster than ``-O2`` on the packet-level benchmark (docs/benchmarks.md, "Packet level at scale").
OPT_FLAGS: tuple[str, ...] = ("-O2",)
#: Environment variable that overrides :data:`OPT_FLAGS` (space-separated, e.g. ``-O2`` to rebuild the
#: library of earlier releases as a baseline, or ``-O3 -flto``); also passed to the linker.
OPT_ENV = "HETERO_NS3_OPT"
#: Compiler flags besides the standard, optimisation, defines and include paths.
CXX_FLAGS: tuple[str, ...] = ("-fPIC", "-g0", "-Wall", "-Wno-unused-variable")
#: Environment variable that overrides the cache directory.
CACHE_ENV = "HETERO_NS3_CACHE"
#: Environment variable that overrides the C++ compiler (default ``g++``).
CXX_ENV = "CXX"
#: Per language: the environment variable that overrides the compiler, the commands tried without it,
#: and the package that provides one.
COMPILERS: dict[str, tuple[str, tuple[str, ...], str]] = {
    "c++": (CXX_ENV, ("g++",), "g++"),
    "c": ("CC", ("cc", "gcc", "clang"), "gcc"),
}

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
class LibrarySpec:
    """One shared library to build from C or C++ sources."""

    name: str
    """Library base name: the output is ``lib<name>.so``."""
    root: Path
    """Directory the sources and headers are named relative to in the cache key."""
    sources: tuple[Path, ...]
    """Translation units, compiled in parallel."""
    headers: tuple[Path, ...] = ()
    """Headers the sources include (hashed into the key)."""
    language: str = "c++"
    """``c`` or ``c++`` (a key of :data:`COMPILERS`)."""
    flags: tuple[str, ...] = ()
    """Compiler flags without paths (part of the key)."""
    include_dirs: tuple[Path, ...] = ()
    """``-I`` directories (absolute paths: not in the key, so it survives moving the checkout)."""
    link_args: tuple[str, ...] = ()
    """Linker arguments after the objects (libraries, ``-L`` and rpath); not in the key."""
    key_text: tuple[str, ...] = ()
    """More text in the key: what the link arguments and the include directories bring that can change
    the binary (a library version, the libraries linked)."""


@dataclass(frozen=True)
class BuiltLibrary:
    """A compiled library in the cache."""

    spec: LibrarySpec
    library: Path
    key: str
    cached: bool
    """True when the library came from the cache without compiling."""
    seconds: float
    """Wall time of this call (hashing, and compiling when not cached)."""
    diagnostics: str = ""
    """The compiler's and linker's messages (warnings) when it compiled; empty when cached."""


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


def compiler(language: str = "c++") -> str:
    """The compiler command of ``language`` (:data:`COMPILERS`: ``$CXX`` or ``g++``; ``$CC``, else ``cc``,
    ``gcc``, ``clang``); raises NativeBuildError when missing."""
    env, defaults, package = COMPILERS[language]
    chosen = os.environ.get(env)
    tried = (chosen,) if chosen else defaults
    for cmd in tried:
        if shutil.which(cmd) is not None:
            return cmd
    names = ", ".join(map(repr, tried))
    raise NativeBuildError(
        f"no {language.upper()} compiler: {names} not found; install {package} "
        f"(Debian/Ubuntu: apt-get install {package}) or set ${env}"
    )


def compiler_version(cxx: str) -> str:
    out = subprocess.run([cxx, "--version"], capture_output=True, text=True, check=False)
    return out.stdout.splitlines()[0] if out.stdout else cxx


def link_flags(spec: ModuleSpec, wheel: Ns3Wheel) -> list[str]:
    flags = [f"-L{wheel.lib_dir}", f"-Wl,-rpath,{wheel.lib_dir}"]
    flags += [f"-l{wheel.library_name(m)}" for m in spec.ns3_modules]
    return flags


def opt_flags() -> tuple[str, ...]:
    """:data:`OPT_FLAGS`, or the words of ``$HETERO_NS3_OPT`` when set and not empty."""
    env = os.environ.get(OPT_ENV, "").split()
    return tuple(env) if env else OPT_FLAGS


def module_library(spec: ModuleSpec, wheel: Ns3Wheel) -> LibrarySpec:
    """The :class:`LibrarySpec` of an ns-3 module built against ``wheel`` (optimised by :func:`opt_flags`)."""
    opt = opt_flags()
    return LibrarySpec(
        name=spec.name,
        root=spec.root,
        sources=tuple(spec.sources()),
        headers=tuple(spec.headers()),
        language="c++",
        flags=(CXX_STD, *opt, *CXX_FLAGS, *(f"-D{d}" for d in WHEEL_DEFINES)),
        include_dirs=(*spec.include_dirs(), wheel.include_dir),
        link_args=(*opt, *link_flags(spec, wheel)),
        key_text=(f"ns-3 {wheel.version}", *spec.ns3_modules),
    )


def library_key(lib: LibrarySpec, cmd: str) -> str:
    """SHA-256 over sources, headers, language, flags, ``key_text`` and the version of compiler ``cmd``."""
    h = hashlib.sha256()
    for path in [*lib.sources, *lib.headers]:
        h.update(str(path.relative_to(lib.root)).encode())
        h.update(b"\0")
        h.update(path.read_bytes())
        h.update(b"\0")
    # No absolute paths, so the key survives moving the checkout or the venv.
    for part in (lib.language, " ".join(lib.flags), " ".join(lib.key_text), compiler_version(cmd)):
        h.update(part.encode())
        h.update(b"\0")
    return h.hexdigest()


def cache_key(spec: ModuleSpec, wheel: Ns3Wheel, cxx: str) -> str:
    """:func:`library_key` of an ns-3 module: sources, headers, flags, compiler version and ns-3 version."""
    return library_key(module_library(spec, wheel), cxx)


def library_path(spec: ModuleSpec | LibrarySpec, key: str) -> Path:
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


def _run(cmd: Sequence[str], what: str) -> str:
    """Run a compiler command; returns its messages (warnings), raises NativeBuildError on failure."""
    proc = subprocess.run(list(cmd), capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        raise NativeBuildError(f"{what} failed (exit {proc.returncode})", (proc.stderr or proc.stdout).strip())
    return proc.stderr.strip()


def build_library(lib: LibrarySpec, force: bool = False, jobs: int | None = None) -> BuiltLibrary:
    """Compile ``lib`` into the cache unless an up-to-date library is there; return where it is.

    ``force`` rebuilds even when cached. ``jobs`` is the number of parallel compiler processes
    (default: CPU count). Raises NativeBuildError (with the compiler's output) on failure.
    """
    t0 = time.perf_counter()
    cmd = compiler(lib.language)
    if not lib.sources:
        raise NativeBuildError(f"library {lib.name!r} has no sources under {lib.root}")
    key = library_key(lib, cmd)
    target = library_path(lib, key)
    if target.exists() and not force:
        return BuiltLibrary(lib, target, key, True, time.perf_counter() - t0)
    with _locked(target.parent.with_suffix(".lock")):
        if target.exists() and not force:  # another process built it while we waited
            return BuiltLibrary(lib, target, key, True, time.perf_counter() - t0)
        target.parent.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryDirectory(dir=target.parent, prefix=".build-") as tmp:
            cflags = [*lib.flags, *(f"-I{d}" for d in lib.include_dirs)]
            objects = [Path(tmp) / f"{i:03d}-{src.stem}.o" for i, src in enumerate(lib.sources)]

            def compile_one(pair: tuple[Path, Path]) -> str:
                src, obj = pair
                return _run([cmd, *cflags, "-c", str(src), "-o", str(obj)], f"compiling {src.name}")

            with ThreadPoolExecutor(max_workers=jobs or os.cpu_count() or 1) as pool:
                messages = list(pool.map(compile_one, zip(lib.sources, objects, strict=True)))
            tmp_lib = Path(tmp) / target.name
            link = [cmd, "-shared", *map(str, objects), "-o", str(tmp_lib), *lib.link_args]
            messages.append(_run(link, f"linking {target.name}"))
            os.replace(tmp_lib, target)
    diagnostics = "\n".join(m for m in messages if m)
    return BuiltLibrary(lib, target, key, False, time.perf_counter() - t0, diagnostics)


def preload_ns3_libraries(spec: ModuleSpec = ROCE_MODULE) -> list[Path]:
    """``dlopen`` (``RTLD_GLOBAL``) the ns-3 libraries ``spec`` links, from this environment's wheel.

    The cache key holds no absolute paths, so a cached module may have been linked from another
    virtualenv (its RUNPATH names that venv's ``ns3/lib64``). Once this environment's copies of those
    sonames are loaded, the dynamic loader uses them whatever the RUNPATH says, so a module cached by a
    venv that has since been deleted still loads. Returns the libraries loaded."""
    import ctypes

    wheel = find_ns3_wheel()
    loaded = []
    for module in spec.ns3_modules:
        path = wheel.lib_dir / f"lib{wheel.library_name(module)}.so"
        if path.is_file():
            ctypes.CDLL(str(path), mode=os.RTLD_NOW | os.RTLD_GLOBAL)
            loaded.append(path)
    return loaded


def build_module(spec: ModuleSpec = ROCE_MODULE, force: bool = False, jobs: int | None = None) -> BuiltModule:
    """Compile the ns-3 module ``spec`` (:func:`build_library`) against the installed wheel; return where it is.

    ``force`` rebuilds even when cached. ``jobs`` is the number of parallel compiler processes
    (default: CPU count). Raises NativeBuildError (with the compiler's output) on failure.
    """
    t0 = time.perf_counter()
    wheel = find_ns3_wheel()
    if not spec.sources():
        raise NativeBuildError(f"module {spec.name!r} has no .cc sources under {spec.root}")
    built = build_library(module_library(spec, wheel), force=force, jobs=jobs)
    return BuiltModule(spec, built.library, built.key, built.cached, time.perf_counter() - t0)
