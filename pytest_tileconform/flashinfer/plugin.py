"""pytest plugin registering the FlashInfer CUTLASS MoE backend and its options."""

from __future__ import annotations

import contextlib
import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from ..compile.cache import default_cache_dir
from ..core.inikeys import add_ini_key, spelled
from .header import progress_line
from .sanitizer import MODES as SANITIZER_MODES

if TYPE_CHECKING:
    from ..matrix.cases import Case
    from ..verdict import Stage
    from .backend import FlashInferBackend


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("tileconform")
    group.addoption(
        "--tile-flashinfer-sources",
        default=None,
        metavar="DIR",
        help="FlashInfer kernel sources laid out like flashinfer/data "
        "(default: the installed flashinfer-python; env TILECONFORM_FLASHINFER_SOURCES)",
    )
    group.addoption(
        "--tile-flashinfer",
        default=None,
        metavar="VERSION|PATH",
        help="judge against this FlashInfer release instead of the installed one: a version "
        "(fetched once with pip download, sources only, into the cache), a local wheel or an "
        "unpacked folder",
    )
    group.addoption(
        "--tile-cache-dir",
        default=None,
        metavar="DIR",
        help="where compiled harnesses are cached (default: $TILECONFORM_CACHE_DIR "
        "or ~/.cache/pytest-tileconform)",
    )
    group.addoption(
        "--tile-cache-trust",
        default=None,
        metavar="owner|group:NAME|any",
        help="whose build-cache entries are believed: owner (default: you and root), group:NAME "
        "(members of NAME share the cache) or any (no ownership check); env TILECONFORM_CACHE_TRUST",
    )
    group.addoption(
        "--tile-cache-signing-key",
        default=None,
        metavar="PEM",
        help="Ed25519 private key: sign every cache entry this session writes "
        "(env TILECONFORM_CACHE_SIGNING_KEY; needs the signing extra)",
    )
    group.addoption(
        "--tile-cache-verify-key",
        default=None,
        metavar="PEM",
        help="Ed25519 public key: use only cache entries it verifies, build the others again "
        "(env TILECONFORM_CACHE_VERIFY_KEY; needs the signing extra)",
    )
    group.addoption(
        "--tile-build-jobs",
        type=int,
        default=None,
        metavar="N",
        help="parallel compiles (default: bounded by cores and free memory)",
    )
    group.addoption(
        "--tile-build-group",
        type=int,
        default=None,
        metavar="N",
        help="most instantiations compiled together in one translation unit when many cases are "
        "built (default 36, the largest unit measured; 1: one per case); within it the size is "
        "chosen from the cores and the RAM each size needs",
    )
    group.addoption(
        "--tile-build-limit",
        type=float,
        default=None,
        metavar="SECONDS",
        help="stop compiling after SECONDS: the cases built by then are judged, the others skipped "
        "(the units finished are cached, so a rerun goes on from them; default: no limit)",
    )
    group.addoption(
        "--tile-timeout",
        type=float,
        default=None,  # 120, unless the ini key tile_timeout says otherwise (core.inikeys)
        metavar="SECONDS",
        help="per-case limit for running a harness (default: the ini key tile_timeout, else 120)",
    )
    group.addoption(
        "--tile-timing-iters",
        type=int,
        default=0,
        metavar="N",
        help="on hardware, also time N back-to-back launcher calls with CUDA events after the "
        "checked run; the mean goes into each verdict as kernel_ms (default 0: no timing)",
    )
    group.addoption(
        "--tile-graph-replays",
        type=int,
        default=8,
        metavar="N",
        help="on hardware, the graph stage: capture each case's run in a CUDA graph and replay it "
        "N times, checking D after each replay (default 8; 0: no graph stage)",
    )
    group.addoption(
        "--tile-repeats",
        type=int,
        default=3,
        metavar="N",
        help="on hardware, the repeat stage: run each case N more times; D must not change beyond "
        "what its epilogue's reduction order allows (default 3; 0: no repeat stage)",
    )
    group.addoption(
        "--tile-sanitize",
        default=None,
        metavar="|".join(SANITIZER_MODES),
        help="on hardware, the sanitize stage: run each case once more under compute-sanitizer "
        "with this tool; its report is kept next to that run's verdict.json",
    )
    group.addoption("--tile-seed", type=int, default=0, metavar="N", help="input seed (default 0)")
    group.addoption(
        "--tile-keep-runs",
        action="store_true",
        default=False,
        help="keep each case's run directory (inputs, D, verdict.json) for inspection",
    )
    add_ini_key(parser, "tile_cache_dir", str, None, "compiled harness cache directory", path=True)
    add_ini_key(parser, "tile_timeout", float, 120.0, "per-case limit for running a harness, seconds")
    add_ini_key(parser, "tile_build_jobs", int, None, "parallel compiles")


