"""The garbage collector's time per case, and keeping its full collections off the cases."""

from __future__ import annotations

import gc
import weakref
from collections.abc import Callable

from test_reference import make_case

from pytest_tileconform.core.gctime import COLLECTOR_TIME, CollectorTime
from pytest_tileconform.flashinfer.backend import FlashInferBackend
from pytest_tileconform.flashinfer.settings import Settings


class Node:
    """An object that can be part of a reference cycle."""

    def __init__(self) -> None:
        self.other: Node | None = None


def test_collector_time_counts_collections() -> None:
    clock = CollectorTime()
    clock.install()
    clock.install()  # once only
    try:
        assert gc.callbacks.count(clock._record) == 1
        assert clock.seconds == 0.0
        gc.collect()
        first = clock.seconds
        assert first > 0.0
        gc.collect()
        assert clock.seconds > first
    finally:
        gc.callbacks.remove(clock._record)


def test_collector_time_of_one_generation() -> None:
    full = CollectorTime(generation=2)
    full.install()
    try:
        gc.collect(0)
        assert (full.collections, full.seconds) == (0, 0.0)
        gc.collect()
        assert full.collections == 1 and full.seconds > 0.0
    finally:
        gc.callbacks.remove(full._record)


def test_settle_case_freezes_survivors_and_frees_cycles(
    backend_settings: Callable[..., Settings],
) -> None:
    backend = FlashInferBackend(backend_settings(), progress=lambda _msg: None)
    survivor = [Node() for _ in range(100)]
    a, b = Node(), Node()
    a.other, b.other = b, a  # a garbage cycle once the names go
    cycle = weakref.ref(a)
    del a, b
    frozen_before = gc.get_freeze_count()
    try:
        backend._settle_case(make_case())
        assert cycle() is None  # freed by the young collection, not frozen
        assert gc.get_freeze_count() >= frozen_before + len(survivor)
        assert COLLECTOR_TIME._record in gc.callbacks
        later = [Node() for _ in range(100)]  # what a case leaves alive: pytest's report ...
        frozen_before = gc.get_freeze_count()
        backend._settle_case(make_case())  # every case, not once per process
        assert gc.get_freeze_count() >= frozen_before + len(later)
        assert gc.callbacks.count(COLLECTOR_TIME._record) == 1
    finally:
        backend.finish()
