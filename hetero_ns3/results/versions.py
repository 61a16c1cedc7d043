"""``versions.json``: what produced a run (package, Python, libraries, ns-3 wheel, git sha, seed)."""

from __future__ import annotations

import platform
import subprocess
from importlib import metadata
from pathlib import Path
from typing import Any

import hetero_ns3


def _dist_version(name: str) -> str | None:
    try:
        return metadata.version(name)
    except metadata.PackageNotFoundError:
        return None


def git_info(path: Path | None = None) -> tuple[str | None, bool | None]:
    """(commit sha, working tree dirty) of the git checkout holding ``path``; (None, None) outside one."""
    where = path or Path(hetero_ns3.__file__).resolve().parent
    try:
        sha = subprocess.run(
            ["git", "rev-parse", "HEAD"], cwd=where, capture_output=True, text=True, timeout=10, check=True
        ).stdout.strip()
        dirty = subprocess.run(
            ["git", "status", "--porcelain", "--untracked-files=no"],
            cwd=where,
            capture_output=True,
            text=True,
            timeout=10,
            check=True,
        ).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return None, None
    return (sha or None), bool(dirty)


def versions_info(seed: int | None) -> dict[str, Any]:
    """Versions of everything that shaped a run; the ns-3 wheel is read from package metadata, not imported."""
    sha, dirty = git_info()
    return {
        "hetero_ns3": _dist_version("hetero_ns3") or hetero_ns3.__version__,
        "python": platform.python_version(),
        "platform": platform.platform(),
        "numpy": _dist_version("numpy"),
        "pandas": _dist_version("pandas"),
        "matplotlib": _dist_version("matplotlib"),
        "ns3": _dist_version("ns3"),
        "git_sha": sha,
        "git_dirty": dirty,
        "seed": seed,
    }
