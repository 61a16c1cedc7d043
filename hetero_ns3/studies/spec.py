"""Study files: a base scenario plus axes, expanded into points (one scenario each).

A study file (``scenarios/studies/<name>/study.toml``, reference in ``docs/studies.md``)::

    [study]
    name = "cc-ecn"                 # default: the directory name
    base = "../../demo.toml"        # or an inline [base] table holding the scenario's sections
    kind = "training"               # "training" (hetero-ns3 run) or "collective" (one collective call)
    mode = "grid"                   # "grid": every combination of [axes]; "zip": [axes] vary together
    seeds = [1, 2]                  # optional: each point repeated with run.seed = s
    backend = "analytic"            # optional: run.backend of every point

    [axes]                          # dotted scenario key -> list of values
    "network.cc.kind" = ["dcqcn", "hpcc"]

    [[zip]]                         # optional: axes that vary together (one grid dimension)
    "cluster.topology" = ["a.toml", "b.toml"]
    "parallelism.tp" = [4, 8]

    [[exclude]]                     # optional: drop points matching every key (a value or a list)
    "network.cc.kind" = "hpcc"

    [[rules]]                       # optional: extra settings for the points matching `when`
    when = { "network.cc.kind" = "hpcc" }
    set = { "run.backend" = "ns3" }

Everything is validated before anything runs: an axis key the scenario does not know fails with
the study field (``axes."model.layerz"``) and the scenario loader's message.
"""

from __future__ import annotations

import copy
import hashlib
import itertools
import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from hetero_ns3.errors import ScenarioError, field_error
from hetero_ns3.inputs import read_toml
from hetero_ns3.scenario.overrides import set_path

KINDS = ("training", "collective")
MODES = ("grid", "zip")
STUDY_KEYS = ("name", "description", "base", "kind", "mode", "seeds", "backend")
TOP_KEYS = ("study", "base", "axes", "zip", "exclude", "rules")


@dataclass(frozen=True)
class Axis:
    """One swept scenario key (dotted, e.g. ``network.cc.kind``) and its values."""

    key: str
    values: tuple[Any, ...]
    where: str
    """The study field it came from (``axes."network.cc.kind"``), for error messages."""


@dataclass(frozen=True)
class Rule:
    """Extra dotted settings applied to the points whose coordinates match ``when``."""

    when: tuple[tuple[str, tuple[Any, ...]], ...]
    set: tuple[tuple[str, Any], ...]


@dataclass(frozen=True)
class Study:
    """A loaded study file (see the module docstring)."""

    name: str
    description: str
    source: str
    base_dir: Path
    base: Mapping[str, Any]
    kind: str
    mode: str
    dims: tuple[tuple[Axis, ...], ...]
    """Grid dimensions; the axes of one dimension vary together (a zip group, or all axes in zip mode)."""
    seeds: tuple[int, ...]
    backend: str | None
    excludes: tuple[tuple[tuple[str, tuple[Any, ...]], ...], ...]
    rules: tuple[Rule, ...]

    @property
    def axes(self) -> tuple[Axis, ...]:
        return tuple(a for d in self.dims for a in d)

    @property
    def axis_keys(self) -> tuple[str, ...]:
        """Keys of the study table's coordinate columns (``run.seed`` last when seeds are given)."""
        keys = tuple(a.key for a in self.axes)
        return (*keys, "run.seed") if self.seeds and "run.seed" not in keys else keys


@dataclass(frozen=True)
class Point:
    """One point of a study: its coordinates and the full scenario table it runs."""

    index: int
    coords: tuple[tuple[str, Any], ...]
    settings: tuple[tuple[str, Any], ...]
    """Every dotted setting applied to the base (coordinates, seed, backend, rules), in order."""
    raw: Mapping[str, Any]
    point_id: str

    def label(self) -> str:
        return ", ".join(f"{k}={v}" for k, v in self.coords)


def _canonical(obj: Any) -> str:
    return json.dumps(obj, sort_keys=True, separators=(",", ":"), default=str)


def point_id_of(kind: str, resolved: Mapping[str, Any]) -> str:
    """Short stable hash (12 hex) of a resolved scenario: the same point is the same run directory."""
    doc = {k: v for k, v in resolved.items() if k not in ("source", "overrides")}
    return hashlib.sha256(_canonical({"kind": kind, "scenario": doc}).encode()).hexdigest()[:12]


def set_dotted(raw: dict[str, Any], key: str, value: Any, where: str) -> None:
    """Set ``a.b.c = value`` in a nested table (tables created as needed; ``jobs[1].x`` indexes an array)."""
    parts = key.split(".")
    if len(parts) < 2 or any(not p.strip() for p in parts):
        raise field_error(where, key, "is not a dotted scenario key with a section", 'write e.g. "parallelism.tp"')
    why = set_path(raw, parts, copy.deepcopy(value))
    if why is not None:
        raise field_error(where, key, f"cannot be set: {why}")


