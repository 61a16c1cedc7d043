"""Scenario files: TOML loaded into frozen dataclasses, one per section, through a registry.

Public API: :func:`load_scenario`, :func:`scenario_from_dict`, :class:`Scenario`,
:func:`register_section`, :func:`load_dataclass`, :func:`apply_overrides`.
"""

from hetero_ns3.scenario.fields import load_dataclass, to_plain, valid_keys
from hetero_ns3.scenario.loader import Scenario, load_scenario, scenario_from_dict
from hetero_ns3.scenario.overrides import apply_overrides, parse_override
from hetero_ns3.scenario.registry import discover_sections, register_section

__all__ = [
    "Scenario",
    "apply_overrides",
    "discover_sections",
    "load_dataclass",
    "load_scenario",
    "parse_override",
    "register_section",
    "scenario_from_dict",
    "to_plain",
    "valid_keys",
]
