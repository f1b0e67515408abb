"""What the FlashInfer backend needs of the host before it can judge anything, each found or
refused with one line that says what to do (:class:`..verdict.UnusableEnvironment`).

Every case is compiled with nvcc from FlashInfer's sources, the virtual runtime and the case
runner with the host's C++ compiler, so without any of them no case can be judged; and a
virtual device of one arch cannot load another arch's code (the harness refuses it at setup,
as a GPU of that arch would), so ``--tile-device virtual:<arch>`` judges only that arch's cases.
A compile that failed for the host's sake (killed by the out-of-memory killer, out of memory or
disk space, a tool missing: :mod:`..compile.failure`) is the host's doing too: nothing is known
of those cases, and the same command would fail again until the cause is removed.
"""

from __future__ import annotations

import importlib.metadata
import os
import tempfile
from collections.abc import Iterable, Sequence
from pathlib import Path

from ..archs import arch_order
from ..compile.failure import Cause, Failure
from ..compile.hostbuild import HostBuildError, compiler_id, cxx
from ..core.runoptions import DeviceChoice
from ..verdict import UnusableEnvironment
from .settings import Settings
from .sources import (
    DISTRIBUTION,
    ENV_SOURCES,
    FlashInferSources,
    FlashInferSourcesError,
    find_cublas_include,
    find_cuda_home,
    find_sources,
    nvcc_build,
)

PREFIX = "tileconform: "
#: What every toolkit message ends with: why it matters, and what still works without one.
NEEDS_NVCC = "every case is compiled with nvcc (--collect-only lists the cases without one)"
LAYOUT = "a folder laid out like flashinfer/data (csrc/, cutlass/, include/)"


def check_device(device: DeviceChoice, archs: Iterable[str]) -> None:
    """``--tile-device virtual:<arch>`` with cases of other ``archs``: their code cannot be
    loaded by that profile, as it could not by a GPU of that arch."""
    arch = device.arch
    others = sorted({a for a in archs if a != arch}, key=arch_order)
    if device.kind != "virtual" or not arch or not others:
        return
    raise UnusableEnvironment(
        f"{PREFIX}--tile-device {device} cannot judge {', '.join(others)} cases: a virtual "
        f"{arch} device loads only {arch} code, as an {arch} GPU would; use --tile-device "
        f"virtual to judge each case on its own arch's profile, or --tile-arch {arch} to run "
        f"only the {arch} cases"
    )


def _installed_version() -> str | None:
    try:
        return importlib.metadata.version(DISTRIBUTION)
    except importlib.metadata.PackageNotFoundError:
        return None


def usable_sources(settings: Settings) -> FlashInferSources:
    """FlashInfer's sources as the options name them (:func:`.sources.find_sources`)."""
    try:
        return find_sources(settings.sources)
    except FlashInferSourcesError as exc:
        raise UnusableEnvironment(_sources_message(settings, exc)) from None


def _sources_message(settings: Settings, exc: FlashInferSourcesError) -> str:
    explicit = settings.sources if settings.sources is not None else os.environ.get(ENV_SOURCES)
    installed = _installed_version()
    if not explicit:
        if installed is None:
            return (
                f"{PREFIX}FlashInfer's sources not found: {DISTRIBUTION} is not installed; "
                f"pip install {DISTRIBUTION}, or name its sources with --tile-flashinfer VERSION "
                f"(fetched once, nothing installed) or --tile-flashinfer-sources DIR ({LAYOUT})"
            )
        return (
            f"{PREFIX}{exc}; reinstall {DISTRIBUTION} {installed}, or name other sources with "
            "--tile-flashinfer VERSION"
        )
    if settings.release is not None:
        origin = f"--tile-flashinfer {settings.release}"
    elif settings.sources is not None:
        origin = f"--tile-flashinfer-sources {explicit}"
    else:
        origin = f"${ENV_SOURCES}={explicit}"
    root = Path(explicit).expanduser()
    if not root.is_dir():
        problem = "no such folder"
    else:
        probe = FlashInferSources(root.resolve(), "")
        required = [probe.launcher_inl, *probe.common_sources, *probe.cutlass_include_dirs]
        missing = [p for p in required if not p.exists()]
        first = missing[0].relative_to(probe.root) if missing else "?"
        more = f" and {len(missing) - 1} more" if len(missing) > 1 else ""
        problem = f"not FlashInfer's sources ({first}{more} missing)"
    fallback = f", or leave it out to use the installed {DISTRIBUTION} {installed}" if installed else ""
    return f"{PREFIX}{origin}: {problem}; it must name {LAYOUT}{fallback}"


