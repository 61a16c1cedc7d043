"""``--set section.key=value`` overrides applied to a raw scenario table before validation.

The value is read as a TOML literal (``4``, ``true``, ``[4, 4]``, ``"x"``, ``{a = 1}``) and falls back
to a plain string (``--set parallelism.schedule=interleaved``). Type coercion to the field's type
happens when the section loads, so a mistyped value fails with the same dotted-path error as in a file.
"""

from __future__ import annotations

import copy
import re
import reprlib
import tomllib
from collections.abc import Iterable, Mapping, Sequence
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


_INDEXED = re.compile(r"^([A-Za-z_][A-Za-z0-9_-]*)\[(\d+)\]$")


def set_path(raw: dict[str, Any], parts: Sequence[str], value: Any) -> str | None:
    """Set ``raw[parts[0]]...[parts[-1]] = value``, creating tables as needed; a part ``name[i]`` indexes an
    existing array of tables (``jobs[1].placement.policy``). Returns None, or why the path cannot be set."""
    node: Any = raw
    for i, part in enumerate(parts):
        last = i == len(parts) - 1
        m = _INDEXED.match(part)
        here = ".".join(parts[: i + 1])
        if m is None and ("[" in part or "]" in part):
            return f"{here} is not a valid index; write name[i] with i a whole number >= 0, e.g. jobs[0].name"
        if m is not None:
            arr = node.get(m.group(1)) if isinstance(node, dict) else None
            k = int(m.group(2))
            if not isinstance(arr, list) or k >= len(arr):
                size = len(arr) if isinstance(arr, list) else 0
                whole = ".".join([*parts[:i], m.group(1)])
                fix = (
                    f"use an index in 0..{size - 1}"
                    if size
                    else f"there is none to index; set the whole array instead, e.g. --set '{whole}=[{{...}}]'"
                )
                return f"{here} indexes an array of {size} table(s); {fix}"
            if last:
                arr[k] = value
                return None
            node = arr[k]
        elif last:
            node[part] = value
            return None
        else:
            node = node.setdefault(part, {})
        if isinstance(node, list):
            nxt, rest = parts[i + 1], parts[i + 2 :]
            eg = ".".join([f"{part}[{nxt}]", *rest]) if nxt.isdigit() else f"{part}[0].{nxt}"  # jobs.0.name
            return f"{here} is an array of {len(node)} table(s), not a table; index one, e.g. {eg}"
        if not isinstance(node, dict):
            return f"{here} ({reprlib.repr(node)}) is a value, not a table; cannot set a key in it"
    return None


def apply_overrides(raw: Mapping[str, Any], overrides: Iterable[str]) -> dict[str, Any]:
    """Return a deep copy of ``raw`` with each ``a.b=c`` override set (tables created as needed; ``name[i]``
    indexes an array of tables, e.g. ``jobs[0].placement.policy=spread``)."""
    out: dict[str, Any] = copy.deepcopy(dict(raw))
    for text in overrides:
        parts, value = parse_override(text)
        why = set_path(out, parts, value)
        if why is not None:
            raise ScenarioError(f"--set {text!r}: {why}")
    return out
