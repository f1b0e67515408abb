"""pytest plugin registering the FlashInfer CUTLASS dense GEMM backend (its own ``pytest11`` entry
point): its case kind and its backend, nothing of the core edited. It reads the FlashInfer sources
the FlashInfer MoE plugin's ``--tile-flashinfer-sources`` or ``--tile-flashinfer`` names, when that
plugin is there; a release that cannot be had stops this backend's cases rather than judging them
against installed sources the user did not ask for."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    import argparse

    from ..core.runoptions import RunOptions
    from ..matrix.kinds import CaseKind
    from .backend import DenseBackend


def pytest_tileconform_case_kinds() -> list[CaseKind]:
    from .axes import KIND

    return [KIND]


def pytest_tileconform_flashinfer_release_members() -> list[str]:
    """What this backend reads of a ``--tile-flashinfer`` wheel (declared through the MoE plugin's
    hook, which unpacks releases): the generator (:data:`.offered.GENERATOR`) and the bindings and
    templates it names, the autotuner's runners (:data:`.runners.GEMM_BASE`), and the headers a
    unit compiles against (:func:`.unit.nvcc_flags`: FlashInfer's, CUTLASS's, CCCL's, spdlog's)."""
    from .offered import GENERATOR
    from .runners import GEMM_BASE

    return [
        f"flashinfer/{GENERATOR.as_posix()}",
        f"flashinfer/{GEMM_BASE.as_posix()}",
        "flashinfer/data/csrc/*_gemm_cutlass*",  # <family>_gemm_cutlass*.cu and .jinja
        "flashinfer/data/include/",
        "flashinfer/data/cutlass/include/",
        "flashinfer/data/cutlass/tools/util/include/",
        "flashinfer/data/cccl/cub/",
        "flashinfer/data/cccl/libcudacxx/include/",
        "flashinfer/data/cccl/thrust/",
        "flashinfer/data/spdlog/include/",
    ]


def pytest_tileconform_register_backends(config: pytest.Config, options: RunOptions) -> list[DenseBackend]:
    from .backend import DenseBackend

    given = config.getoption("tile_flashinfer_sources", None)
    sources = Path(given) if given else None
    release = config.getoption("tile_flashinfer", None)
    ident = refusal = None
    if release:  # the MoE plugin resolved it already: this finds its cache entry
        from ..flashinfer.releases import ReleaseError, release_members, resolve_release
        from ..verdict import UnusableEnvironment

        try:
            resolved = resolve_release(release, options.cache_dir, members=release_members(config.hook))
            sources, ident = resolved.data_dir, resolved.ident
        except (ReleaseError, UnusableEnvironment) as exc:
            refusal = f"--tile-flashinfer {release}: {exc}"
    reporter = config.pluginmanager.getplugin("terminalreporter")

    def progress(message: str) -> None:
        if reporter is not None:
            reporter.write_line(f"tileconform (dense): {message}")

    return [DenseBackend(options, sources, progress, ident, refusal)]


@pytest.hookimpl(trylast=True)
def pytest_tileconform_add_commands(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """``tactics``, ``drift`` and ``export-blocklist --dense`` (:mod:`.commands.cli`): after the MoE
    plugin's, whose commands these join."""
    from .commands.cli import add_commands

    add_commands(subparsers)
