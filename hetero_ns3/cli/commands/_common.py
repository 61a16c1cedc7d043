"""Argument checks shared by commands (not a command itself: the leading underscore keeps it out)."""

from __future__ import annotations

from hetero_ns3.errors import field_error
from hetero_ns3.units import parse_rate, parse_time

#: Defaults of ``--link-rate`` / ``--link-delay`` for the inline ``star:`` / ``leafspine:`` forms.
DEFAULT_LINK_RATE = "100Gbps"
DEFAULT_LINK_DELAY = "1us"


def is_inline_topology(spec: str) -> bool:
    """``star:N`` / ``leafspine:L,S,H`` (whose links take ``--link-rate`` / ``--link-delay``)."""
    kind, sep, _ = str(spec).partition(":")
    return bool(sep) and kind in ("star", "leafspine")


def link_args(topology: str, link_rate: str | None, link_delay: str | None) -> tuple[float, float]:
    """``(rate bit/s, delay s)`` of the inline topology's links.

    A preset or a topology file carries its own rates and delays: giving ``--link-rate`` or
    ``--link-delay`` with one is an error (the flag would be silently ignored otherwise).
    """
    if not is_inline_topology(topology):
        for flag, value in (("--link-rate", link_rate), ("--link-delay", link_delay)):
            if value is not None:
                raise field_error(
                    flag,
                    value,
                    f"applies to star:N / leafspine:L,S,H only; topology {topology!r} has its own link rates "
                    "and delays",
                    "drop the flag or edit the topology file",
                )
    rate = parse_rate(link_rate if link_rate is not None else DEFAULT_LINK_RATE, "--link-rate")
    delay = parse_time(link_delay if link_delay is not None else DEFAULT_LINK_DELAY, "--link-delay")
    return rate, delay