#: the most timing iterations and the seed range (torch's generator takes 64-bit seeds)
MAX_TIMING_ITERS = 1_000_000
MAX_SEED = 2**64 - 1
#: the most graph replays and repeats of one case
MAX_REPLAYS = 10_000


def _check_options(config: pytest.Config) -> None:
    """Every option of this backend, checked once at startup: a bad value is one usage error
    (exit 4) that names the option (or the ini key it came from), not a failure of every case."""
    import math

    def bad(name: str, value: Any, why: str) -> pytest.UsageError:
        return pytest.UsageError(f"{spelled(config, name, value)}: {why}")

    for seconds_option in ("tile_timeout", "tile_build_limit"):
        seconds = config.getoption(seconds_option)
        if seconds is not None and not (math.isfinite(seconds) and seconds > 0):
            raise bad(seconds_option, seconds, "must be a finite number of seconds above 0")
    jobs = config.getoption("tile_build_jobs")
    if jobs is not None and jobs < 1:
        raise bad("tile_build_jobs", jobs, "must be at least 1")
    group = config.getoption("tile_build_group")
    if group is not None and group < 1:
        raise pytest.UsageError(f"--tile-build-group {group}: must be at least 1")
    iters = config.getoption("tile_timing_iters")
    if iters < 0:
        raise pytest.UsageError("--tile-timing-iters: must be 0 or more")
    if iters > MAX_TIMING_ITERS:
        raise pytest.UsageError(f"--tile-timing-iters {iters}: must be at most {MAX_TIMING_ITERS:,}")
    for option, spelling in (
        ("tile_graph_replays", "--tile-graph-replays"),
        ("tile_repeats", "--tile-repeats"),
    ):
        value = config.getoption(option)
        if not 0 <= value <= MAX_REPLAYS:
            raise pytest.UsageError(f"{spelling} {value}: must be between 0 and {MAX_REPLAYS:,}")
    mode = config.getoption("tile_sanitize")
    if mode is not None and mode not in SANITIZER_MODES:
        raise pytest.UsageError(f"--tile-sanitize {mode}: must be one of {', '.join(SANITIZER_MODES)}")
    seed = config.getoption("tile_seed")
    if not 0 <= seed <= MAX_SEED:
        raise pytest.UsageError(f"--tile-seed {seed}: must be between 0 and 2**64-1")
    cache = config.getoption("tile_cache_dir")
    if cache:
        path = Path(cache).expanduser()
        if path.exists() and not path.is_dir():
            raise bad("tile_cache_dir", cache, "exists and is not a folder")
        try:
            path.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise bad("tile_cache_dir", cache, f"cannot be created: {exc.strerror or exc}") from None
        if not os.access(path, os.W_OK | os.X_OK):
            raise bad("tile_cache_dir", cache, "is not writable")
    sources = config.getoption("tile_flashinfer_sources")
    if sources and not Path(sources).expanduser().is_dir():
        raise pytest.UsageError(f"--tile-flashinfer-sources {sources}: no such folder")


def _cache_trust(config: pytest.Config) -> None:
    """The cache's trust options become the environment every build in this process and its
    xdist workers reads (:mod:`..compile.trust`: the cache, the host builds, the probe), checked
    here so that a bad value is one usage error."""
    from ..compile.trust import SIGNING_KEY_ENV, TRUST_ENV, VERIFY_KEY_ENV, TrustPolicy, TrustSettingError

    for option, variable in (
        ("tile_cache_trust", TRUST_ENV),
        ("tile_cache_signing_key", SIGNING_KEY_ENV),
        ("tile_cache_verify_key", VERIFY_KEY_ENV),
    ):
        value = config.getoption(option)
        if value is not None:
            if variable != TRUST_ENV and not Path(value).is_file():
                raise pytest.UsageError(f"--{option.replace('_', '-')} {value}: no such file")
            os.environ[variable] = str(Path(value).resolve()) if variable != TRUST_ENV else value
    try:
        TrustPolicy.from_env()
    except TrustSettingError as exc:
        raise pytest.UsageError(str(exc)) from None