def _as_tuple(value: Any) -> tuple[Any, ...]:
    return tuple(value) if isinstance(value, list) else (value,)


def _axes_table(table: Any, where: str) -> tuple[Axis, ...]:
    if not isinstance(table, Mapping):
        raise field_error(where, table, "must be a table of dotted key = [values]")
    out = []
    for key, values in table.items():
        w = f'{where}."{key}"'
        if not isinstance(values, list) or not values:
            raise field_error(w, values, "must be a non-empty list of values", f'write "{key}" = [a, b]')
        out.append(Axis(str(key), tuple(values), w))
    return tuple(out)


def _zip_dim(axes: tuple[Axis, ...], where: str) -> tuple[Axis, ...]:
    lengths = {len(a.values) for a in axes}
    if len(lengths) > 1:
        raise ScenarioError(
            f"{where}: zipped axes must have equal lengths; got " + ", ".join(f"{a.key}: {len(a.values)}" for a in axes)
        )
    return axes


def _match_table(table: Any, where: str, known: Sequence[str]) -> tuple[tuple[str, tuple[Any, ...]], ...]:
    if not isinstance(table, Mapping) or not table:
        raise field_error(where, table, "must be a non-empty table of axis key = value (or [values])")
    for key in table:
        if key not in known:
            raise field_error(f'{where}."{key}"', table[key], "is not an axis of the study", f"axes: {list(known)}")
    return tuple((str(k), _as_tuple(v)) for k, v in table.items())


def _load_base(study: Mapping[str, Any], doc: Mapping[str, Any], base_dir: Path) -> tuple[dict[str, Any], Path]:
    ref, inline = study.get("base"), doc.get("base")
    if (ref is None) == (inline is None):
        raise ScenarioError(
            'study.base: give exactly one base scenario, a path (study.base = "../../demo.toml") or an inline '
            "[base] table"
        )
    if inline is not None:
        if not isinstance(inline, Mapping):
            raise field_error("base", inline, "must be a table of scenario sections")
        return copy.deepcopy(dict(inline)), base_dir
    from hetero_ns3.paths import resolve_preset

    path = Path(str(ref))
    path = (base_dir / path) if not path.is_absolute() and (base_dir / path).is_file() else path
    if not path.is_file():
        path = resolve_preset(str(ref), "scenarios")
    try:
        return read_toml(path, "scenario file"), path.parent.resolve()
    except ScenarioError as err:
        raise field_error("study.base", str(ref), f"cannot be read ({err})", "give a scenario TOML file") from None


def study_from_dict(doc: Mapping[str, Any], source: str = "<dict>", base_dir: Path | None = None) -> Study:
    """Build and validate a :class:`Study` from a parsed study file (see :func:`load_study_file`)."""
    base_dir = (base_dir or Path.cwd()).resolve()
    for key in doc:
        if key not in TOP_KEYS:
            raise field_error(str(key), doc[key], "is not a study table", f"valid tables: {list(TOP_KEYS)}")
    study = doc.get("study", {})
    if not isinstance(study, Mapping):
        raise field_error("study", study, "must be a table")
    for key in study:
        if key not in STUDY_KEYS:
            raise field_error(f"study.{key}", study[key], "is not a known key", f"valid keys: {list(STUDY_KEYS)}")
    kind = str(study.get("kind", "training"))
    mode = str(study.get("mode", "grid"))
    if kind not in KINDS:
        raise field_error("study.kind", kind, "is not a point kind", f"use one of {list(KINDS)}")
    if mode not in MODES:
        raise field_error("study.mode", mode, "is not a combination mode", f"use one of {list(MODES)}")
    seeds_raw = study.get("seeds", [])
    if not isinstance(seeds_raw, list) or not all(isinstance(s, int) and not isinstance(s, bool) for s in seeds_raw):
        raise field_error("study.seeds", seeds_raw, "must be a list of integers", "e.g. seeds = [1, 2, 3]")
    if len(set(seeds_raw)) != len(seeds_raw):
        raise field_error("study.seeds", seeds_raw, "repeats a seed")
    backend = study.get("backend")
    base, scen_dir = _load_base(study, doc, base_dir)

    axes = _axes_table(doc.get("axes", {}), "axes")
    dims: list[tuple[Axis, ...]] = []
    if mode == "zip" and axes:
        dims.append(_zip_dim(axes, "axes (study.mode = zip)"))
    else:
        dims.extend((a,) for a in axes)
    zips = doc.get("zip", [])
    if not isinstance(zips, list):
        raise field_error("zip", zips, "must be an array of tables ([[zip]])")
    for i, z in enumerate(zips):
        dims.append(_zip_dim(_axes_table(z, f"zip[{i}]"), f"zip[{i}]"))
    all_axes = [a for d in dims for a in d]
    seen: set[str] = set()
    for a in all_axes:
        if a.key in seen:
            raise field_error(a.where, a.key, "is swept twice", "keep each key in one axis or zip group")
        seen.add(a.key)
    if seeds_raw and "run.seed" in seen:
        raise ScenarioError("study.seeds and an axis on run.seed both set the seed; keep one")
    known = [a.key for a in all_axes] + (["run.seed"] if seeds_raw else [])
    excludes = tuple(_match_table(t, f"exclude[{i}]", known) for i, t in enumerate(doc.get("exclude", [])))
    rules = []
    for i, r in enumerate(doc.get("rules", [])):
        if not isinstance(r, Mapping) or set(r) - {"when", "set"} or "set" not in r:
            raise field_error(f"rules[{i}]", r, "must be a table with `when` (optional) and `set`")
        when = _match_table(r["when"], f"rules[{i}].when", known) if "when" in r else ()
        sets = r["set"]
        if not isinstance(sets, Mapping) or not sets:
            raise field_error(f"rules[{i}].set", sets, "must be a non-empty table of dotted key = value")
        rules.append(Rule(when, tuple((str(k), v) for k, v in sets.items())))
    folder = Path(source).resolve().parent.name if source != "<dict>" else ""  # resolved: 'sweep .' names the folder
    name = str(study.get("name") or folder or "study")
    out = Study(
        name=name,
        description=str(study.get("description", "")),
        source=source,
        base_dir=scen_dir,
        base=base,
        kind=kind,
        mode=mode,
        dims=tuple(dims),
        seeds=tuple(seeds_raw),
        backend=None if backend is None else str(backend),
        excludes=excludes,
        rules=tuple(rules),
    )
    _check_axis_keys(out)
    return out


