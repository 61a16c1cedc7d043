"""Atomic file writes: write a temporary file in the target's directory, then ``os.replace``.

A reader (or a crash) never sees a half-written file: it sees the old file or the new one.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


#: Mode of written files: what ``open()`` would give (0o666 less the umask); mkstemp's 0o600 is too strict.
_FILE_MODE = 0o666 & ~_umask()


@contextlib.contextmanager
def atomic_path(path: str | os.PathLike[str]) -> Iterator[Path]:
    """Yield a temporary path next to ``path``; on success move it onto ``path``, else delete it."""
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.", suffix=".tmp")
    os.close(fd)
    tmp_path = Path(tmp)
    os.chmod(tmp_path, _FILE_MODE)
    try:
        yield tmp_path
        with open(tmp_path, "rb") as fh:
            os.fsync(fh.fileno())
        os.replace(tmp_path, target)
    except BaseException:
        with contextlib.suppress(OSError):
            tmp_path.unlink()
        raise


def write_with(path: str | os.PathLike[str], writer: Callable[[Path], Any]) -> Path:
    """Call ``writer(tmp_path)`` and atomically move the result to ``path``."""
    with atomic_path(path) as tmp:
        writer(tmp)
    return Path(path)


def write_text(path: str | os.PathLike[str], text: str) -> Path:
    """Atomically write ``text`` (UTF-8) to ``path``."""
    return write_with(path, lambda tmp: tmp.write_text(text, encoding="utf-8"))


def _json_default(obj: Any) -> Any:
    if hasattr(obj, "item"):  # numpy scalars
        return obj.item()
    if hasattr(obj, "tolist"):
        return obj.tolist()
    if isinstance(obj, Path):
        return str(obj)
    raise TypeError(f"cannot write {type(obj).__name__} to JSON")


def write_json(path: str | os.PathLike[str], data: Any, compact: bool = False) -> Path:
    """Atomically write ``data`` as JSON: indented, NaN/inf as ``null``.

    ``compact=True`` (for large documents such as traces) skips both: no indentation, and the caller
    guarantees finite floats (a non-finite one raises ValueError); it uses the C encoder.
    """
    if compact:
        text = json.dumps(data, separators=(",", ":"), default=_json_default, allow_nan=False)
    else:
        text = json.dumps(_sanitize(data), indent=2, default=_json_default, allow_nan=False)
    return write_text(path, text + "\n")


def _sanitize(obj: Any) -> Any:
    """Plain-JSON copy of ``obj``: numpy scalars and arrays as Python values, non-finite floats as None."""
    if isinstance(obj, float):
        return obj if math.isfinite(obj) else None
    if isinstance(obj, dict):
        return {str(k): _sanitize(v) for k, v in obj.items()}
    if isinstance(obj, list | tuple):
        return [_sanitize(v) for v in obj]
    if hasattr(obj, "tolist"):  # numpy scalar or array
        return _sanitize(obj.tolist())
    return obj
