"""The one output layer: where a command may write, checked before any work starts.

``--out DIR`` (``plan``, ``run``, ``flows``, ``sweep``, ``validate``; ``plan --chakra-out``) must be a directory that exists and is writable, or one that
can be created (its nearest existing ancestor is a writable directory). An existing regular file, a
device (``/dev/null``), anything under ``/proc``, ``/sys`` or ``/dev``, or an unwritable parent is a
one-line :class:`~hetero_ns3.errors.ScenarioError` naming the flag and the fix. A file path
(``topo show --plot``, which must end in ``.png``; ``report --out``) must sit in such a directory.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

from hetero_ns3.errors import ScenarioError

#: Pseudo file systems: writing a run there is never what was meant.
_FORBIDDEN_ROOTS = (Path("/proc"), Path("/sys"), Path("/dev"))


def _under(path: Path, root: Path) -> bool:
    return path == root or root in path.parents


def _writable_dir(d: Path) -> bool:
    return os.access(d, os.W_OK | os.X_OK)


def _check_creatable(path: Path, flag: str, what: str) -> None:
    """``path`` does not exist: its nearest existing ancestor must be a writable directory."""
    parent = path.parent
    while not parent.exists() and parent != parent.parent:
        parent = parent.parent
    if not parent.is_dir():
        raise ScenarioError(f"{flag} ({str(path)!r}) cannot be created: {str(parent)!r} is a file, not a directory")
    if not _writable_dir(parent):
        raise ScenarioError(
            f"{flag} ({str(path)!r}) cannot be created: {str(parent)!r} is not writable; choose another {what}"
        )


def check_out_dir(path: str | os.PathLike[str], flag: str = "--out") -> Path:
    """Return ``path`` as a Path if a command may write a directory of files there; else ScenarioError."""
    text = os.fspath(path)
    if not text.strip():
        raise ScenarioError(f"{flag} ('') is empty; give a directory, e.g. {flag} runs/my-run")
    p = Path(text).expanduser()
    absolute = Path(os.path.abspath(p))
    for root in _FORBIDDEN_ROOTS:
        if _under(absolute, root) or _under(p.resolve(), root):
            raise ScenarioError(f"{flag} ({text!r}) is under {root}, a pseudo file system; give a normal directory")
    if p.exists() or p.is_symlink():
        try:
            mode = p.stat().st_mode
        except OSError as err:
            raise ScenarioError(f"{flag} ({text!r}) cannot be used: {err.strerror or err}") from None
        if not stat.S_ISDIR(mode):
            kind = "a regular file" if stat.S_ISREG(mode) else "not a directory (a device or pipe?)"
            raise ScenarioError(f"{flag} ({text!r}) is {kind}; give a directory (new or existing)")
        if not _writable_dir(p):
            raise ScenarioError(f"{flag} ({text!r}) is a directory that is not writable; choose another directory")
        return p
    _check_creatable(absolute, flag, "directory")
    return p


def check_out_file(path: str | os.PathLike[str], flag: str, suffixes: tuple[str, ...] | None) -> Path:
    """Return ``path`` if a file with one of ``suffixes`` (e.g. ``(".png",)``; None: any name) can be written
    there."""
    text = os.fspath(path)
    p = Path(text).expanduser()
    if suffixes is not None and p.suffix.lower() not in suffixes:
        raise ScenarioError(
            f"{flag} ({text!r}) must end in {' or '.join(suffixes)} (the only format written); e.g. {flag} topo.png"
        )
    absolute = Path(os.path.abspath(p))
    for root in _FORBIDDEN_ROOTS:
        if _under(absolute, root):
            raise ScenarioError(f"{flag} ({text!r}) is under {root}, a pseudo file system; give a normal path")
    if p.exists():
        if not p.is_file():
            raise ScenarioError(f"{flag} ({text!r}) exists and is not a regular file; give a file path")
        if not os.access(p, os.W_OK):
            raise ScenarioError(f"{flag} ({text!r}) is not writable; choose another path")
        return p
    _check_creatable(absolute, flag, "path")
    return p
