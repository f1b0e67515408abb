"""How many threads torch gets for a case's inputs and reference check."""

from __future__ import annotations

import gc
from collections.abc import Callable, Iterator
from dataclasses import replace

import pytest
import torch

from pytest_tileconform.buildcache import available_cores
from pytest_tileconform.flashinfer.backend import (
    CASE_THREADS,
    FlashInferBackend,
    Settings,
    case_threads,
)


@pytest.mark.parametrize(
    ("cores", "workers", "threads"),
    [
        (16, 1, CASE_THREADS),  # one worker on a large host: capped, not one per core
        (16, 8, 2),  # each worker its share
        (2, 1, 2),
        (4, 8, 1),  # more workers than cores: still one each
        (1, 1, 1),
    ],
)
def test_case_threads(cores: int, workers: int, threads: int) -> None:
    assert case_threads(cores, workers) == threads


@pytest.fixture
def torch_threads() -> Iterator[None]:
    before = torch.get_num_threads()
    yield
    torch.set_num_threads(before)
    gc.unfreeze()  # what settling froze


def test_settle_case_sets_torch_threads(
    backend_settings: Callable[..., Settings], torch_threads: None
) -> None:
    for workers in (1, 64):
        torch.set_num_threads(7)
        backend = FlashInferBackend(
            replace(backend_settings(), worker_count=workers), progress=lambda _m: None
        )
        backend._settle_case()
        assert torch.get_num_threads() == case_threads(available_cores(), workers)
