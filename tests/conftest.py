"""Fixtures of the plugin's tests; the fake backend lives in fake_backend.py."""

from __future__ import annotations

import pytest
from fake_backend import TileRun

from pytest_tileconform.flashinfer.sources import FlashInferSources, FlashInferSourcesError, find_sources


@pytest.fixture
def tc(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> TileRun:
    """A pytester directory with the fake backend's conftest; CI unset so --tile-update may write."""
    monkeypatch.delenv("CI", raising=False)
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    # when this suite itself runs under -n, the in-process runs must not look like xdist workers
    monkeypatch.delenv("PYTEST_XDIST_WORKER", raising=False)
    monkeypatch.delenv("PYTEST_XDIST_WORKER_COUNT", raising=False)
    return TileRun(pytester)


@pytest.fixture(scope="session")
def generator_sources() -> FlashInferSources:
    """The installed FlashInfer's sources, with its kernel generator (skips without them)."""
    try:
        found = find_sources()
    except FlashInferSourcesError as exc:
        pytest.skip(str(exc))
    if found.generate_kernels_py is None:
        pytest.skip("FlashInfer sources come without generate_kernels.py")
    return found
