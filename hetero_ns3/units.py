"""Parsing of unit-bearing strings, in one place.

Inside hetero_ns3 every quantity is an SI number: bytes, seconds, bit/s, FLOP/s. Strings such as
``"400Gbps"``, ``"1us"`` and ``"80GiB"`` appear only at the edges (scenario files, CLI flags) and
are converted here. Plain numbers pass through unchanged (already SI).
"""

from __future__ import annotations

import re

from hetero_ns3.errors import ScenarioError

_NUM = r"([0-9]*\.?[0-9]+(?:[eE][-+]?[0-9]+)?)"

_RATE_UNITS = {
    "bps": 1.0,
    "kbps": 1e3,
    "mbps": 1e6,
    "gbps": 1e9,
    "tbps": 1e12,
    "k": 1e3,
    "m": 1e6,
    "g": 1e9,
    "t": 1e12,
    "gb/s": 1e9,
    "b/s": 1.0,
    "gbit/s": 1e9,
    "tbit/s": 1e12,
    # Byte rates, case-sensitive handling below ("GBps" = gigabytes per second).
}
_BYTE_RATE_UNITS = {"Bps": 8.0, "KBps": 8e3, "MBps": 8e6, "GBps": 8e9, "TBps": 8e12, "GB/s": 8e9, "TB/s": 8e12}

_TIME_UNITS = {"s": 1.0, "ms": 1e-3, "us": 1e-6, "µs": 1e-6, "ns": 1e-9, "ps": 1e-12, "min": 60.0}

_SIZE_UNITS = {
    "": 1,
    "b": 1,
    "kb": 10**3,
    "mb": 10**6,
    "gb": 10**9,
    "tb": 10**12,
    "kib": 2**10,
    "mib": 2**20,
    "gib": 2**30,
    "tib": 2**40,
    "k": 2**10,
    "m": 2**20,
    "g": 2**30,
}


def _split(text: str, what: str, field: str) -> tuple[float, str]:
    m = re.fullmatch(_NUM + r"\s*([A-Za-zµ/]*)", text.strip())
    if not m and re.fullmatch(r"-\s*" + _NUM + r"\s*([A-Za-zµ/]*)", text.strip()):
        raise ScenarioError(f"{field} ({text!r}) is negative; a {what} cannot be, e.g. {_EXAMPLES[what]}")
    if not m:
        raise ScenarioError(f"{field} ({text!r}) is not a {what}; write a number with a unit, e.g. {_EXAMPLES[what]}")
    return float(m.group(1)), m.group(2)


_EXAMPLES = {"rate": "'400Gbps'", "time": "'1us'", "size": "'64KiB'"}


def parse_rate(value: str | float | int, field: str = "rate") -> float:
    """Return a data rate in bit/s. Accepts ``"400Gbps"``, ``"100G"``, ``"50GBps"`` (bytes) or a number."""
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        out = float(value)
    else:
        num, unit = _split(str(value), "rate", field)
        if unit in _BYTE_RATE_UNITS:
            out = num * _BYTE_RATE_UNITS[unit]
        elif unit.lower() in _RATE_UNITS:
            out = num * _RATE_UNITS[unit.lower()]
        else:
            raise ScenarioError(
                f"{field} ({value!r}) has an unknown rate unit {unit!r}; use bps, Kbps, Mbps, Gbps, Tbps or GBps"
            )
    if out <= 0:
        raise ScenarioError(f"{field} ({value!r}) must be a positive rate; e.g. '100Gbps'")
    return out


def parse_time(value: str | float | int, field: str = "time", allow_zero: bool = True) -> float:
    """Return a duration in seconds. Accepts ``"1us"``, ``"2.5ms"``, ``"0"`` or a number of seconds."""
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        out = float(value)
    else:
        num, unit = _split(str(value), "time", field)
        if unit == "" and num == 0:
            out = 0.0
        elif unit in _TIME_UNITS:
            out = num * _TIME_UNITS[unit]
        else:
            raise ScenarioError(f"{field} ({value!r}) has an unknown time unit {unit!r}; use s, ms, us or ns")
    if out < 0 or (out == 0 and not allow_zero):
        raise ScenarioError(f"{field} ({value!r}) must be {'non-negative' if allow_zero else 'positive'}")
    return out


def parse_size(value: str | float | int, field: str = "size", allow_zero: bool = False) -> int:
    """Return a size in bytes. ``"64KiB"`` = 65536, ``"1MB"`` = 10**6, ``"1K"`` = 1024, a number = bytes."""
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        out = float(value)
    else:
        num, unit = _split(str(value), "size", field)
        key = unit.lower()
        if key not in _SIZE_UNITS:
            raise ScenarioError(
                f"{field} ({value!r}) has an unknown size unit {unit!r}; use B, KiB, MiB, GiB, KB, MB or GB"
            )
        out = num * _SIZE_UNITS[key]
    if out < 0 or (out == 0 and not allow_zero) or out != int(out):
        raise ScenarioError(
            f"{field} ({value!r}) must be a {'non-negative' if allow_zero else 'positive'} whole number of bytes"
        )
    return int(out)


def format_size(n: float) -> str:
    """Human-readable binary size: 1536 -> '1.5KiB'."""
    for unit, scale in (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if abs(n) >= scale:
            return f"{n / scale:g}{unit}"
    return f"{int(n)}B"


def format_rate(bps: float) -> str:
    """Human-readable bit rate: 4e11 -> '400Gbps'."""
    for unit, scale in (("Tbps", 1e12), ("Gbps", 1e9), ("Mbps", 1e6), ("Kbps", 1e3)):
        if abs(bps) >= scale:
            return f"{bps / scale:g}{unit}"
    return f"{bps:g}bps"
