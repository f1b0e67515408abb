"""Fixtures of the plugin's tests; what they share besides fixtures is the ``helpers`` package."""

from __future__ import annotations

import dataclasses
import importlib.util
import os
from collections.abc import Callable
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
from helpers.fake_backend import TileRun
from helpers.matrix_memo import remember_loads
from helpers.paths import REPO
from helpers.stand_in_flashinfer import MATRIX, STAND_IN_CONFTEST, STAND_IN_NVCC, make_sources

from pytest_tileconform.core.runoptions import DeviceChoice
from pytest_tileconform.flashinfer.generator import load_generator
from pytest_tileconform.flashinfer.settings import Settings
from pytest_tileconform.flashinfer.sources import (
    ENV_SOURCES,
    FlashInferSources,
    FlashInferSourcesError,
    find_sources,
)


def pytest_configure(config: pytest.Config) -> None:
    """The suite builds into a cache of its own, never the user's (``~/.cache/pytest-tileconform``,
    whose entries a user's runs trust): ``TILECONFORM_CACHE_DIR`` is what the plugin, the commands
    and every pytester run (in process or not) read. It persists between runs, so the compile-heavy
    tests are warm the second time: ``.tileconform-test-cache/`` in the checkout, or
    ``TILECONFORM_TEST_CACHE_DIR``. Tests that name a cache of their own still set theirs. The
    checkout, not pytest's rootdir: a ``--tile-matrix`` value outside the checkout moves the
    rootdir to the matrix's folder (pytest reads it as a path before the plugin's options are
    known), and this conftest is loaded from the checkout either way, so runs of one matrix from
    two places built into two caches and the later found nothing of the earlier."""
    given = os.environ.get("TILECONFORM_TEST_CACHE_DIR")
    base = Path(given) if given else REPO / ".tileconform-test-cache"
    os.environ["TILECONFORM_CACHE_DIR"] = str(base / "builds")


@pytest.fixture(scope="session")
def benchmark_script() -> Callable[[str], ModuleType]:
    """Import ``benchmarks/NAME.py`` (the benchmarks are scripts, not a package)."""

    def load(name: str) -> ModuleType:
        path = REPO / "benchmarks" / f"{name}.py"
        spec = importlib.util.spec_from_file_location(name, path)
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        return module

    return load


@pytest.fixture
def remembered_matrices(monkeypatch: pytest.MonkeyPatch) -> None:
    """The commands under test load each shipped matrix once a session (:mod:`helpers.matrix_memo`)."""
    remember_loads(monkeypatch)


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
def sources() -> FlashInferSources:
    """The installed FlashInfer's sources (skips without them)."""
    try:
        return find_sources()
    except FlashInferSourcesError as exc:
        pytest.skip(str(exc))


@pytest.fixture(scope="session")
def generator(sources: FlashInferSources) -> ModuleType:
    """flashinfer/jit/gemm/cutlass/generate_kernels.py, loaded as a private package."""
    if sources.generate_kernels_py is None:
        pytest.skip("FlashInfer sources come without jit/gemm/cutlass/generate_kernels.py")
    return load_generator(sources)


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


@pytest.fixture
def backend_settings(tmp_path: Path) -> Callable[..., Settings]:
    """The FlashInfer backend's settings for a compile-only run in one process, one job, a cache
    under tmp_path; keyword arguments change any of them."""
    plain = Settings(
        device=DeviceChoice("compile"),
        cache_dir=tmp_path / "cache",
        sources=None,
        jobs=1,
        group=None,
        timeout=10.0,
        seed=0,
        timing_iters=0,
        keep_runs=False,
        worker_count=1,
        worker_index=0,
    )

    def settings(**changes: Any) -> Settings:
        if isinstance(changes.get("device"), str):
            changes["device"] = DeviceChoice.parse(changes["device"])
        return dataclasses.replace(plain, **changes)

    return settings


@pytest.fixture
def host(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> pytest.Pytester:
    """A pytester folder with the matrix, stand-in FlashInfer sources (TILECONFORM_FLASHINFER_
    SOURCES), a cache of its own, and the stand-in compiler's conftest."""
    for var in ("CI", "CUDA_VISIBLE_DEVICES", "PYTEST_XDIST_WORKER", "PYTEST_XDIST_WORKER_COUNT"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv(ENV_SOURCES, str(make_sources(pytester.path / "fi-data")))
    monkeypatch.setenv("TILECONFORM_CACHE_DIR", str(pytester.path / "cache"))
    (pytester.path / "m.yaml").write_text(MATRIX)
    (pytester.path / "stand_in_nvcc.py").write_text(STAND_IN_NVCC)
    pytester.makeconftest(STAND_IN_CONFTEST)
    return pytester
