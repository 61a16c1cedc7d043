"""``--set section.key=value`` overrides applied to a raw scenario table before validation.

The value is read as a TOML literal (``4``, ``true``, ``[4, 4]``, ``"x"``, ``{a = 1}``) and falls back
to a plain string (``--set parallelism.schedule=interleaved``). Type coercion to the field's type
happens when the section loads, so a mistyped value fails with the same dotted-path error as in a file.
"""

from __future__ import annotations

import copy
import tomllib
from collections.abc import Iterable, Mapping
from typing import Any

from hetero_ns3.errors import ScenarioError


def parse_value(text: str) -> Any:
    """Read ``text`` as a TOML literal, else return it as a string."""
    try:
        return tomllib.loads(f"v = {text}")["v"]
    except tomllib.TOMLDecodeError:
        return text.strip()


def parse_override(text: str) -> tuple[tuple[str, ...], Any]:
    """Split ``"a.b.c=value"`` into ``(("a", "b", "c"), value)``."""
    if "=" not in text:
        raise ScenarioError(f"--set ({text!r}) must look like section.key=value, e.g. parallelism.tp=4")
    key, _, value = text.partition("=")
    parts = tuple(p.strip() for p in key.strip().split("."))
    if len(parts) < 2 or any(not p for p in parts):
        raise ScenarioError(f"--set ({text!r}) needs a dotted key with a section, e.g. parallelism.tp=4")
    return parts, parse_value(value)


def apply_overrides(raw: Mapping[str, Any], overrides: Iterable[str]) -> dict[str, Any]:
    """Return a deep copy of ``raw`` with each ``a.b=c`` override set (tables created as needed)."""
    out: dict[str, Any] = copy.deepcopy(dict(raw))
    for text in overrides:
        parts, value = parse_override(text)
        node = out
        for i, p in enumerate(parts[:-1]):
            nxt = node.setdefault(p, {})
            if not isinstance(nxt, dict):
                raise ScenarioError(
                    f"--set {text!r}: {'.'.join(parts[: i + 1])} ({nxt!r}) is a value, not a table; cannot set a key in it"
                )
            node = nxt
        node[parts[-1]] = value
    return out
