"""pytest plugin registering the FlashInfer CUTLASS dense GEMM backend (its own ``pytest11`` entry
point): its case kind and its backend, nothing of the core edited. It reads the FlashInfer sources
the FlashInfer MoE plugin's ``--tile-flashinfer-sources`` names, when that plugin is there."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from ..core.runoptions import RunOptions
    from ..matrix.kinds import CaseKind
    from .backend import DenseBackend


def pytest_tileconform_case_kinds() -> list[CaseKind]:
    from .axes import KIND

    return [KIND]


def pytest_tileconform_register_backends(config: pytest.Config, options: RunOptions) -> list[DenseBackend]:
    from .backend import DenseBackend

    sources = config.getoption("tile_flashinfer_sources", None)
    reporter = config.pluginmanager.getplugin("terminalreporter")

    def progress(message: str) -> None:
        if reporter is not None:
            reporter.write_line(f"tileconform (dense): {message}")

    return [DenseBackend(options, Path(sources) if sources else None, None, progress)]
