"""The garbage collector's time per case, and keeping its full collections off the cases."""

from __future__ import annotations

import gc
import os
import signal
import subprocess
import sys
import time
import weakref
from collections.abc import Callable

import pytest
from helpers.cases import make_case

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
        clock.uninstall()


def test_collector_time_of_one_generation() -> None:
    full = CollectorTime(generation=2)
    full.install()
    try:
        gc.collect(0)
        assert (full.collections, full.seconds) == (0, 0.0)
        gc.collect()
        assert full.collections == 1 and full.seconds > 0.0
    finally:
        full.uninstall()


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


ALLOCATING = """
import gc, pathlib, time
from pytest_tileconform.core.gctime import COLLECTOR_TIME

def test_allocates_until_interrupted():
    COLLECTOR_TIME.install()
    gc.set_threshold(1)  # a collection at nearly every allocation: the clock's callback runs all the time
    pathlib.Path("ready-" + __name__).write_text("")
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        junk = [[] for _ in range(10)]
        junk.append(junk)
"""


def _default_sigint() -> None:
    signal.signal(signal.SIGINT, signal.SIG_DFL)


@pytest.mark.parametrize("workers", [0, 2])
def test_ctrl_c_during_a_collection_stops_the_run_without_a_traceback(
    pytester: pytest.Pytester, workers: int
) -> None:
    """Ctrl-C (SIGINT to the process group, as a terminal sends it) while the clock's callback
    runs at nearly every allocation: CPython drops an exception raised in a gc callback after
    printing it, so the run went on and printed a KeyboardInterrupt traceback from gctime.py.
    Each run must stop, interrupted, without one (three runs: an unguarded callback loses most)."""
    pytester.makepyfile(test_a=ALLOCATING, test_b=ALLOCATING)
    args = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider"]
    args += ["-n", str(workers)] if workers else ["-p", "no:xdist", "test_a.py"]
    for _ in range(3):
        for ready in pytester.path.glob("ready-*"):
            ready.unlink()
        run = pytester.popen(
            args, stdin=subprocess.DEVNULL, preexec_fn=_default_sigint, start_new_session=True
        )
        deadline = time.monotonic() + 60
        while len(list(pytester.path.glob("ready-*"))) < max(1, workers):
            assert time.monotonic() < deadline and run.poll() is None, "the tests did not start"
            time.sleep(0.05)
        time.sleep(0.3)
        os.killpg(run.pid, signal.SIGINT)
        out, err = run.communicate(timeout=60)
        text = out.decode() + err.decode()
        assert "Exception ignored" not in text and "gctime.py" not in text, text
        assert "KeyboardInterrupt" in text and run.returncode == pytest.ExitCode.INTERRUPTED, text
