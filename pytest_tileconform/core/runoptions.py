"""Options that mean the same for every backend: where verdicts come from, where builds are
cached, how many compile at once, how long a case may run, which stages a hardware run adds.

Each is declared here once, as an :class:`Option`: the pytest plugin registers it as
``--tile-<name>`` with its ini key ``tile_<name>`` (:mod:`.inikeys`; every option of the plugin
and its backends is declared this way, so none lacks its ini key) and a ``tileconform`` command
that takes it adds it as ``--<name>`` (:func:`add_command_option`), so all three refuse the same
values with the same words. The values a run settles on are handed to
every backend as one :class:`RunOptions` (:mod:`.runconfig`). Nothing here imports pytest: a
command's ``--help`` stays fast.
"""

from __future__ import annotations

import argparse
import functools
import math
import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

#: Where verdicts come from: ``auto`` (the GPU when it is the case's arch, else the case's
#: virtual profile), ``hardware``, ``virtual`` (each case's own arch profile; ``virtual:<arch>``
#: names one) or ``compile`` (compile only).
DEVICE_KINDS = ("auto", "hardware", "virtual", "compile")

#: compute-sanitizer's tools, as ``--tile-sanitize`` names them
SANITIZE_TOOLS = ("memcheck", "racecheck", "synccheck", "initcheck")

#: the most timing iterations and the seed range (torch's generator takes 64-bit seeds)
MAX_TIMING_ITERS = 1_000_000
MAX_SEED = 2**64 - 1
#: the most graph replays and repeats of one case
MAX_REPLAYS = 10_000


@dataclass(frozen=True)
class DeviceChoice:
    """``--tile-device`` as a value: its kind (:data:`DEVICE_KINDS`) and, for ``virtual:<arch>``,
    the one arch whose profile judges every case."""

    kind: str
    arch: str | None = None

    @classmethod
    def parse(cls, text: str) -> DeviceChoice:
        """``virtual:sm120`` -> ``DeviceChoice("virtual", "sm120")``; ValueError says why not."""
        kind, _, arch = text.partition(":")
        if kind not in DEVICE_KINDS or (arch and kind != "virtual"):
            raise ValueError(f"tileconform knows {', '.join(DEVICE_KINDS)} and virtual:<arch>")
        if arch:
            from ..virtual.profiles import ProfileError, builtin  # not before a virtual arch is named

            try:
                builtin(arch)
            except ProfileError as exc:
                raise ValueError(str(exc)) from None
        return cls(kind, arch or None)

    def __str__(self) -> str:
        return f"{self.kind}:{self.arch}" if self.arch else self.kind


#: The fewest seconds a case may be given to run: a harness starts, loads its unit and sets a case
#: up in about a second, so a shorter limit would report every case as hung.
MIN_RUN_SECONDS = 1.0
#: The most seconds of any limit (a week): past it a limit means none, and the waits it becomes
#: overflow the operating system's timers.
MAX_SECONDS = 7 * 24 * 3600.0
#: Parallel compiles per core of the host at most: each keeps a core busy and needs gigabytes of
#: memory, so more only wait, and the build plans a slot for each (its progress forecast).
JOBS_PER_CORE = 4


def _seconds(value: float) -> str | None:
    """0, nan and inf would never end a run, or end every one at once."""
    if not (math.isfinite(value) and value > 0):
        return "must be a finite number of seconds above 0"
    return None if value <= MAX_SECONDS else f"must be at most {MAX_SECONDS:,.0f} seconds (a week)"


def _run_seconds(value: float) -> str | None:
    if (why := _seconds(value)) is not None:
        return why
    if value < MIN_RUN_SECONDS:
        return f"must be at least {MIN_RUN_SECONDS:g} second: a harness needs about that to set a case up"
    return None


def _at_least_one(value: int) -> str | None:
    return None if value >= 1 else "must be at least 1"


def _jobs(value: int) -> str | None:
    if value < 1:
        return "must be at least 1"
    cores = os.cpu_count() or 1
    most = JOBS_PER_CORE * cores
    if value > most:
        return f"must be at most {most:,} ({JOBS_PER_CORE} per core of this host's {cores}): more only wait"
    return None


def _replays(value: int) -> str | None:
    return None if 0 <= value <= MAX_REPLAYS else f"must be between 0 and {MAX_REPLAYS:,}"


def _timing_iters(value: int) -> str | None:
    if value < 0:
        return "must be 0 or more"
    return None if value <= MAX_TIMING_ITERS else f"must be at most {MAX_TIMING_ITERS:,}"


