"""Scenario files: TOML -> :class:`Scenario` of frozen section dataclasses.

``load_scenario(path, overrides)`` reads the file, applies ``--set`` overrides, loads every table
through the section registry (:mod:`hetero_ns3.scenario.registry`) and returns an immutable
Scenario. Errors name the dotted field path (``parallelism.tp``), the value and the fix.
"""

from __future__ import annotations

import tomllib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import Any

from hetero_ns3.errors import ScenarioError
from hetero_ns3.scenario.fields import load_dataclass, to_plain
from hetero_ns3.scenario.overrides import apply_overrides
from hetero_ns3.scenario.registry import discover_sections, section_entry


@dataclass(frozen=True)
class Scenario:
    """A loaded, validated scenario.

    Attributes:
        source: file the scenario came from (``"<dict>"`` when built from a mapping).
        base_dir: directory against which relative paths inside the scenario resolve.
        sections: section name -> frozen dataclass instance (read-only mapping).
        overrides: the ``--set`` strings applied, in order.

    Sections are also attributes: ``scenario.parallelism`` is ``scenario.sections["parallelism"]``.
    """

    source: str
    base_dir: Path
    sections: Mapping[str, Any]
    overrides: tuple[str, ...] = field(default=())

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__"):
            raise AttributeError(name)
        sections = object.__getattribute__(self, "sections")
        if name in sections:
            return sections[name]
        raise AttributeError(f"scenario has no section [{name}]; present: {sorted(sections)}")

    def section(self, name: str, default: Any = None) -> Any:
        """The section ``name``, or ``default`` when the file has none."""
        return self.sections.get(name, default)

    def resolved(self) -> dict[str, Any]:
        """Plain-dict form of every section with defaults filled in (for ``scenario.resolved.json``)."""
        return {
            "source": self.source,
            "overrides": list(self.overrides),
            **{k: to_plain(v) for k, v in self.sections.items()},
        }


def scenario_from_dict(
    raw: Mapping[str, Any], overrides: Iterable[str] = (), source: str = "<dict>", base_dir: Path | None = None
) -> Scenario:
    """Load a scenario from an already-parsed TOML mapping (see :func:`load_scenario`)."""
    ov = tuple(overrides)
    data = apply_overrides(raw, ov)
    registry = discover_sections()
    sections: dict[str, Any] = {}
    for name, table in data.items():
        entry = section_entry(name)
        if not isinstance(table, Mapping):
            raise ScenarioError(f"{name} ({table!r}) must be a table: write it as [{name}] with keys below it")
        sections[name] = entry.loader(table, name) if entry.loader else load_dataclass(entry.cls, table, name)
    for name, entry in registry.items():
        if entry.required and name not in sections:
            raise ScenarioError(f"[{name}] section is missing from {source}" + (f"; {entry.doc}" if entry.doc else ""))
    return Scenario(source, (base_dir or Path.cwd()).resolve(), MappingProxyType(sections), ov)


def load_scenario(path: str | Path, overrides: Iterable[str] = ()) -> Scenario:
    """Read scenario TOML ``path``, apply ``--set`` ``overrides`` (``"a.b=value"``), validate every section."""
    p = Path(path).expanduser()
    if not p.is_file():
        raise ScenarioError(f"scenario file {str(path)!r} does not exist")
    try:
        with open(p, "rb") as fh:
            raw = tomllib.load(fh)
    except tomllib.TOMLDecodeError as err:
        raise ScenarioError(f"{p}: not valid TOML: {err}") from err
    return scenario_from_dict(raw, overrides, source=str(p), base_dir=p.parent)
