"""The native build function: cache key, cache reuse, compiler errors, concurrent builds.

These compile the small fixture module in tests/native_fixture (a few seconds each, no ns-3 import).
"""

import multiprocessing as mp
import shutil
from pathlib import Path

import pytest

from hetero_ns3.errors import NativeBuildError
from hetero_ns3.network import native_build
from hetero_ns3.network.native_build import ModuleSpec, build_module, cache_key, compiler, find_ns3_wheel

FIXTURE = Path(__file__).resolve().parent.parent / "native_fixture"


def _spec(root: Path) -> ModuleSpec:
    return ModuleSpec(name="fixture", root=root, umbrella_header="fixture-module.h", source_dirs=("model",))


@pytest.fixture
def fixture_copy(tmp_path, monkeypatch) -> Path:
    monkeypatch.setenv("HETERO_NS3_CACHE", str(tmp_path / "cache"))
    root = tmp_path / "src"
    shutil.copytree(FIXTURE, root)
    return root


def test_wheel_is_found_without_importing_ns():
    wheel = find_ns3_wheel()
    assert (wheel.include_dir / "ns3" / "core-module.h").is_file()
    assert wheel.version.startswith("3.")


def test_key_depends_on_sources(fixture_copy):
    spec = _spec(fixture_copy)
    wheel, cxx = find_ns3_wheel(), compiler()
    k1 = cache_key(spec, wheel, cxx)
    assert cache_key(spec, wheel, cxx) == k1
    src = fixture_copy / "model" / "tick-counter.cc"
    src.write_text(src.read_text() + "\n// edit\n")
    assert cache_key(spec, wheel, cxx) != k1


def test_build_then_cache_hit_then_rebuild_on_change(fixture_copy):
    spec = _spec(fixture_copy)
    first = build_module(spec)
    assert not first.cached and first.library.is_file()
    second = build_module(spec)
    assert second.cached and second.library == first.library
    hdr = fixture_copy / "model" / "tick-counter.h"
    hdr.write_text(hdr.read_text() + "\n// header edit\n")
    third = build_module(spec)
    assert not third.cached and third.library != first.library


def test_compiler_error_is_carried(fixture_copy):
    bad = fixture_copy / "model" / "broken.cc"
    bad.write_text("int f() { return undefined_symbol_xyz; }\n")
    with pytest.raises(NativeBuildError) as exc:
        build_module(_spec(fixture_copy))
    assert "compiling broken.cc failed" in str(exc.value)
    assert "undefined_symbol_xyz" in exc.value.compiler_output


def test_missing_compiler(fixture_copy, monkeypatch):
    monkeypatch.setenv("CXX", "no-such-compiler-xyz")
    with pytest.raises(NativeBuildError, match="no-such-compiler-xyz.*not found"):
        build_module(_spec(fixture_copy))


def _build_in_child(root: str, cache: str, q) -> None:
    import os

    os.environ["HETERO_NS3_CACHE"] = cache
    built = native_build.build_module(_spec(Path(root)))
    q.put((str(built.library), built.cached))


def test_two_processes_build_once(fixture_copy, tmp_path):
    ctx = mp.get_context("spawn")
    q = ctx.Queue()
    procs = [
        ctx.Process(target=_build_in_child, args=(str(fixture_copy), str(tmp_path / "cache"), q)) for _ in range(2)
    ]
    for p in procs:
        p.start()
    results = [q.get(timeout=300) for _ in procs]
    for p in procs:
        p.join(timeout=60)
    assert len({lib for lib, _ in results}) == 1
    assert sorted(cached for _, cached in results) == [False, True]  # one compiled, the other waited and reused
    assert Path(results[0][0]).is_file()
