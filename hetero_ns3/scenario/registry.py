"""Registry of scenario sections: TOML table name -> frozen dataclass.

Each section of a scenario file (``[model]``, ``[parallelism]``, ``[cluster]``, ``[compute]``, and the
ones other packages add, such as ``[network]`` or ``[run]``) is loaded by the dataclass registered for
its name. Other modules add a section by calling :func:`register_section` at import time; modules
named in :data:`SECTION_PROVIDERS` are imported by :func:`discover_sections` before a scenario loads,
so a package that lives there registers itself without any change here (a provider module that is
not installed yet is skipped).
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from hetero_ns3.errors import ScenarioError

#: Modules that register scenario sections when imported (missing modules are skipped).
SECTION_PROVIDERS: tuple[str, ...] = (
    "hetero_ns3.scenario.sections",
    "hetero_ns3.network.scenario_section",
    "hetero_ns3.collectives.scenario_section",
    "hetero_ns3.cosim.scenario_section",
    "hetero_ns3.faults.scenario_section",
    "hetero_ns3.run.scenario_section",
)


@dataclass(frozen=True)
class SectionEntry:
    """How one section is loaded.

    Attributes:
        name: TOML table name.
        cls: frozen dataclass the table loads into.
        required: the scenario fails to load without this table.
        loader: optional custom ``(table, where) -> instance``; default is field-by-field loading.
        doc: one line shown in error messages.
    """

    name: str
    cls: type
    required: bool = False
    loader: Callable[[Mapping[str, Any], str], Any] | None = None
    doc: str = ""


_REGISTRY: dict[str, SectionEntry] = {}


def register_section(
    name: str,
    cls: type,
    *,
    required: bool = False,
    loader: Callable[[Mapping[str, Any], str], Any] | None = None,
    doc: str = "",
) -> None:
    """Register ``[name]`` to load into ``cls``. Re-registering the same class is a no-op."""
    old = _REGISTRY.get(name)
    if old is not None and old.cls is not cls:
        raise ScenarioError(f"scenario section [{name}] is already registered by {old.cls.__qualname__}")
    _REGISTRY[name] = SectionEntry(name, cls, required, loader, doc)


def discover_sections() -> Mapping[str, SectionEntry]:
    """Import the provider modules (once) and return the registry."""
    for mod in SECTION_PROVIDERS:
        try:
            importlib.import_module(mod)
        except ModuleNotFoundError as err:
            if err.name is None or not mod.startswith(err.name):
                raise
    return dict(_REGISTRY)


def section_entry(name: str) -> SectionEntry:
    """The entry for ``[name]``; ScenarioError listing the known sections if unknown."""
    reg = discover_sections()
    if name not in reg:
        raise ScenarioError(f"[{name}] is not a known scenario section; valid sections: {sorted(reg)}")
    return reg[name]
