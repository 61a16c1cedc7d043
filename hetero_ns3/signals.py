"""SIGTERM as safe as Ctrl-C: both stop a run at the next slice and leave the partial run directory.

:func:`stop_on_signals` (used by the CLI around a command) makes SIGTERM and SIGINT raise
:class:`Interrupted`, a :class:`KeyboardInterrupt`, so every place that already handles Ctrl-C (the
packet replay stops between slices, ``recording_run`` writes ``summary.json`` with status
``"interrupted"``) handles ``kill`` the same way. The reason written names the signal. Outside the
main thread (or where handlers cannot be installed) it does nothing.
"""

from __future__ import annotations

import contextlib
import signal
import threading
from collections.abc import Iterator

_last_signal: str | None = None


class Interrupted(KeyboardInterrupt):
    """Raised by the handler of SIGTERM / SIGINT; ``signame`` says which, ``signum`` its number."""

    def __init__(self, signame: str = "SIGINT", signum: int = int(signal.SIGINT)) -> None:
        super().__init__(signame)
        self.signame = signame
        self.signum = signum


def last_signal() -> str | None:
    """Name of the last signal that interrupted a run in this process (None: none, or a plain Ctrl-C)."""
    return _last_signal


def interrupt_reason(err: BaseException) -> str:
    """``"interrupted (SIGTERM)"`` / ``"interrupted (SIGINT)"`` / ``"interrupted (KeyboardInterrupt)"``."""
    name = getattr(err, "signame", None) or _last_signal or "KeyboardInterrupt"
    return f"interrupted ({name})"


def exit_status(err: BaseException) -> int:
    """Shell convention: 128 + the signal number (130 for Ctrl-C, 143 for SIGTERM)."""
    num = getattr(err, "signum", None)
    if num is None:
        num = int(signal.SIGTERM) if _last_signal == "SIGTERM" else int(signal.SIGINT)
    return 128 + int(num)


def _handler(signum: int, _frame: object) -> None:
    global _last_signal
    name = signal.Signals(signum).name
    _last_signal = name
    raise Interrupted(name, signum)


@contextlib.contextmanager
def stop_on_signals() -> Iterator[None]:
    """Within the block, SIGTERM and SIGINT raise :class:`Interrupted`; old handlers restored after."""
    global _last_signal
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    _last_signal = None
    old = {}
    try:
        for sig in (signal.SIGTERM, signal.SIGINT):
            old[sig] = signal.signal(sig, _handler)
    except (ValueError, OSError):  # pragma: no cover - embedded interpreters
        pass
    try:
        yield
    finally:
        for sig, h in old.items():
            signal.signal(sig, h)
