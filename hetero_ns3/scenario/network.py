"""The ``[network]`` section: :class:`~hetero_ns3.network.config.NetworkConfig` (congestion control, PFC, ECN,
buffers, NIC segmentation, routing), shared by both network backends.

Its byte, second and bit/s fields (names ending in ``_bytes``, ``_s``, ``_bps``) also take unit strings such as
``"1MiB"``, ``"50us"``, ``"40Mbps"``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from hetero_ns3.errors import ScenarioError
from hetero_ns3.network.config import NetworkConfig
from hetero_ns3.scenario.fields import load_dataclass
from hetero_ns3.units import parse_rate, parse_size, parse_time

__all__ = ["NetworkConfig", "load_network_section"]


def _with_units(table: Any, where: str) -> Any:
    """Convert unit strings in keys ending with ``_bytes`` / ``_s`` / ``_bps`` to SI numbers."""
    if not isinstance(table, Mapping):
        return table
    out: dict[str, Any] = {}
    for key, value in table.items():
        path = f"{where}.{key}"
        if isinstance(value, Mapping):
            out[key] = _with_units(value, path)
        elif isinstance(value, str) and key.endswith("_bytes"):
            out[key] = parse_size(value, path, allow_zero=True)
        elif isinstance(value, str) and key.endswith("_s"):
            out[key] = parse_time(value, path)
        elif isinstance(value, str) and key.endswith("_bps"):
            out[key] = parse_rate(value, path)
        else:
            out[key] = value
    return out


def load_network_section(table: Mapping[str, Any], where: str = "network") -> NetworkConfig:
    """``[network]`` -> NetworkConfig; errors carry the full dotted path (``network.cc.kind``)."""
    try:
        return load_dataclass(NetworkConfig, _with_units(table, where), where)
    except ScenarioError as err:
        msg = str(err)
        raise ScenarioError(msg if msg.startswith(where) else f"{where}.{msg}") from None
