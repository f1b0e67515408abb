"""pytest plugin registering the FlashInfer CUTLASS dense GEMM backend (its own ``pytest11`` entry
point): its case kind and its backend, nothing of the core edited. It reads the FlashInfer sources
the FlashInfer MoE plugin's ``--tile-flashinfer-sources`` names, when that plugin is there; its
``--tile-flashinfer`` releases carry no dense templates, so a dense case refuses to be judged
against installed sources the user did not ask for."""

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
    release = config.getoption("tile_flashinfer", None)
    reporter = config.pluginmanager.getplugin("terminalreporter")

    def progress(message: str) -> None:
        if reporter is not None:
            reporter.write_line(f"tileconform (dense): {message}")

    refusal = None
    if release:
        refusal = (
            f"--tile-flashinfer {release}: a release's wheel is unpacked without FlashInfer's dense GEMM "
            "templates and generator (flashinfer/releases.py MEMBERS); give that release's sources "
            "with --tile-flashinfer-sources instead"
        )
    return [DenseBackend(options, Path(sources) if sources else None, refusal, progress)]
