"""Seconds the garbage collector spends, counted through ``gc.callbacks``: a full collection
over a large heap takes tens of milliseconds and lands on whichever case allocates at that
moment, so a case's time is only explained with it."""

from __future__ import annotations

import gc
import time
from typing import Any


class CollectorTime:
    """Total seconds spent in garbage collections since :meth:`install`."""

    def __init__(self) -> None:
        self.seconds = 0.0
        self._started: float | None = None

    def install(self) -> None:
        if self._record not in gc.callbacks:
            gc.callbacks.append(self._record)

    def _record(self, phase: str, _info: dict[str, Any]) -> None:
        if phase == "start":
            self._started = time.perf_counter()
        elif self._started is not None:
            self.seconds += time.perf_counter() - self._started
            self._started = None


#: The process's one clock (the collector is the process's): every backend in it reads this.
COLLECTOR_TIME = CollectorTime()
