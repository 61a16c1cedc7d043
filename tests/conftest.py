"""Shared pytest fixtures.

``capi`` builds (or reuses from the cache) hetero_ns3's own C++ module and loads it through its C
ABI (ctypes, milliseconds): what simulations need. ``ns`` imports ns-3 through cppyy once per test
session (about 12 s); ``native`` additionally loads the module into cppyy, for tests of the cppyy
path (C++ objects from Python). Tests that run the simulator carry the
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
def capi():
    """The native module's C ABI (ctypes), built (or cached) and loaded once per session; no ns-3 import."""
    from hetero_ns3.network.ns3 import capi as capi_module

    return capi_module.load_library()


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
