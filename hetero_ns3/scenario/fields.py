"""Generic loading of a TOML table into a frozen dataclass, with dotted-path errors.

A section dataclass declares its fields with type hints; optional ``metadata`` on a field:

* ``unit``: ``"size"`` (bytes), ``"time"`` (seconds) or ``"rate"`` (bit/s): strings such as ``"40MiB"``
  are parsed by :mod:`hetero_ns3.units`; plain numbers are taken as SI.
* ``doc``: one-line meaning of the field (shown by error messages listing valid keys).

Supported field types: ``int``, ``float``, ``str``, ``bool``, ``Literal[...]``, ``X | None``,
``tuple[X, ...]``, nested dataclasses, ``tuple[Dataclass, ...]`` (arrays of tables) and
``Mapping[str, Any]`` (kept as a read-only dict). Types are strict: a string is never converted to
an integer, number or boolean (``tp = "4"`` is an error naming ``parallelism.tp``). ``--set`` overrides
are read as TOML literals first (``--set parallelism.tp=4`` is the integer 4; see
:mod:`hetero_ns3.scenario.overrides`), so they need no conversion either. Fields with a ``unit`` accept
strings with units (``"40MiB"``) by design.

After construction, a dataclass may define ``validate(self, where: str) -> None`` to check
cross-field rules; it raises :class:`~hetero_ns3.errors.ScenarioError` naming ``where.field``.
"""

from __future__ import annotations

import dataclasses
import types
import typing
from collections.abc import Mapping
from types import MappingProxyType
from typing import Any, Literal, TypeVar, Union, get_args, get_origin, get_type_hints

from hetero_ns3.errors import ScenarioError, field_error
from hetero_ns3.inputs import did_you_mean
from hetero_ns3.units import parse_rate, parse_size, parse_time

T = TypeVar("T")
_MISSING = dataclasses.MISSING


def valid_keys(cls: type) -> list[str]:
    """Names of the fields of dataclass ``cls`` (the keys its TOML table accepts)."""
    return [f.name for f in dataclasses.fields(cls) if f.init]


def _join(where: str, key: str | int) -> str:
    if isinstance(key, int):
        return f"{where}[{key}]"
    return f"{where}.{key}" if where else key


def _table_hint(where: str, cls: type) -> str:
    """How to write the table of dataclass ``cls`` at dotted path ``where``."""
    keys = valid_keys(cls)
    key = where.rsplit(".", 1)[-1] if where else cls.__name__
    return f"write it as a table, e.g. {key} = {{ {keys[0]} = ... }}" if keys else ""


def _strict_hint(value: Any, example: str) -> str:
    """The fix for a quoted literal: values in files are not converted from strings."""
    if isinstance(value, str):
        return f"write it without quotes (e.g. {example}); strings are not converted"
    return ""


def _coerce(value: Any, tp: Any, where: str, unit: str | None) -> Any:
    origin = get_origin(tp)
    if origin in (Union, types.UnionType):
        args = [a for a in get_args(tp) if a is not type(None)]
        if value is None:
            return None
        if len(args) == 1:
            return _coerce(value, args[0], where, unit)
        errors = []
        for a in args:
            try:
                return _coerce(value, a, where, unit)
            except ScenarioError as err:
                errors.append(str(err))
        raise ScenarioError(errors[0])
    if origin is Literal:
        choices = get_args(tp)
        if value not in choices:
            # accept case-insensitive spelling of string choices
            low = {str(c).lower(): c for c in choices}
            if isinstance(value, str) and value.lower() in low:
                return low[value.lower()]
            raise field_error(where, value, "is not a valid choice", f"use one of {list(choices)}")
        return value
    if origin is tuple:
        if isinstance(value, str):
            raise field_error(where, value, "must be a list", "write e.g. [1, 2]")
        items = value if isinstance(value, (list, tuple)) else [value]
        inner = get_args(tp)[0]
        return tuple(_coerce(v, inner, _join(where, i), unit) for i, v in enumerate(items))
    if origin in (Mapping, dict, typing.Mapping) or tp is dict:
        if not isinstance(value, Mapping):
            raise field_error(where, value, "must be a table", "write e.g. {key = value}")
        return MappingProxyType(dict(value))
    if tp is Any:
        return value
    if isinstance(tp, type) and dataclasses.is_dataclass(tp):
        if not isinstance(value, Mapping):
            raise field_error(where, value, f"must be a table with keys among {valid_keys(tp)}", _table_hint(where, tp))
        return load_dataclass(tp, value, where)
    if tp is bool:
        if isinstance(value, bool):
            return value
        raise field_error(where, value, "must be true or false", _strict_hint(value, "true"))
    if tp is int:
        if unit == "size":
            return parse_size(value, where, allow_zero=True)
        if isinstance(value, bool):
            raise field_error(where, value, "must be an integer")
        if isinstance(value, int):
            return value
        if isinstance(value, float) and value.is_integer() and abs(value) < 2**63:
            return int(value)
        raise field_error(where, value, "must be an integer", _strict_hint(value, "4"))
    if tp is float:
        if unit == "time":
            return parse_time(value, where)
        if unit == "rate":
            return parse_rate(value, where)
        if unit == "size":
            return float(parse_size(value, where, allow_zero=True))
        if isinstance(value, bool):
            raise field_error(where, value, "must be a number")
        if isinstance(value, (int, float)):
            return float(value)
        raise field_error(where, value, "must be a number", _strict_hint(value, "0.5"))
    if tp is str:
        if isinstance(value, (dict, list, bool)):
            raise field_error(where, value, "must be a string")
        return str(value)
    raise ScenarioError(f"{where}: internal error, unsupported field type {tp!r}")


def load_dataclass(cls: type[T], data: Mapping[str, Any], where: str = "") -> T:
    """Build dataclass ``cls`` from table ``data``; errors name ``where.key``.

    Unknown keys are rejected with the list of valid ones; missing required keys are named.
    """
    if not isinstance(data, Mapping):
        raise field_error(
            where or cls.__name__, data, f"must be a table with keys among {valid_keys(cls)}", _table_hint(where, cls)
        )
    hints = get_type_hints(cls)
    fields = {f.name: f for f in dataclasses.fields(cls) if f.init}  # type: ignore[arg-type]
    unknown = [k for k in data if k not in fields]
    if unknown:
        hint = did_you_mean(unknown[0], fields).removeprefix("; ")
        raise field_error(
            _join(where, unknown[0]),
            data[unknown[0]],
            "is not a known key",
            f"{hint + ' ' if hint else ''}valid keys: {sorted(fields)}",
        )
    kwargs: dict[str, Any] = {}
    for name, f in fields.items():
        path = _join(where, name)
        if name in data:
            kwargs[name] = _coerce(data[name], hints[name], path, f.metadata.get("unit"))
        elif f.default is _MISSING and f.default_factory is _MISSING:
            doc = f.metadata.get("doc", "")
            raise ScenarioError(f"{path} is missing" + (f" ({doc})" if doc else "") + f"; add `{name} = ...`")
    obj = cls(**kwargs)
    check = getattr(obj, "validate", None)
    if callable(check):
        check(where)
    return obj


def to_plain(obj: Any) -> Any:
    """Convert a dataclass tree to plain dicts, lists and scalars (JSON-ready)."""
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        return {f.name: to_plain(getattr(obj, f.name)) for f in dataclasses.fields(obj)}
    if isinstance(obj, Mapping):
        return {str(k): to_plain(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [to_plain(v) for v in obj]
    return obj
