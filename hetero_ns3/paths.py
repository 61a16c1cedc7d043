"""Where preset data lives.

Library catalogs (GPU types, models) ship inside the package (``hetero_ns3/data``). User-facing
presets live at the repository root, as the design card has it: ``topologies/``, ``collectives/``,
``scenarios/``. They are found through ``$HETERO_NS3_HOME`` (a directory holding them), else the
checkout this package was installed from (editable installs, the Docker image), else the current
directory.
"""

from __future__ import annotations

import os
from pathlib import Path

from hetero_ns3.errors import ScenarioError

PACKAGE_DATA = Path(__file__).resolve().parent / "data"
HOME_ENV = "HETERO_NS3_HOME"


def project_home() -> Path:
    """Directory holding ``topologies/``, ``collectives/`` and ``scenarios/``."""
    env = os.environ.get(HOME_ENV)
    if env:
        return Path(env).expanduser().resolve()
    checkout = Path(__file__).resolve().parent.parent
    if (checkout / "topologies").is_dir():
        return checkout
    return Path.cwd()


def preset_dir(kind: str) -> Path:
    """``topologies``, ``collectives`` or ``scenarios`` under :func:`project_home`."""
    return project_home() / kind


def resolve_preset(ref: str | Path, kind: str, suffix: str = ".toml") -> Path:
    """Resolve a preset reference: an existing path, or a name looked up in ``preset_dir(kind)``.

    Raises ScenarioError listing the available names when nothing matches.
    """
    p = Path(ref).expanduser()
    if p.is_file():
        return p.resolve()
    d = preset_dir(kind)
    for cand in (d / str(ref), d / f"{ref}{suffix}"):
        if cand.is_file():
            return cand.resolve()
    raise ScenarioError(
        f"{_NOUNS.get(kind, kind)} {str(ref)!r} not found: no such file (relative to {Path.cwd()}) and no preset "
        f"of that name in {d}; give a path or one of the presets {preset_names(kind, suffix)}"
    )


#: What one item of each preset directory is, for messages.
_NOUNS = {"topologies": "topology", "scenarios": "scenario", "collectives": "collective schedule"}


def preset_names(kind: str, suffix: str = ".toml") -> list[str]:
    """Names of the presets in ``preset_dir(kind)`` (file stems), sorted."""
    d = preset_dir(kind)
    return sorted(q.stem for q in d.glob(f"*{suffix}")) if d.is_dir() else []
