"""What the FlashInfer backend tells the terminal: its lines of pytest's header, and its build
progress.

The header says how each arch's cases will be judged here, which FlashInfer and nvcc build
them, where the build cache is and how much of the run it already holds. Everything is looked
up, nothing built, and CUDA is not initialised (the GPU, if any, is asked through nvidia-smi),
so the controller can say it before the first compile. A host that cannot judge anything still
gets its header (what is missing reads as such); the one-line error that stops the session
comes after collection (:mod:`.environment`).
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from typing import TYPE_CHECKING

import pytest

from ..compile.hostbuild import HostBuildError
from ..verdict import NotJudgeable, UnusableEnvironment
from . import NAME
from .axes import MoeCase
from .environment import PREFIX, usable_toolkit

if TYPE_CHECKING:
    from .backend import FlashInferBackend


def devices(backend: FlashInferBackend, cases: Sequence[MoeCase]) -> str:
    """``sm90 on hardware (NVIDIA H200, CC 9.0), sm120 on the virtual device (sm120 profile,
    judged through launch)``: per arch of ``cases``, what will judge them here."""
    archs = {case.arch: case.sm for case in cases}
    parts = []
    for arch, sm in sorted(archs.items(), key=lambda item: item[1]):
        try:
            mode = backend.device_for(arch, sm)
        except NotJudgeable:
            gpu = backend.gpu
            parts.append(f"{arch} skipped ({f'the GPU is {gpu.describe()}' if gpu else 'no GPU'})")
            continue
        except UnusableEnvironment:
            parts.append(f"{arch} not judgeable on --tile-device {backend.settings.device}")
            continue
        if mode == "hardware":
            gpu = backend.gpu
            parts.append(f"{arch} on hardware ({gpu.describe() if gpu else '?'})")
        elif mode == "virtual":
            parts.append(f"{arch} on the virtual device ({arch} profile, judged through launch)")
        else:
            parts.append(f"{arch} compile only")
    return ", ".join(parts)


def cached(backend: FlashInferBackend, cases: Sequence[MoeCase]) -> tuple[int, int]:
    """How many of ``cases`` that would be compiled here are built already, of how many."""
    found = [built for case in cases if (built := backend.is_built(case)) is not None]
    return sum(found), len(found)


def header_lines(backend: FlashInferBackend, cases: Sequence[MoeCase], narrowed: bool) -> list[str]:
    """Two lines: devices and the cache; FlashInfer and nvcc. ``narrowed``: -k or -m will
    deselect some of ``cases`` after this is printed (the controller has not collected yet)."""
    cache_dir = backend.settings.cache_dir
    try:
        sources = backend.sources
        flashinfer = f"FlashInfer {sources.version}"
        if backend.settings.release is not None:
            flashinfer += f" (--tile-flashinfer {backend.settings.release})"
        flashinfer += f" from {sources.root}"
    except UnusableEnvironment:
        flashinfer = "FlashInfer: sources not found"
    try:
        home, build = usable_toolkit()
        nvcc = f"nvcc {build.removeprefix('Build ')} ({home})"
    except UnusableEnvironment:
        nvcc = "nvcc: no usable CUDA toolkit"
    try:
        have, total = cached(backend, cases)
    except (UnusableEnvironment, HostBuildError):
        have = total = 0  # nothing can be compiled here
    store = f"build cache {cache_dir}"
    if remote := backend.settings.cache_remote:  # what is counted below is the local tier's
        farm = f", units compiled on {backend.settings.build_on}" if backend.settings.build_on else ""
        store += f" before the remote tier {remote}{farm}"
    if total:
        scope = " (before -k/-m)" if narrowed else ""
        store += f": {have} of {total} case(s) to compile are built{scope}"
    return [f"{PREFIX}{devices(backend, cases)}; {store}", f"{PREFIX}{flashinfer}; {nvcc}"]


def report_header(config: pytest.Config) -> list[str] | None:
    """:func:`header_lines` for the FlashInfer cases this run selects (after --tile-arch and
    --tile-shard); None when it has none."""
    from ..core.items import SESSION_KEY
    from ..plugin import SHARD_KEY
    from .backend import FlashInferBackend

    session = config.stash.get(SESSION_KEY, None)
    if session is None or NAME not in session.registry.names():
        return None
    backend = session.registry[NAME]
    shard = config.stash.get(SHARD_KEY, None)
    cases = [c for c in session.all_cases() if c.backend == NAME and (shard is None or shard.owns(c.id))]
    if not cases or not isinstance(backend, FlashInferBackend):
        return None
    narrowed = bool(config.option.keyword or config.option.markexpr)
    return header_lines(backend, cases, narrowed)


def progress_line(reporter: pytest.TerminalReporter | None, line: str) -> None:
    """One line of build progress on a line of its own, with nothing blank around it.

    Through pytest's terminal writer, ending the results line it may be in the middle of (a
    path and its dots, a -v location, -q's dots). Without -v pytest writes a case's letter
    where the line is, so the line is ended here and the letters go on below it. With -v the
    line is left open: pytest begins the case's line anew (it is told its line is gone) with a
    newline, which ends this one where a line ended here would leave it blank. An xdist worker
    has no terminal of its own (its stderr is the controller's, where a collection has just
    ended its line), so it writes whole lines to stderr."""
    if reporter is None:
        print(line, file=sys.stderr, flush=True)
        return
    writer = reporter._tw
    if writer.width_of_current_line:
        writer.line()
    writer.write(line, flush=True)
    if reporter.showlongtestinfo:
        reporter.currentfspath = None
    else:
        writer.line()
