"""Typed errors of hetero_ns3.

Every error a user can cause is one of these. The CLI prints ``str(err)`` as one line and exits
with status 2; ``--debug`` shows the traceback. Messages name what failed (a dotted field path,
a row and column, a file), the offending value, and how to fix it.
"""

from __future__ import annotations


class HeteroNs3Error(Exception):
    """Base class of all errors that hetero_ns3 raises on purpose."""


class ScenarioError(HeteroNs3Error, ValueError):
    """A scenario, topology or input file is malformed or inconsistent."""


class PlanningError(HeteroNs3Error):
    """A valid scenario cannot be planned (e.g. memory overflow, no route)."""


class SimulationError(HeteroNs3Error):
    """A simulation failed or produced inconsistent results."""


class NativeBuildError(HeteroNs3Error):
    """The native ns-3 module could not be compiled or loaded.

    ``compiler_output`` carries the compiler's own message, unabridged.
    """

    def __init__(self, message: str, compiler_output: str = "") -> None:
        self.compiler_output = compiler_output
        full = message if not compiler_output else f"{message}\n--- compiler output ---\n{compiler_output}"
        super().__init__(full)


def field_error(path: str, value: object, problem: str, fix: str = "") -> ScenarioError:
    """Build a ScenarioError in the house style: ``path (value) problem; fix``."""
    msg = f"{path} ({value!r}) {problem}"
    if fix:
        msg += f"; {fix}"
    return ScenarioError(msg)


def divisors(n: int) -> list[int]:
    """The divisors of ``n``, ascending: the choices a "must divide" error offers."""
    return [d for d in range(1, n + 1) if n % d == 0]