def _seed(value: int) -> str | None:
    return None if 0 <= value <= MAX_SEED else "must be between 0 and 2**64-1"


def _sanitize_tool(value: str) -> str | None:
    return None if value in SANITIZE_TOOLS else f"must be one of {', '.join(SANITIZE_TOOLS)}"


def _accepted(_value: Any) -> str | None:
    return None


def not_empty(value: str) -> str | None:
    """An empty path or name would silently mean "the default" (or the current folder)."""
    return None if value.strip() else "must not be empty"


@dataclass(frozen=True)
class Option:
    """One option of the pytest plugin (``--tile-<name>`` and ini key ``tile_<name>``) that a
    ``tileconform`` command may take too (``--<name>``)."""

    name: str  # ``build-jobs``: pytest's ``--tile-build-jobs``, a command's ``--build-jobs``
    type: Callable[[str], Any] | None  # None: a switch
    default: Any  # the value when neither the command line nor an ini key gives one
    help: str
    metavar: str | None = None
    #: Why a value is refused (None: accepted); the caller says which option it was.
    refuse: Callable[[Any], str | None] = _accepted
    path: bool = False  # a relative path in an ini file is relative to that file
    #: Given any number of times (``--tile-matrix``); its ini key is a list of paths.
    many: bool = False

    @property
    def dest(self) -> str:
        """pytest's dest and the ini key: ``tile_build_jobs``."""
        return "tile_" + self.name.replace("-", "_")

    @property
    def flag(self) -> str:
        return "--tile-" + self.name


RUN_OPTIONS: tuple[Option, ...] = (
    Option(
        "cache-dir",
        str,
        None,
        "where compiled harnesses are cached (default: $TILECONFORM_CACHE_DIR or "
        "~/.cache/pytest-tileconform)",
        "DIR",
        not_empty,
        path=True,
    ),
    Option(
        "cache-trust",
        str,
        None,
        "whose build-cache entries are believed: owner (default: you and root), group:NAME "
        "(members of NAME share the cache) or any (no ownership check); env TILECONFORM_CACHE_TRUST",
        "owner|group:NAME|any",
        not_empty,
    ),
    Option(
        "cache-signing-key",
        str,
        None,
        "Ed25519 private key: sign every cache entry this session writes "
        "(env TILECONFORM_CACHE_SIGNING_KEY; needs the signing extra)",
        "PEM",
        not_empty,
        path=True,
    ),
    Option(
        "cache-verify-key",
        str,
        None,
        "Ed25519 public key: use only cache entries it verifies, build the others again "
        "(env TILECONFORM_CACHE_VERIFY_KEY; needs the signing extra)",
        "PEM",
        not_empty,
        path=True,
    ),
    Option(
        "cache-remote",
        str,
        None,
        "a team's remote build cache behind the local one, by URL: s3://BUCKET/PREFIX, "
        "https://HOST/PATH (read only), file:///PATH or any fsspec protocol; units found there are "
        "checked as local entries and used, units built here uploaded when you may write it "
        "(env TILECONFORM_CACHE_REMOTE; needs the remote extra)",
        "URL",
        not_empty,
    ),
    Option(
        "build-on",
        str,
        None,
        "compile the units on this Ray cluster instead of here, each landing in the remote build "
        "cache (--tile-cache-remote), which this run then reads (needs the ray extra)",
        "ray://HOST:PORT",
        not_empty,
    ),
    Option(
        "build-jobs",
        int,
        None,
        "parallel compiles (default: bounded by cores and free memory)",
        "N",
        _jobs,
    ),
    Option(
        "build-group",
        int,
        None,
        "most instantiations compiled together in one translation unit when many cases are "
        "built (default 36, the largest unit measured; 1: one per case); within it the size is "
        "chosen from the cores and the RAM each size needs",
        "N",
        _at_least_one,
    ),
    Option(
        "build-limit",
        float,
        None,
        "stop compiling after SECONDS: the cases built by then are judged, the others skipped "
        "(the units finished are cached, so a rerun goes on from them; default: no limit)",
        "SECONDS",
        _seconds,
    ),
    Option(
        "timeout",
        float,
        120.0,
        "per-case limit for running a harness (default: the ini key tile_timeout, else 120)",
        "SECONDS",
        _run_seconds,
    ),
    Option(
        "timing-iters",
        int,
        0,
        "on hardware, also time N back-to-back launcher calls with CUDA events after the "
        "checked run; the mean goes into each verdict as kernel_ms (default 0: no timing)",
        "N",
        _timing_iters,
    ),
    Option(
        "graph-replays",
        int,
        8,
        "on hardware, the graph stage: capture each case's run in a CUDA graph and replay it "
        "N times, checking D after each replay (default 8; 0: no graph stage)",
        "N",
        _replays,
    ),
    Option(
        "repeats",
        int,
        3,
        "on hardware, the repeat stage: run each case N more times; D must not change beyond "
        "what its epilogue's reduction order allows (default 3; 0: no repeat stage)",
        "N",
        _replays,
    ),
    Option(
        "sequence",
        int,
        0,
        "on hardware, the sequence stage: run each case N times back to back without host "
        "synchronization, then N times as FlashInfer's GEMM 1 -> GEMM 2 pair on one workspace "
        "and stream, then that pair captured in a CUDA graph and replayed N times; every D is "
        "compared with the checked run's on the device (default 0: no sequence stage)",
        "N",
        _replays,
    ),
    Option(
        "sanitize",
        str,
        None,
        "on hardware, the sanitize stage: run each case once more under compute-sanitizer "
        "with this tool; its report is kept next to that run's verdict.json",
        "|".join(SANITIZE_TOOLS),
        _sanitize_tool,
    ),
    Option("seed", int, 0, "input seed (default 0)", "N", _seed),
    Option(
        "keep-runs",
        None,
        False,
        "keep each case's run directory (inputs, D, verdict.json) for inspection",
    ),
)

