"""What the FlashInfer backend is told by its plugin's options: where cases are judged, where
builds go, how many run at once, which FlashInfer release the sources are, and which stages
after numerics a hardware case goes through."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

#: The ``--tile-device`` values the backend knows (``virtual:<arch>`` picks a profile).
DEVICES = ("auto", "hardware", "virtual", "compile")


@dataclass(frozen=True)
class Settings:
    device: str  # auto | hardware | compile | virtual | virtual:<arch>
    cache_dir: Path
    sources: Path | None
    jobs: int | None
    group: int | None  # most instantiations per translation unit (None: planner.DEFAULT_GROUP)
    timeout: float
    seed: int
    timing_iters: int  # hardware only: timed launcher calls after the checked run
    keep_runs: bool
    worker_count: int
    worker_index: int
    #: The ``--tile-flashinfer`` release the sources come from (its ident: version and wheel
    #: hash); every verdict names it as ``extra["flashinfer_release"]``. None: the installed
    #: FlashInfer or a sources folder.
    release: str | None = None
    #: Hardware only: replays of the case's run captured in a CUDA graph (the ``graph`` stage)
    #: and further runs after the checked one (the ``repeat`` stage); 0 leaves a stage out.
    graph_replays: int = 8
    repeats: int = 3
    #: Hardware only: the compute-sanitizer tool the ``sanitize`` stage runs (None: no stage).
    sanitize: str | None = None
    #: Seconds a worker may spend compiling before its first case runs (None: no limit); the
    #: cases whose units are not built by then are skipped, not failed.
    build_limit: float | None = None
