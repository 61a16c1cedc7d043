"""Fuzzing (hypothesis, issue 17): generated and mutated inputs and CLI arguments never end in a traceback.

Every example runs the CLI in-process (``tests.cli_harness.run_cli``) or the library reader a command
uses, and asserts: exit status 0 or 2 (a ScenarioError/PlanningError as one line), no traceback, and a
wall-time bound on these small inputs. Deterministic: ``derandomize=True`` and no example database, so
CI sees the same examples every run; the ns-3 backend is never reached (``run`` is always given
``--backend analytic``; ``flows`` CSVs are fuzzed through the reader and validator ``flows`` calls before
it imports ns-3).
"""

from __future__ import annotations

import json
import math
import tomllib
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from hetero_ns3.errors import HeteroNs3Error
from tests.cli_harness import assert_clean, run_cli

REPO = Path(__file__).resolve().parents[2]
SCENARIOS = [REPO / "scenarios" / "plan_example.toml", REPO / "scenarios" / "demo.toml"]
TOPOLOGIES = sorted((REPO / "topologies").glob("*.toml"))
TUNING = REPO / "collectives" / "tuning.toml"
FLOWS = REPO / "scenarios" / "flows_example.csv"
#: Wall-time bound of one example (small inputs; the slowest legal case is a plan of a few seconds).
BOUND_S = 20.0

FUZZ = settings(
    derandomize=True,
    database=None,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture, HealthCheck.data_too_large],
    print_blob=False,
)

EXTREME_INTS = [0, -1, 1, 2, 3, 7, 2**31, 2**53 + 1, 2**63 - 1, -(2**63), 10**12]
EXTREME_FLOATS = [0.0, -0.0, 1e-300, 1e300, -1.5, 0.5, math.inf, -math.inf, math.nan]
WEIRD_STRINGS = ["", " ", "4", "true", "1e9", "400Gbps", "-1us", "h0", "\u00e9\u4e2d", "x" * 300, "a.b", "[1]"]

scalars = st.one_of(
    st.sampled_from(EXTREME_INTS),
    st.integers(-(2**64), 2**64),
    st.sampled_from(EXTREME_FLOATS),
    st.floats(allow_nan=True, allow_infinity=True),
    st.booleans(),
    st.sampled_from(WEIRD_STRINGS),
    st.text(max_size=12),
)
values = st.recursive(
    scalars,
    lambda inner: st.one_of(st.lists(inner, max_size=4), st.dictionaries(st.text(max_size=6), inner, max_size=3)),
    max_leaves=6,
)


# ---------------------------------------------------------------------------------------------------- TOML out
def _key(k: str) -> str:
    return k if k and all(c.isalnum() or c in "-_" for c in k) else json.dumps(k)


def _val(v: Any) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, int):
        return str(v)
    if isinstance(v, float):
        return "nan" if math.isnan(v) else ("inf" if v > 0 else "-inf") if math.isinf(v) else repr(v)
    if isinstance(v, str):
        return json.dumps(v)
    if isinstance(v, list):
        return "[" + ", ".join(_val(x) for x in v) + "]"
    if isinstance(v, dict):
        return "{" + ", ".join(f"{_key(k)} = {_val(x)}" for k, x in v.items()) + "}"
    raise TypeError(type(v))


def to_toml(doc: dict[str, Any]) -> str:
    """A small TOML writer (top-level scalars, tables, arrays of tables, everything deeper inline)."""
    lines = [f"{_key(k)} = {_val(v)}" for k, v in doc.items() if not isinstance(v, dict) and not _aot(v)]
    for k, v in doc.items():
        if isinstance(v, dict):
            lines.append(f"[{_key(k)}]")
            lines += [f"{_key(kk)} = {_val(vv)}" for kk, vv in v.items()]
        elif _aot(v):
            for item in v:
                lines.append(f"[[{_key(k)}]]")
                lines += [f"{_key(kk)} = {_val(vv)}" for kk, vv in item.items()]
    return "\n".join(lines) + "\n"