def usable_toolkit() -> tuple[Path, str]:
    """The CUDA toolkit (:func:`.sources.find_cuda_home`) and its nvcc's build line; refused
    when it is missing, its nvcc does not run or its cuBLAS headers are missing."""
    try:
        home = find_cuda_home()
    except FlashInferSourcesError as exc:
        raise UnusableEnvironment(_toolkit_message(exc)) from None
    try:
        build = nvcc_build(home)
    except FlashInferSourcesError as exc:
        raise UnusableEnvironment(f"{PREFIX}{exc}; {NEEDS_NVCC}") from None
    try:
        find_cublas_include(home)
    except FlashInferSourcesError as exc:
        raise UnusableEnvironment(f"{PREFIX}{_first_sentence(str(exc))}: pip install nvidia-cublas") from None
    return home, build


def _toolkit_message(exc: FlashInferSourcesError) -> str:
    for var in ("CUDA_HOME", "CUDA_PATH"):  # the order find_cuda_home reads them in
        if value := os.environ.get(var):
            return (
                f"{PREFIX}${var}={value} is not a CUDA toolkit (no bin/nvcc and "
                f"include/cuda_runtime.h in it): set {var} to the toolkit's folder, or unset it "
                f"to use the nvcc on PATH; {NEEDS_NVCC}"
            )
    return f"{PREFIX}{exc}; {NEEDS_NVCC}"


def _first_sentence(text: str) -> str:
    return text.split("; ")[0].split(". ")[0]


#: What a path nvcc is given may not hold: nvcc runs its passes through a shell with paths in
#: double quotes (so ``"``, ``$`` and a backquote are the shell's), and a line break cannot be
#: written into the build's ninja file. Spaces, single quotes and the rest are fine.
PATH_UNSAFE = '"$`\n\r'


def usable_paths(paths: dict[str, tuple[Path, str]]) -> None:
    """Refuse a path of the build (what it is: its path and what to change) holding a character
    of :data:`PATH_UNSAFE`, before anything is compiled from it."""
    for what, (path, change) in paths.items():
        found = sorted({c for c in str(path) if c in PATH_UNSAFE})
        if found:
            shown = " ".join(repr(c) for c in found)
            raise UnusableEnvironment(
                f"{PREFIX}{what} {str(path)!r} holds {shown}, which a build cannot pass to nvcc (it "
                f"runs its passes through a shell): {change}"
            )


def usable_host_compiler() -> None:
    """The C++ compiler that builds the virtual runtime and the case runner (``$CXX``, g++)."""
    try:
        compiler_id(cxx())
    except HostBuildError as exc:
        raise UnusableEnvironment(f"{PREFIX}{exc}; install g++ or set CXX to a C++17 compiler") from None


def compile_failed_message(failures: Sequence[Failure], jobs: int, ram_bytes: int, cache_dir: Path) -> str:
    """Compiles that failed for the run's sake (:mod:`..compile.failure`: none was cached) as
    one line: the cause of the first, its compiler's words and what to change. ``jobs``
    compiles ran at a time on the host, each needing up to ``ram_bytes`` by the RAM model
    (:func:`.planner.compile_ram`)."""
    first = failures[0]
    count = sum(failure.cause is first.cause for failure in failures)
    fewer = f"fewer at once (--tile-build-jobs {max(1, jobs // 2)}) or " if jobs > 1 else ""
    load = f"{jobs} ran at a time, each estimated at up to {ram_bytes / 1e9:.1f} GB"
    kept = "what compiled is cached, these were not"
    if first.cause is Cause.SIGNAL:
        what = f"signal {first.signal}" if first.signal is not None else "a signal"
        cause = ", likely out of memory" if first.signal in (None, 9) else ""
        text = (
            f"{count} compile(s) were killed ({what}{cause}; {load}): rerun with {fewer}smaller "
            f"units (--tile-build-group 1), or with more memory free; {kept}"
        )
    elif first.cause is Cause.MEMORY:
        text = (
            f"{count} compile(s) ran out of memory ({first.line}; {load}): rerun with {fewer}smaller "
            "units (--tile-build-group 1), or with more memory (a limit such as ulimit -v or a "
            f"container's); {kept}"
        )
    elif first.cause is Cause.SPACE:
        text = (
            f"{count} compile(s) ran out of disk space ({first.line}): free space where nvcc writes "
            f"its temporary files (TMPDIR, now {tempfile.gettempdir()}) and in the build cache "
            f"({cache_dir}), or point TMPDIR or --tile-cache-dir at a disk with room; {kept}"
        )
    elif first.cause is Cause.TOOL:
        text = (
            f"{count} compile(s) could not run a tool or read a file they need ({first.line}): check "
            "the CUDA toolkit (CUDA_HOME, or nvcc on PATH) and the host compiler nvcc runs (g++ on "
            f"PATH); {kept}"
        )
    else:
        text = (
            f"{count} compile(s) failed without a diagnostic of the kernel's source ({first.line}), "
            f"so they are no verdict: fix what that line names and rerun; {kept}"
        )
    others = (
        f" ({len(failures) - count} more failed for another cause of this host)"
        if count < len(failures)
        else ""
    )
    return f"{PREFIX}{text}{others}"
