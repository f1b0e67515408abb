"""The process around each case: torch's threads for the case's inputs and reference check, and
the garbage collector kept off the cases; both are process-wide, so what was changed is undone
when the session ends (:meth:`CaseSettling.restore`)."""

from __future__ import annotations

import functools
import gc
from collections.abc import Callable

from ..compile.cache import available_cores
from ..core.gctime import COLLECTOR_TIME, freeze_survivors
from .axes import MoeCase

MACS_PER_THREAD = 16_000_000
"""Multiply-adds of a case's reference product per torch thread. Measured on a 16-core host
with an H200 (``benchmarks/check_threads.py``): the sm90 matrix's problem (74 M) checks in 2.4 ms
on 4 threads and 2.05 ms on 16, but in a real run 16 threads stalled one check in six for
32-108 ms: a thread that another process (the runner, pytest) preempts holds up the rest at the
next barrier; with 4 the check's p90 fell from 40.6 to 5.7 ms. From 1 G multiply-adds up, 16
threads check twice as fast as 4 (19.5 against 38 ms; 727 against 1,408 ms at 120 G), and a
stall is small beside the work."""


def case_threads(case: MoeCase, cores: int, workers: int) -> int:
    """Threads for torch in a case's inputs and reference check: one per
    :data:`MACS_PER_THREAD` of its product, at most the worker's share of the ``cores`` that
    ``workers`` processes share."""
    problem = case.axes.problem
    macs = sum(problem.rows_per_expert) * problem.n * problem.k
    return max(1, min(macs // MACS_PER_THREAD, cores // max(1, workers)))


class CaseSettling:
    """Settles this process before each case it runs, and remembers what that changed."""

    def __init__(self, workers: int) -> None:
        self.workers = workers
        self._threads: int | None = None  # torch's threads before the first case
        self._callbacks: list[Callable[..., object]] = []  # collector clocks installed here
        self._frozen = False

    @functools.cached_property
    def cores(self) -> int:
        """The cores this process may use, for torch's threads (looked up once)."""
        return available_cores()

    def settle(self, case: MoeCase) -> None:
        """Before each case:

        - torch gets :func:`case_threads` threads for the case's inputs and reference check;
        - everything alive now (torch, pytest's items, the reports of the cases before) is moved
          out of the garbage collector's reach (``gc.freeze``), after a young collection that
          frees the previous case's garbage cycles rather than freezing them. A full collection
          over all of it takes tens of milliseconds and lands on whichever case allocates at
          that moment; frozen only once per process, the objects each case adds stay in its
          reach (``benchmarks/reference_check_gc.py``: one full collection in 360 cases frozen
          once, none frozen before each). The collector's time per case is in ``seconds.gc``.
        """
        import torch  # imported by then

        if self._threads is None:
            self._threads = torch.get_num_threads()
        before = list(gc.callbacks)
        COLLECTOR_TIME.install()
        self._callbacks += [callback for callback in gc.callbacks if callback not in before]
        torch.set_num_threads(case_threads(case, self.cores, self.workers))
        freeze_survivors()
        self._frozen = True

    def restore(self) -> None:
        """Undo what :meth:`settle` changed: torch's threads as they were before the first case,
        the collector's clock removed if it was installed here, the frozen objects back in the
        collector's reach (``gc.unfreeze`` cannot tell whose they are: it thaws all of them)."""
        if self._threads is not None:
            import torch

            torch.set_num_threads(self._threads)
            self._threads = None
        if COLLECTOR_TIME._record in self._callbacks:
            COLLECTOR_TIME.uninstall()  # and its guard of Ctrl-C
        self._callbacks = []
        if self._frozen:
            gc.unfreeze()
            self._frozen = False
