"""Shared pytest fixtures.

``ns`` imports ns-3 once per test session (about 12 s). ``native`` additionally builds (or reuses
from the cache) and loads hetero_ns3's own C++ module. Tests that run the simulator carry the
``ns3`` marker; every simulation ends in ``Simulator::Destroy()`` so the next one starts clean.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent


def pytest_configure(config: pytest.Config) -> None:
    # Keep test builds out of the user's cache unless the caller chose a cache explicitly.
    if "HETERO_NS3_CACHE" not in os.environ:
        os.environ["HETERO_NS3_CACHE"] = str(Path(tempfile.gettempdir()) / "hetero_ns3_test_cache")


@pytest.fixture(scope="session")
def ns():
    """The ns-3 namespace (``from ns import ns``), imported once per session."""
    from hetero_ns3.network.ns3 import ns3env

    return ns3env.import_ns()


@pytest.fixture(scope="session")
def native(ns):
    """hetero_ns3's native module, built (or cached) and loaded once per session."""
    from hetero_ns3.network.ns3 import ns3env

    ns3env.load_module()
    return ns


@pytest.fixture(scope="session")
def repo_root() -> Path:
    return REPO