def _aot(v: Any) -> bool:
    return isinstance(v, list) and bool(v) and all(isinstance(x, dict) for x in v)


def _paths(doc: Any, prefix: tuple = ()) -> list[tuple]:
    out = []
    if isinstance(doc, dict):
        for k, v in doc.items():
            out.append((*prefix, k))
            out += _paths(v, (*prefix, k))
    elif isinstance(doc, list):
        for i, v in enumerate(doc):
            out.append((*prefix, i))
            out += _paths(v, (*prefix, i))
    return out


@st.composite
def mutated_doc(draw, base: dict[str, Any]) -> dict[str, Any]:
    """``base`` with 1-3 edits: a key deleted, a value replaced (type swap, extreme number), a key added."""
    doc = json.loads(json.dumps(base))
    for _ in range(draw(st.integers(1, 3))):
        paths = _paths(doc)
        if not paths:
            break
        path = draw(st.sampled_from(paths))
        node = doc
        for p in path[:-1]:
            node = node[p]
        last = path[-1]
        action = draw(st.sampled_from(["delete", "replace", "replace", "add"]))
        if action == "delete" and isinstance(node, dict):
            del node[last]
        elif action == "add" and isinstance(node, dict):
            node[draw(st.sampled_from(["tpp", "rail", "uplink", "nics", "x", "count", "Kind"]))] = draw(values)
        else:
            node[last] = draw(values)
    return doc


def _json_safe(doc: Any) -> Any:
    return json.loads(json.dumps(doc, default=str))


def _write(tmp: Path, name: str, data: bytes | str) -> Path:
    p = tmp / name
    p.write_bytes(data if isinstance(data, bytes) else data.encode("utf-8", "surrogatepass"))
    return p


@st.composite
def byte_flipped(draw, raw: bytes) -> bytes:
    b = bytearray(raw)
    for _ in range(draw(st.integers(1, 6))):
        kind = draw(st.sampled_from(["flip", "delete", "insert", "truncate"]))
        i = draw(st.integers(0, max(len(b) - 1, 0)))
        if kind == "flip" and b:
            b[i] = draw(st.integers(0, 255))
        elif kind == "delete" and b:
            del b[i]
        elif kind == "insert":
            b[i:i] = draw(st.sampled_from([b"\x00", b"\xff", b"=", b"[", b'"', b"\n", b"]]", b"#"]))
        else:
            del b[i:]
    return bytes(b)


SCEN_DOCS = [tomllib.loads(p.read_text()) for p in SCENARIOS]
TOPO_DOCS = [tomllib.loads(p.read_text()) for p in TOPOLOGIES]
COUNTS: dict[str, int] = {}


def _count(name: str) -> None:
    COUNTS[name] = COUNTS.get(name, 0) + 1


def _scenario_argv(path: Path, tmp: Path) -> list[str]:
    return ["plan", str(path), "--out", str(tmp / "plan-out")]


# ---------------------------------------------------------------------------------------------------- tests
@settings(FUZZ, max_examples=70)
@given(data=st.data())
def test_mutated_scenarios(tmp_path_factory, data) -> None:
    tmp = tmp_path_factory.mktemp("s")
    base = data.draw(st.sampled_from(SCEN_DOCS))
    doc = data.draw(mutated_doc(_json_safe(base)))
    path = _write(tmp, "s.toml", to_toml(doc))
    argv = _scenario_argv(path, tmp)
    res = run_cli(argv)
    assert_clean(res, argv)
    assert res.wall_s < BOUND_S, (argv, res.wall_s)
    _count("scenario mutated")


@settings(FUZZ, max_examples=40)
@given(data=st.data())
def test_byte_flipped_scenarios(tmp_path_factory, data) -> None:
    tmp = tmp_path_factory.mktemp("b")
    raw = data.draw(byte_flipped(data.draw(st.sampled_from(SCENARIOS)).read_bytes()))
    path = _write(tmp, "s.toml", raw)
    argv = ["plan", str(path)]
    res = run_cli(argv)
    assert_clean(res, argv)
    assert res.wall_s < BOUND_S
    _count("scenario bytes")