_BY_NAME = {option.name: option for option in RUN_OPTIONS}


@dataclass(frozen=True)
class RunOptions:
    """What the core hands every backend it registers: the run's generic options, checked, and
    the pytest-xdist worker this process is (``worker_count`` 1, ``worker_index`` 0 without)."""

    device: DeviceChoice
    cache_dir: Path
    jobs: int | None
    group: int | None  # most instantiations per translation unit (None: the backend's default)
    timeout: float
    seed: int
    timing_iters: int  # hardware only: timed launcher calls after the checked run
    keep_runs: bool
    worker_count: int
    worker_index: int
    #: Hardware only: replays of the case's run captured in a CUDA graph (the ``graph`` stage)
    #: and further runs after the checked one (the ``repeat`` stage); 0 leaves a stage out.
    graph_replays: int = 8
    repeats: int = 3
    #: Hardware only: runs of each kind in the ``sequence`` stage (0 leaves it out).
    sequence: int = 0
    #: Hardware only: the compute-sanitizer tool the ``sanitize`` stage runs (None: no stage).
    sanitize: str | None = None
    #: Seconds a worker may spend compiling before its first case runs (None: no limit); the
    #: cases whose units are not built by then are skipped, not failed.
    build_limit: float | None = None
    #: The remote build cache's URL (None: the local cache alone) and the Ray cluster that
    #: compiles units into it (None: compiles run here).
    cache_remote: str | None = None
    build_on: str | None = None


def add_command_option(
    parser: argparse.ArgumentParser | argparse._ArgumentGroup, option: str | Option, help: str | None = None
) -> None:
    """``option`` (a run option's name, or any :class:`Option`) as a ``tileconform`` command's
    ``--<name>``: the same type, default and refusals as pytest's ``--tile-<name>``; a path
    option's value is a Path."""
    if isinstance(option, str):
        option = _BY_NAME[option]
    if option.type is None:
        parser.add_argument(f"--{option.name}", action="store_true", help=help or option.help)
        return
    parser.add_argument(
        f"--{option.name}",
        type=_command_type(option),
        default=option.default,
        metavar=option.metavar,
        help=help or option.help,
    )


@functools.cache
def _command_type(option: Option) -> Callable[[str], Any]:
    """The argparse type of ``option``: one function per option, so that every command taking
    it has the same."""
    convert = option.type
    assert convert is not None

    def checked(text: str) -> Any:
        value = convert(text)
        why = option.refuse(value)
        if why is not None:
            raise argparse.ArgumentTypeError(f"{text}: {why}")
        return Path(value) if option.path else value

    checked.__name__ = convert.__name__  # argparse's "invalid int value" names the type
    return checked


def parse_device(text: str) -> DeviceChoice:
    """An argparse type for a command's ``--device``, refused as pytest refuses ``--tile-device``."""
    try:
        return DeviceChoice.parse(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(f"{text!r}: {exc}") from None
