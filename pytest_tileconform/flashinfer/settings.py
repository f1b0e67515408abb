"""What the FlashInfer backend is told: the run's options every backend reads the same way
(:class:`..core.runoptions.RunOptions`: device, build cache, compiles at once, timeout, the
stages after numerics a hardware case goes through) and its own plugin's, which FlashInfer
release the sources are."""

from __future__ import annotations

from dataclasses import dataclass, fields
from pathlib import Path

from ..core.runoptions import RunOptions


@dataclass(frozen=True)
class Settings(RunOptions):
    #: FlashInfer's sources laid out like flashinfer/data (None: the installed flashinfer-python).
    sources: Path | None = None
    #: The ``--tile-flashinfer`` release the sources come from (its ident: version and wheel
    #: hash); every verdict names it as ``extra["flashinfer_release"]``. None: the installed
    #: FlashInfer or a sources folder.
    release: str | None = None

    @classmethod
    def of(cls, options: RunOptions, sources: Path | None, release: str | None) -> Settings:
        return cls(
            **{f.name: getattr(options, f.name) for f in fields(options)}, sources=sources, release=release
        )
