"""The garbage collector around the cases: how long its collections take (``gc.callbacks``),
and keeping its full collections off the cases. A full collection over a large heap takes tens
of milliseconds and lands on whichever case allocates at that moment."""

from __future__ import annotations

import gc
import time
from typing import Any


class CollectorTime:
    """Seconds spent in, and number of, garbage collections since :meth:`install` (of one
    ``generation`` only, or of all)."""

    def __init__(self, generation: int | None = None) -> None:
        self.generation = generation
        self.seconds = 0.0
        self.collections = 0
        self._started: float | None = None

    def install(self) -> None:
        """Start timing; installing again changes nothing."""
        if self._record not in gc.callbacks:
            gc.callbacks.append(self._record)

    def _record(self, phase: str, info: dict[str, Any]) -> None:
        if self.generation is not None and info["generation"] != self.generation:
            return
        if phase == "start":
            self._started = time.perf_counter()
        elif self._started is not None:
            self.seconds += time.perf_counter() - self._started
            self.collections += 1
            self._started = None


def freeze_survivors() -> None:
    """Move everything alive out of the collector's reach (``gc.freeze``), after a young
    collection that frees recent garbage cycles rather than freezing them."""
    gc.collect(1)
    gc.freeze()


#: The process's one clock (the collector is the process's): every backend in it reads this.
COLLECTOR_TIME = CollectorTime()