@settings(FUZZ, max_examples=40)
@given(doc=st.dictionaries(st.sampled_from(["model", "parallelism", "cluster", "run", "compute", "x"]), values))
def test_generated_scenarios(tmp_path_factory, doc) -> None:
    tmp = tmp_path_factory.mktemp("g")
    path = _write(tmp, "g.toml", to_toml(doc))
    argv = ["plan", str(path)]
    res = run_cli(argv)
    assert_clean(res, argv)
    _count("scenario generated")


@settings(FUZZ, max_examples=60)
@given(data=st.data())
def test_mutated_topologies(tmp_path_factory, data) -> None:
    tmp = tmp_path_factory.mktemp("t")
    if data.draw(st.booleans()):
        doc = data.draw(mutated_doc(_json_safe(data.draw(st.sampled_from(TOPO_DOCS)))))
        text: bytes | str = to_toml(doc)
    else:
        text = data.draw(byte_flipped(data.draw(st.sampled_from(TOPOLOGIES)).read_bytes()))
    path = _write(tmp, "t.toml", text)
    argv = ["topo", "show", str(path), "--json"]
    res = run_cli(argv)
    assert_clean(res, argv)
    assert res.wall_s < BOUND_S
    _count("topology")


@settings(FUZZ, max_examples=25)
@given(data=st.data())
def test_mutated_tuning(tmp_path_factory, data) -> None:
    tmp = tmp_path_factory.mktemp("u")
    if data.draw(st.booleans()):
        text: bytes | str = to_toml(data.draw(mutated_doc(_json_safe(tomllib.loads(TUNING.read_text())))))
    else:
        text = data.draw(byte_flipped(TUNING.read_bytes()))
    path = _write(tmp, "tuning.toml", text)
    argv = ["collective", "all_reduce", "-t", "star:4", "--tuning", str(path), "-s", "1MiB", "-b", "model"]
    res = run_cli(argv)
    assert_clean(res, argv)
    _count("tuning")


@settings(FUZZ, max_examples=60)
@given(data=st.data())
def test_flows_csv(tmp_path_factory, data) -> None:
    """The reader and validator ``hetero-ns3 flows`` runs before ns-3: ScenarioError or valid arrays."""
    from hetero_ns3.network.flows_io import flow_arrays, read_flows_csv
    from hetero_ns3.topology.simple import star

    tmp = tmp_path_factory.mktemp("f")
    if data.draw(st.booleans()):
        raw = data.draw(byte_flipped(FLOWS.read_bytes()))
    else:
        cell = st.one_of(st.sampled_from(["h0", "h1", "h9", "", "-1", "1e400", "nan", "inf", "0", "1KiB"]), scalars)
        rows = data.draw(st.lists(st.lists(cell, min_size=3, max_size=6), max_size=5))
        header = data.draw(st.sampled_from(["src,dst,size_bytes,start_s", "src,dst,size_bytes,start_s,priority"]))
        raw = (header + "\n" + "\n".join(",".join(str(c) for c in r) for r in rows) + "\n").encode("utf-8", "replace")
    path = _write(tmp, "f.csv", raw)
    try:
        arrays = flow_arrays(star(4), read_flows_csv(path), source=path.name)
    except HeteroNs3Error as err:
        assert "\n" not in str(err)
    else:
        assert (arrays.size_bytes >= 0).all()
    _count("flows csv")


