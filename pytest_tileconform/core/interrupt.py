"""SIGTERM stops a tile run as Ctrl-C does.

A CI job that runs out of time, or is cancelled, is stopped with SIGTERM. By default Python then
dies at once: ninja and the compilers it started go on without it, and the build's work folder
stays in the cache. Raised as :class:`KeyboardInterrupt` instead, SIGTERM takes the way Ctrl-C
takes: the compiles are stopped, the work folder removed, what was finished stays cached, and
pytest reports the run as interrupted. Only where nothing else handles SIGTERM (another plugin,
an embedding program), in the main thread, and only while a tile session runs.
"""

from __future__ import annotations

import signal
import threading
from types import FrameType

import pytest


def _interrupt(signum: int, _frame: FrameType | None) -> None:
    raise KeyboardInterrupt(f"stopped by {signal.Signals(signum).name}")


class TerminateAsInterrupt:
    """Registered as a plugin for a tile session: SIGTERM is Ctrl-C until pytest unconfigures."""

    def __init__(self) -> None:
        self._installed = False
        if threading.current_thread() is threading.main_thread() and (
            signal.getsignal(signal.SIGTERM) is signal.SIG_DFL
        ):
            signal.signal(signal.SIGTERM, _interrupt)
            self._installed = True

    @pytest.hookimpl(trylast=True)
    def pytest_unconfigure(self, config: pytest.Config) -> None:
        if self._installed and signal.getsignal(signal.SIGTERM) is _interrupt:
            signal.signal(signal.SIGTERM, signal.SIG_DFL)
        self._installed = False