def pytest_tileconform_register_backends(config: pytest.Config) -> list[FlashInferBackend]:
    from .backend import DEVICES, FlashInferBackend, Settings

    _check_options(config)
    device = config.getoption("tile_device")
    kind, _, arch = device.partition(":")
    if kind not in DEVICES or (arch and kind != "virtual"):
        raise pytest.UsageError(
            f"--tile-device {device!r}: the {FlashInferBackend.name} backend knows {', '.join(DEVICES)} "
            "and virtual:<arch>"
        )
    if arch:
        from ..virtual.profiles import ProfileError, builtin

        try:
            builtin(arch)
        except ProfileError as exc:
            raise pytest.UsageError(f"--tile-device {device!r}: {exc}") from None
    _cache_trust(config)
    workerinput = getattr(config, "workerinput", None)
    cache_option = config.getoption("tile_cache_dir")
    cache_dir = Path(cache_option) if cache_option else default_cache_dir()
    sources_option = config.getoption("tile_flashinfer_sources")
    sources = Path(sources_option) if sources_option else None
    release_option = config.getoption("tile_flashinfer")
    release_ident = None
    if release_option:
        if sources_option:
            raise pytest.UsageError(
                "--tile-flashinfer and --tile-flashinfer-sources both name FlashInfer sources; give one"
            )
        from .releases import ReleaseError, resolve_release

        try:
            release = resolve_release(release_option, cache_dir)
        except ReleaseError as exc:
            raise pytest.UsageError(f"--tile-flashinfer {release_option}: {exc}") from None
        from .compat import incompatibility

        reason = incompatibility(release.data_dir)
        if reason is not None:
            raise pytest.UsageError(
                f"--tile-flashinfer {release_option}: {release.ident} cannot be judged by this "
                f"harness: {reason}"
            )
        release_ident = release.ident
        sources = release.data_dir
    settings = Settings(
        device=device,
        cache_dir=cache_dir,
        sources=sources,
        jobs=config.getoption("tile_build_jobs"),
        group=config.getoption("tile_build_group"),
        timeout=config.getoption("tile_timeout"),
        seed=config.getoption("tile_seed"),
        timing_iters=config.getoption("tile_timing_iters"),
        keep_runs=config.getoption("tile_keep_runs"),
        worker_count=int(workerinput["workercount"]) if workerinput else 1,
        worker_index=int(workerinput["workerid"].removeprefix("gw")) if workerinput else 0,
        release=release_ident,
        graph_replays=config.getoption("tile_graph_replays"),
        repeats=config.getoption("tile_repeats"),
        sanitize=config.getoption("tile_sanitize"),
        build_limit=config.getoption("tile_build_limit"),
    )
    worker = workerinput["workerid"] if workerinput else ""

    capture = config.pluginmanager.getplugin("capturemanager")

    def progress(message: str) -> None:
        """Compile progress goes to the terminal live, past pytest's output capture, each
        message a line of its own (:func:`.header.progress_line`)."""
        line = f"tileconform{'[' + worker + ']' if worker else ''}: {message}"
        reporter = None if worker else config.pluginmanager.getplugin("terminalreporter")
        with capture.global_and_fixture_disabled() if capture else contextlib.nullcontext():
            progress_line(reporter, line)

    def before_run(case: Case, run_dir: Path) -> None:
        config.hook.pytest_tileconform_before_run(config=config, case=case, run_dir=run_dir)

    return [FlashInferBackend(settings, progress, before_run)]


def pytest_tileconform_host_fingerprint(config: pytest.Config) -> dict[str, Any]:
    """FlashInfer's part of the host fingerprint: its version (distribution metadata, flashinfer is
    not imported) and the nvcc that compiles the harnesses."""
    import importlib.metadata

    from .sources import FlashInferSourcesError, find_cuda_home, nvcc_build

    try:
        version: str | None = importlib.metadata.version("flashinfer-python")
    except importlib.metadata.PackageNotFoundError:
        version = None
    try:
        nvcc: str | None = nvcc_build(find_cuda_home())
    except (FlashInferSourcesError, IndexError):
        nvcc = None
    return {"nvcc": nvcc, "flashinfer": version}


def pytest_report_header(config: pytest.Config) -> list[str] | None:
    """How this run's FlashInfer cases will be judged and built (:mod:`.header`); printed by
    the process that owns the terminal (the xdist controller), before anything compiles."""
    from .header import report_header

    return report_header(config)


def pytest_tileconform_judged_through(config: pytest.Config, case: Case) -> Stage | None:
    """How far this backend will judge ``case`` here, from the device it would use (no compile,
    no device initialisation): a virtual device stops at launch, so such cases get the
    ``tileconform_unrun`` marker at collection."""
    from ..backend import UnusableEnvironment
    from ..core.items import SESSION_KEY
    from ..verdict import NotJudgeable, Stage
    from . import NAME
    from .backend import FlashInferBackend

    if case.backend != NAME:
        return None
    backend = config.stash[SESSION_KEY].registry[NAME]
    if not isinstance(backend, FlashInferBackend):
        return None
    try:
        mode = backend.device_for(case.arch, case.sm)
    except (NotJudgeable, UnusableEnvironment):
        return None
    return {"hardware": Stage.NUMERICS, "virtual": Stage.LAUNCH, "compile": Stage.COMPILE}[mode]
