"""The garbage collector around the cases: how long its collections take (``gc.callbacks``),
and keeping its full collections off the cases. A full collection over a large heap takes tens
of milliseconds and lands on whichever case allocates at that moment."""

from __future__ import annotations

import _thread
import gc
import signal
import threading
import time
from types import FrameType
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
            INTERRUPTS.guard()

    def uninstall(self) -> None:
        """Stop timing (and, with the last clock gone, stop guarding Ctrl-C)."""
        if self._record in gc.callbacks:
            gc.callbacks.remove(self._record)
        if not any(_is_clock(c) for c in gc.callbacks):
            INTERRUPTS.release()

    def _record(self, phase: str, info: dict[str, Any]) -> None:
        # No call into Python code here: an interrupt that lands in this frame is put off by
        # the guard (:class:`InterruptGuard`), which recognizes it by this function's code.
        if self.generation is not None and info["generation"] != self.generation:
            return
        if phase == "start":
            self._started = time.perf_counter()
        elif self._started is not None:
            self.seconds += time.perf_counter() - self._started
            self.collections += 1
            self._started = None


class InterruptGuard:
    """Ctrl-C while the collector calls :meth:`CollectorTime._record`: CPython cannot let an
    exception out of a gc callback, so a ``KeyboardInterrupt`` raised there is printed as
    "Exception ignored in ... gctime.py" and dropped, and the run goes on. While a clock is
    installed, the SIGINT handler (wrapped, when it is Python's) sees where the interrupt
    landed: in the callback, it removes the clocks' callbacks and raises the interrupt again a
    moment later, from a thread, so that it lands where the collector was called from;
    elsewhere it calls the handler it wraps."""

    def __init__(self) -> None:
        self._wrapped: Any = None  # the handler replaced; None: not guarding

    def guard(self) -> None:
        if self._wrapped is not None or threading.current_thread() is not threading.main_thread():
            return  # signal handlers belong to the main thread
        current = signal.getsignal(signal.SIGINT)
        if callable(current):  # SIG_IGN / SIG_DFL raise nothing in Python code to lose
            self._wrapped = current
            signal.signal(signal.SIGINT, self._handle)

    def release(self) -> None:
        if self._wrapped is None or threading.current_thread() is not threading.main_thread():
            return
        if signal.getsignal(signal.SIGINT) == self._handle:  # not replaced by someone since
            signal.signal(signal.SIGINT, self._wrapped)
        self._wrapped = None

    def _handle(self, signum: int, frame: FrameType | None) -> None:
        __tracebackhide__ = True  # pytest reports the interrupt where it landed, not here
        if frame is not None and frame.f_code is CollectorTime._record.__code__:
            # The clocks stop (the run is being interrupted): with no callback of theirs left,
            # the interrupt raised again lands in the code the collector interrupted.
            gc.callbacks[:] = [c for c in gc.callbacks if not _is_clock(c)]
            _thread.start_new_thread(_interrupt_soon, (signum,))  # takes no lock a callback may hold
            return
        if callable(self._wrapped):
            self._wrapped(signum, frame)


def _is_clock(callback: object) -> bool:
    """Whether a gc callback is a :class:`CollectorTime`'s."""
    return getattr(callback, "__func__", None) is CollectorTime._record


def _interrupt_soon(signum: int) -> None:
    """Raise ``signum`` in the main thread again, once the callback it landed in has returned
    (it takes microseconds)."""
    time.sleep(0.005)
    _thread.interrupt_main(signal.Signals(signum))


def freeze_survivors() -> None:
    """Move everything alive out of the collector's reach (``gc.freeze``), after a young
    collection that frees recent garbage cycles rather than freezing them."""
    gc.collect(1)
    gc.freeze()


#: The process's one guard of Ctrl-C against the clocks' callbacks (signal handlers are the
#: process's).
INTERRUPTS = InterruptGuard()
#: The process's one clock (the collector is the process's): every backend in it reads this.
COLLECTOR_TIME = CollectorTime()