def load_study_file(path: str | Path) -> Study:
    """Read and validate a study file (a ``study.toml`` or a directory holding one)."""
    p = Path(path).expanduser()
    if p.is_dir():
        if not (p / "study.toml").is_file():
            raise ScenarioError(
                f"study directory {str(path)!r} has no study.toml; give a study file or a directory holding "
                "study.toml (e.g. scenarios/studies/h-levels)"
            )
        p = p / "study.toml"
    if not p.exists():
        raise ScenarioError(f"study file {str(path)!r} does not exist; give a study.toml or its directory")
    doc = read_toml(p, "study file")  # UTF-8, size and TOML syntax errors as one line (hetero_ns3/inputs.py)
    return study_from_dict(doc, source=str(p), base_dir=p.parent)


def _loader(kind: str):
    from hetero_ns3.studies.point import load_point_scenario

    return lambda raw, base_dir: load_point_scenario(kind, raw, base_dir)


def _check_axis_keys(study: Study) -> None:
    """Each axis alone, at its first value, on the base: an unknown or mistyped key fails here, naming the axis."""
    load = _loader(study.kind)
    for axis in study.axes:
        raw = copy.deepcopy(dict(study.base))
        set_dotted(raw, axis.key, axis.values[0], axis.where)
        try:
            load(raw, study.base_dir)
        except ScenarioError as err:
            raise ScenarioError(f"{study.source}: {axis.where}: {err}") from None


def _matches(coords: Mapping[str, Any], rule: Iterable[tuple[str, tuple[Any, ...]]]) -> bool:
    return all(coords.get(k) in values for k, values in rule)


def expand(study: Study) -> list[Point]:
    """Every point of the study, validated (each loads as a scenario), in a stable order."""
    load = _loader(study.kind)
    dims: list[list[tuple[tuple[str, Any], ...]]] = [
        [tuple((a.key, a.values[i]) for a in dim) for i in range(len(dim[0].values))] for dim in study.dims
    ]
    if study.seeds:
        dims.append([(("run.seed", s),) for s in study.seeds])
    points: list[Point] = []
    by_id: dict[str, Point] = {}
    for combo in itertools.product(*dims):
        coords = tuple(kv for part in combo for kv in part)
        cmap = dict(coords)
        if any(_matches(cmap, ex) for ex in study.excludes):
            continue
        settings: list[tuple[str, Any]] = []
        if study.backend is not None:
            settings.append(("run.backend", study.backend))
        settings.extend(coords)
        for rule in study.rules:
            if _matches(cmap, rule.when):
                settings.extend(rule.set)
        raw = copy.deepcopy(dict(study.base))
        label = ", ".join(f"{k}={v!r}" for k, v in coords) or "(base)"
        for key, value in settings:
            set_dotted(raw, key, value, f"point {label}: {key}")
        try:
            resolved = load(raw, study.base_dir)
        except ScenarioError as err:
            raise ScenarioError(f"{study.source}: point {label}: {err}") from None
        pid = point_id_of(study.kind, resolved)
        if pid in by_id:
            raise ScenarioError(
                f"{study.source}: points {by_id[pid].label()} and {label} resolve to the same scenario "
                f"(point id {pid}); an axis value has no effect, remove it"
            )
        pt = Point(len(points), coords, tuple(settings), raw, pid)
        by_id[pid] = pt
        points.append(pt)
    if not points:
        raise ScenarioError(f"{study.source}: the study has no points (every combination is excluded)")
    return points
