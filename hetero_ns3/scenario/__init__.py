"""Scenario files: TOML loaded into one frozen, typed :class:`Scenario` whose fields are the sections.

Sections (one module each, except those whose dataclass lives with its stage): ``[model]``
(:mod:`hetero_ns3.workload.models`), ``[parallelism]`` (:mod:`hetero_ns3.workload.parallel`), ``[cluster]``
(:mod:`.cluster`), ``[compute]`` (:mod:`hetero_ns3.compute.config`), ``[network]`` (:mod:`.network`),
``[collectives]`` (:mod:`.collectives`), ``[faults]`` (:mod:`.faults`), ``[run]`` (:mod:`.run`).

Public API: :func:`load_scenario`, :func:`scenario_from_dict`, :class:`Scenario`, :data:`SECTIONS`,
:func:`load_dataclass`, :func:`apply_overrides`.
"""

from typing import Any

from hetero_ns3.scenario.fields import load_dataclass, to_plain, valid_keys
from hetero_ns3.scenario.overrides import apply_overrides, parse_override

_LAZY = {"SECTIONS", "Scenario", "load_scenario", "scenario_from_dict"}


def __getattr__(name: str) -> Any:
    # The loader imports every section's stage package, some of which import scenario.fields: load it lazily.
    if name in _LAZY:
        from hetero_ns3.scenario import loader

        return getattr(loader, name)
    raise AttributeError(f"module 'hetero_ns3.scenario' has no attribute {name!r}")


__all__ = [
    "SECTIONS",
    "Scenario",
    "apply_overrides",
    "load_dataclass",
    "load_scenario",
    "parse_override",
    "scenario_from_dict",
    "to_plain",
    "valid_keys",
]
