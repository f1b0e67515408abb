"""How many threads torch gets for a case's inputs and reference check."""

from __future__ import annotations

import gc
from collections.abc import Callable
from dataclasses import replace
from types import ModuleType

import pytest
import torch
from helpers.cases import make_case
from helpers.paths import SMOKE

from pytest_tileconform.compile.cache import available_cores
from pytest_tileconform.core.gctime import COLLECTOR_TIME
from pytest_tileconform.flashinfer.axes import MoeCase
from pytest_tileconform.flashinfer.backend import FlashInferBackend
from pytest_tileconform.flashinfer.settings import Settings
from pytest_tileconform.flashinfer.settling import MACS_PER_THREAD, case_threads

SM90_MATRIX = make_case(rows=[0, 1, 77, 300], n=384, k=512)  # 74 M multiply-adds
LARGE = make_case(rows=[512] * 8, n=4096, k=7168)


@pytest.mark.parametrize(
    ("case", "cores", "workers", "threads"),
    [
        (SM90_MATRIX, 16, 1, 4),  # small: 4 threads although 16 cores are the worker's
        (LARGE, 16, 1, 16),  # large: every core of the worker's share
        (LARGE, 16, 4, 4),
        (LARGE, 4, 8, 1),  # more workers than cores: still one each
        (SM90_MATRIX, 2, 1, 2),
        (make_case(rows=[3, 0, 5], n=16, k=32), 16, 1, 1),  # tiny: one
        (make_case(rows=[1], n=MACS_PER_THREAD, k=3), 64, 1, 3),
    ],
)
def test_case_threads(case: MoeCase, cores: int, workers: int, threads: int) -> None:
    assert case_threads(case, cores, workers) == threads


def test_settle_case_sets_torch_threads_per_case(
    backend_settings: Callable[..., Settings],
) -> None:
    backend = FlashInferBackend(replace(backend_settings(), worker_count=1), progress=lambda _m: None)
    try:
        for case in (LARGE, make_case(), LARGE):
            torch.set_num_threads(7)
            backend._settle_case(case)
            assert torch.get_num_threads() == case_threads(case, available_cores(), 1)
    finally:
        backend.finish()


def test_finish_restores_what_settling_changed(backend_settings: Callable[..., Settings]) -> None:
    """torch's threads as before the first case, the collector's clock gone, nothing frozen."""
    backend = FlashInferBackend(backend_settings(), progress=lambda _m: None)
    threads = torch.get_num_threads()
    torch.set_num_threads(3)
    clock_before = COLLECTOR_TIME._record in gc.callbacks
    try:
        backend._settle_case(make_case())  # a tiny problem: one thread
        backend._settle_case(LARGE)
        assert gc.get_freeze_count() > 0 and COLLECTOR_TIME._record in gc.callbacks
        backend.finish()
        assert torch.get_num_threads() == 3
        assert gc.get_freeze_count() == 0
        assert (COLLECTOR_TIME._record in gc.callbacks) == clock_before
        backend.finish()  # a second time changes nothing
        assert torch.get_num_threads() == 3
    finally:
        torch.set_num_threads(threads)


def test_check_threads_benchmark_times_each_thread_count(
    benchmark_script: Callable[[str], ModuleType],
) -> None:
    check_threads = benchmark_script("check_threads")
    matrix = SMOKE
    results = check_threads.time_checks(SM90_MATRIX.axes.problem, [1, 2], 0.0, matrix)
    assert [r["threads"] for r in results] == [1, 2]
    assert all(r["checks"] == 3 and 0 < r["median_ms"] <= r["max_ms"] for r in results)
