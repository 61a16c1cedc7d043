"""The C kernel's build and binding: warnings-clean under -Wall -Wextra, the cache key, the struct layout."""

import ctypes
import dataclasses
import re
import shutil
import tomllib
from pathlib import Path

import pytest

import hetero_ns3.network.analytic.native as native
from hetero_ns3.errors import NativeBuildError
from hetero_ns3.network import native_build

pytestmark = pytest.mark.skipif(native.load_kernel() is None, reason="no C compiler for the analytic kernel")
ROOT = Path(__file__).resolve().parents[2]


def test_binding_layout_matches_the_header():
    lib = native.load_kernel(required=True)
    size, fields = native.replay_layout(lib)
    assert [name for name, _, _ in fields] == [name for name, _ in native.ReplayArgs._fields_]
    assert len(fields) == 32 and size == ctypes.sizeof(native.ReplayArgs)
    assert (size, fields) == native.binding_layout()


def test_a_layout_mismatch_is_refused(monkeypatch):
    wrong = [(n, ctypes.c_int if n == "saf" else t) for n, t in native.ReplayArgs._fields_][:-1]  # stats missing
    monkeypatch.setattr(native, "ReplayArgs", type("Wrong", (ctypes.Structure,), {"_fields_": wrong}))
    with pytest.raises(NativeBuildError, match="does not match FlowsimReplay"):
        native._check_layout(native.load_kernel(required=True))


def test_kernel_compiles_without_warnings(tmp_path, monkeypatch):
    monkeypatch.setenv("HETERO_NS3_CACHE", str(tmp_path))
    spec = native.kernel_spec()
    assert {"-Wall", "-Wextra"} <= set(spec.flags)
    built = native.build_kernel()
    assert not built.cached and built.library.is_file()
    assert built.diagnostics == ""
    assert native.build_kernel().cached


def test_kernel_key_covers_sources_flags_and_compiler_version(tmp_path, monkeypatch):
    src = tmp_path / "kernel"
    shutil.copytree(native.KERNEL_DIR, src)
    spec = dataclasses.replace(native.kernel_spec(), root=src, sources=tuple(sorted(src.glob("*.c"))),
                               headers=tuple(sorted(src.glob("*.h"))))  # fmt: skip
    cc = native_build.compiler("c")
    key = native_build.library_key(spec, cc)
    assert key == native_build.library_key(native.kernel_spec(), cc)  # paths are relative to the root
    (src / "heaps.h").write_text((src / "heaps.h").read_text() + "\n/* edit */\n")
    edited = native_build.library_key(spec, cc)
    assert edited != key
    assert native_build.library_key(dataclasses.replace(spec, flags=(*spec.flags, "-g")), cc) != edited
    monkeypatch.setattr(native_build, "compiler_version", lambda _: "cc (other) 99.1")
    assert native_build.library_key(spec, cc) != edited


def test_missing_c_compiler(monkeypatch):
    monkeypatch.setenv("CC", "no-such-cc-xyz")
    with pytest.raises(NativeBuildError, match="no C compiler: 'no-such-cc-xyz' not found"):
        native_build.compiler("c")


def test_kernel_sources_are_package_data():
    data = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["package-data"]["hetero_ns3"]
    pkg = ROOT / "hetero_ns3"
    shipped = {p for pattern in data for p in pkg.glob(pattern)}
    kernel = set(native.KERNEL_DIR.glob("*.[ch]"))
    assert len(kernel) >= 4 and kernel <= shipped


def _ctype(param: str) -> type:
    """The ctypes type native.py declares for a C parameter of flowsim.h."""
    if "FlowsimReplay" in param:
        return ctypes.POINTER(native.ReplayArgs)
    if "*" in param:
        return ctypes.c_void_p
    return {"i64": ctypes.c_longlong, "u64": ctypes.c_ulonglong, "int": ctypes.c_int, "double": ctypes.c_double}[
        param.split()[0]
    ]


def test_declared_signatures_match_the_header_prototypes():
    lib = native.load_kernel(required=True)
    header = (native.KERNEL_DIR / "flowsim.h").read_text()
    protos = re.findall(r"^(int|void|i64|const char \*)\s*(flowsim_\w+)\(([^)]*)\);", header, re.M)
    assert len(protos) == 9
    returns = {"int": ctypes.c_int, "void": None, "i64": ctypes.c_longlong, "const char *": ctypes.c_char_p}
    for ret, name, params in protos:
        fn = getattr(lib, name)
        expected = [_ctype(p.strip()) for p in params.split(",") if p.strip() not in ("", "void")]
        assert fn.restype is returns[ret], name
        assert list(fn.argtypes) == expected, name