#: ``--force`` is left out on purpose: with it a huge batch is really compiled, as asked.
FLAG_VALUES = {
    "plan": [
        ["--set", "parallelism.tp=2"],
        ["--set", "parallelism.tp=0"],
        ["--set", "x"],
        ["--set", "a.b=c"],
        ["--set", "parallelism.global_batch=99999999999"],
        ["--set", "run.iterations=-1"],
        ["--json"],
        ["--per-rank"],
        ["--out", "/dev/null"],
        ["--out", ""],
        ["--set", "model.name=nope"],
    ],
    "collective": [
        ["-t", "star:4"],
        ["-t", "star:0"],
        ["-t", "star:-3"],
        ["-t", "leafspine:2,2,2"],
        ["-t", "h0"],
        ["-t", "leafspine:1"],
        ["-t", "nope"],
        ["-t", ""],
        ["-s", "1MiB"],
        ["-s", "0"],
        ["-s", "1GiB:1KiB"],
        ["-s", "1TiB"],
        ["-s", "-5"],
        ["--gpus", "1"],
        ["--gpus", "0"],
        ["--gpus", "3"],
        ["--ranks", ""],
        ["--ranks", "h0,h1"],
        ["--ranks", "h0,zz"],
        ["--algo", "ring"],
        ["--algo", "bogus"],
        ["--protocol", "LL"],
        ["--channels", "0"],
        ["--channels", "1000000"],
        ["--root", "-1"],
        ["--root", "99"],
        ["--peer", "h3"],
        ["--peer", "h0"],
        ["-b", "model"],
        ["-b", "closed-form"],
        ["-b", "analytic"],
        ["--cc", "hpcc"],
        ["--dtype", "half"],
        ["--link-rate", "0bps"],
        ["--link-rate", "1Tbps"],
        ["--link-delay", "-1us"],
        ["--seed", "0"],
        ["--json"],
    ],
    "topo": [
        ["--json"],
        ["--pair", "h0", "h1"],
        ["--pair", "n0.g0", "n1.g0"],
        ["--plot", "/dev/null"],
        ["--plot", "x.jpg"],
    ],
}
OPS = ["all_reduce", "all_gather", "reduce_scatter", "broadcast", "reduce", "all_to_all", "send_recv", "nope", ""]
TOPOS = ["star:4", "star:1", "leafspine:2,2,2", "h0", "h100-2node", "star:x", "leafspine:0,0,0", "nope", ""]


@st.composite
def cli_args(draw) -> list[str]:
    cmd = draw(st.sampled_from(["plan", "collective", "topo", "run", "bogus"]))
    flags = [
        x for group in draw(st.lists(st.sampled_from(FLAG_VALUES.get(cmd, [["--json"]])), max_size=4)) for x in group
    ]
    if cmd == "collective":
        argv = ["collective", draw(st.sampled_from(OPS)), "-t", draw(st.sampled_from(TOPOS)), "-s", "64KiB", *flags]
        if "-b" not in flags:
            argv += ["-b", "model"]
        return argv
    if cmd == "topo":
        return ["topo", draw(st.sampled_from(["show", "list", "nope"])), draw(st.sampled_from(TOPOS)), *flags]
    if cmd == "run":  # always the flow-level backend, and a run that is refused or fails fast
        over = draw(
            st.sampled_from(
                [
                    "run.iterations=0",
                    "run.iterations=10000000000",
                    "run.seed=0",
                    "parallelism.tp=3",
                    "run.backend=nope",
                    "cluster.topology=nope",
                ]
            )
        )
        return ["run", str(SCENARIOS[1]), "--backend", "analytic", "--set", over, "--out", "run-out"]
    if cmd == "plan":
        return ["plan", str(draw(st.sampled_from(SCENARIOS))), *flags]
    return [cmd, *flags]


@settings(FUZZ, max_examples=80)
@given(argv=cli_args())
def test_cli_arguments(tmp_path_factory, argv, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path_factory.mktemp("cwd"))
    res = run_cli(argv)
    assert_clean(res, argv)
    assert res.wall_s < BOUND_S, (argv, res.wall_s)
    _count("cli args")


@pytest.fixture(scope="module", autouse=True)
def _report_counts():
    yield
    print(f"\nfuzz examples run: {dict(sorted(COUNTS.items()))}, total {sum(COUNTS.values())}")
