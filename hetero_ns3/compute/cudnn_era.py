"""cuDNN releases as written in ``[compute] cudnn`` (dotted numbers, e.g. ``"9.13.1"``): their format and order, for
the attention constants that change with a release (``[cudnn_era.<architecture>]`` in gpus.toml; docs/compute.md
"Blackwell attention")."""

from __future__ import annotations

import re

RELEASE = re.compile(r"\d+(\.\d+){0,3}")
"""A release: one to four dotted numbers."""


def is_release(text: object) -> bool:
    """Whether ``text`` is a release string (:data:`RELEASE`)."""
    return isinstance(text, str) and RELEASE.fullmatch(text) is not None


def before(release: str, boundary: str) -> bool:
    """Whether ``release`` precedes ``boundary`` (numeric order per part: ``"9.18.0"`` before ``"9.18.1"``, ``"9.7"``
    before ``"9.13"``)."""
    return _parts(release) < _parts(boundary)


def _parts(release: str) -> tuple[int, ...]:
    return tuple(int(p) for p in release.split("."))
