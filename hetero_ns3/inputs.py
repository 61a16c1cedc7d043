"""The one input-reading layer: every file a tool reads goes through here.

Scenario, study, topology, tuning and schedule TOML files (:func:`read_toml`), flows CSV files
(:func:`read_csv_text`), and anything else read as text (:func:`read_text`). Each turns what can go wrong
with a file into one :class:`~hetero_ns3.errors.ScenarioError` line that names the file:

* missing, a directory, a device or unreadable -> ``scenario file 'x.toml' does not exist`` / ``... is not a
  regular file`` / ``... cannot be read: Permission denied``;
* larger than :data:`MAX_INPUT_BYTES` (a scenario is kilobytes; a stray multi-GB file is a mistake);
* not UTF-8 (binary) -> the byte offset and the byte: ``... is not UTF-8 text: byte 0xff at offset 0``;
* a NUL byte (binary) -> its offset;
* TOML syntax -> line and column (``... is not valid TOML: line 3, column 7: ...``).

Strict types: values read from files are never coerced from strings (``tp = "4"`` is an error, see
:mod:`hetero_ns3.scenario.fields`); ``--set`` overrides are parsed as TOML literals first, so
``--set parallelism.tp=4`` is the integer 4. Unknown keys get a "did you mean" suggestion
(:func:`did_you_mean`).
"""

from __future__ import annotations

import csv
import difflib
import io
import stat
import tomllib
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from hetero_ns3.errors import ScenarioError

#: Largest input file read (bytes). Scenarios, topologies and flow tables are far smaller.
MAX_INPUT_BYTES = 256 * 2**20


def did_you_mean(word: str, choices: Iterable[str]) -> str:
    """``"; did you mean 'tp'?"`` for the closest of ``choices`` to ``word`` (difflib), else ``""``."""
    close = difflib.get_close_matches(str(word), [str(c) for c in choices], n=1, cutoff=0.6)
    return f"; did you mean {close[0]!r}?" if close else ""


def _describe(path: Path, what: str) -> str:
    return f"{what} {str(path)!r}"


def read_bytes(path: str | Path, what: str = "file") -> bytes:
    """The bytes of regular file ``path``; ScenarioError naming ``what`` and the path otherwise."""
    p = Path(path).expanduser()
    name = _describe(p, what)
    try:
        st = p.stat()
    except FileNotFoundError:
        raise ScenarioError(f"{name} does not exist") from None
    except OSError as err:
        raise ScenarioError(f"{name} cannot be read: {err.strerror or err}") from None
    if stat.S_ISDIR(st.st_mode):
        raise ScenarioError(f"{name} is a directory; give a file")
    if not stat.S_ISREG(st.st_mode):
        raise ScenarioError(f"{name} is not a regular file (a device or pipe?); give a file")
    if st.st_size > MAX_INPUT_BYTES:
        raise ScenarioError(f"{name} is {st.st_size} bytes, over the {MAX_INPUT_BYTES} B limit of an input file")
    try:
        return p.read_bytes()
    except OSError as err:
        raise ScenarioError(f"{name} cannot be read: {err.strerror or err}") from None


def decode_utf8(data: bytes, name: str) -> str:
    """``data`` as text; ScenarioError naming ``name``, the byte offset and the byte when it is not UTF-8."""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as err:
        bad = data[err.start : err.start + 1]
        raise ScenarioError(
            f"{name} is not UTF-8 text: byte 0x{bad.hex()} at offset {err.start} ({err.reason}); "
            "is it a binary file? save it as UTF-8"
        ) from None
    nul = text.find("\x00")
    if nul >= 0:
        raise ScenarioError(f"{name} holds a NUL byte at offset {len(text[:nul].encode())}; is it a binary file?")
    return text.removeprefix("\ufeff")


def read_text(path: str | Path, what: str = "file") -> str:
    """Text of ``path`` (UTF-8, BOM dropped); one ScenarioError line for every way that fails."""
    p = Path(path).expanduser()
    return decode_utf8(read_bytes(p, what), _describe(p, what))


def parse_toml(text: str, name: str) -> dict[str, Any]:
    """Parse TOML ``text``; errors carry ``name`` and the parser's line and column."""
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as err:
        msg = str(err)
        # tomllib: "Invalid value (at line 3, column 7)" -> "line 3, column 7: invalid value"
        if "(at line" in msg:
            head, _, pos = msg.rpartition(" (at ")
            msg = f"{pos.rstrip(')')}: {head[:1].lower()}{head[1:]}"
        elif msg.endswith("(at end of document)"):
            msg = f"end of document: {msg.removesuffix(' (at end of document)')}"
        raise ScenarioError(f"{name} is not valid TOML: {msg}") from None
    except RecursionError:
        raise ScenarioError(f"{name} is nested too deeply to parse") from None


def read_toml(path: str | Path, what: str = "file") -> dict[str, Any]:
    """Read and parse TOML file ``path`` (``what`` names it in errors: "scenario file", "topology file")."""
    p = Path(path).expanduser()
    return parse_toml(read_text(p, what), _describe(p, what))


def read_csv_text(path: str | Path, what: str = "CSV file") -> str:
    """Text of a CSV file, checked to be UTF-8 and to parse as CSV (errors give the line)."""
    p = Path(path).expanduser()
    text = read_text(p, what)
    reader = csv.reader(io.StringIO(text), strict=True)
    try:
        for _ in reader:
            pass
    except csv.Error as err:
        raise ScenarioError(f"{_describe(p, what)} is not valid CSV: line {reader.line_num}: {err}") from None
    return text


def read_csv_rows(path: str | Path, what: str, required: Sequence[str]) -> list[dict[str, str]]:
    """Data rows of a CSV file with a header (:func:`read_csv_text`), each checked to give every ``required``
    column a value; the error names the data row (1 = the first after the header) and the missing column."""
    p = Path(path).expanduser()
    rows = list(csv.DictReader(io.StringIO(read_csv_text(p, what))))
    for i, r in enumerate(rows, start=1):
        missing = [c for c in required if not (r.get(c) or "").strip()]
        if missing:
            raise ScenarioError(f"{p}: data row {i} has no {missing[0]!r}; give every column of {', '.join(required)}")
    return rows
