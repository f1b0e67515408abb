"""pytest-tileconform: options and hooks. The logic lives in the modules named for what they do."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

from . import newhooks
from .archs import KNOWN
from .core.devices import gpu_for_worker, visible_gpus
from .core.environment import EnvironmentGuard
from .core.inikeys import add_options, check_options
from .core.inikeys import resolve as resolve_ini_keys
from .core.interrupt import TerminateAsInterrupt
from .core.items import SESSION_KEY, UNRUN_MARKER, MatrixFile, TileCase
from .core.matrixargs import OnlyMatrices, collection_args
from .core.recorder import Recorder
from .core.runconfig import add_run_options, run_options
from .core.runoptions import Option, not_empty
from .core.session import TileSession, refuse_max_cases
from .core.unrun_report import UnrunReporting, is_unrun
from .matrix.bounds import MAX_CASES
from .matrix.shard import Shard, ShardSpecError
from .verdict import UNRUN

SHARD_KEY = pytest.StashKey[Shard]()


def pytest_addhooks(pluginmanager: pytest.PytestPluginManager) -> None:
    pluginmanager.add_hookspecs(newhooks)


#: The options of a pytest run that are no backend's business: which cases, what to do with
#: their verdicts. Declared as the run options are (:mod:`.core.runoptions`), so each is an ini
#: key too (:mod:`.core.inikeys`).
SESSION_OPTIONS: tuple[Option, ...] = (
    Option(
        "matrix",
        str,
        [],
        "run the cases of this YAML tile matrix (repeatable); replaces testpaths",
        "PATH",
        many=True,
    ),
    Option(
        "arch",
        str,
        None,
        "only cases of these architectures, comma-separated (e.g. sm90,sm120)",
        "ARCHS",
    ),
    Option(
        "device",
        str,
        "auto",
        "where verdicts come from: auto (hardware if the case's arch is present), "
        "hardware, virtual (each case's own arch profile) or virtual:<arch> (default auto)",
        "DEVICE",
    ),
    Option("update", None, False, "rewrite the expectations of the cases that ran to the observed verdicts"),
    Option("update-force", None, False, "allow --tile-update when the CI environment variable is set"),
    Option(
        "require-run",
        None,
        False,
        f"fail an expected pass whose kernel did not run (a virtual device judges through "
        f"launch), instead of reporting it as {UNRUN}: a CI gate that only a GPU run may pass",
    ),
    Option("report", str, None, "write every case's verdict to this JSON file", "PATH", not_empty, path=True),
    Option(
        "max-cases",
        int,
        None,
        f"refuse a matrix file that expands to more than N cases (default {MAX_CASES:,})",
        "N",
        refuse_max_cases,
    ),
    Option(
        "shard",
        str,
        None,
        "run only shard I of N of the matrix cases (1-based; split by a hash of each case id, "
        "so a case stays in its shard when others are added); the others are deselected",
        "I/N",
    ),
)


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("tileconform", "CUTLASS tile conformance (pytest-tileconform)")
    add_options(group, parser, SESSION_OPTIONS)
    add_run_options(group, parser)


def _matrix_paths(config: pytest.Config) -> list[Path]:
    given = config.getoption("tile_matrix") or []
    base = config.invocation_params.dir
    # realpath, not Path.resolve: a symlink loop must reach the loader's message, not raise here
    paths = [Path(os.path.realpath(base / p)) for p in given] or [
        Path(os.path.realpath(p)) for p in config.getini("tile_matrix")
    ]
    return list(dict.fromkeys(paths))


def _check_archs(given: str | None, archs: frozenset[str] | None) -> None:
    """``--tile-arch`` names only architectures this package knows (:data:`.archs.KNOWN`): a typo
    would otherwise deselect every case and pass."""
    if given is not None and not archs:
        raise pytest.UsageError(f"--tile-arch {given!r}: names no architecture; known: {', '.join(KNOWN)}")
    unknown = sorted((archs or frozenset()) - set(KNOWN))
    if unknown:
        raise pytest.UsageError(f"--tile-arch: unknown {', '.join(unknown)}; known: {', '.join(KNOWN)}")


def _check_report(path: Path) -> None:
    """``--tile-report`` must be writable when the session ends, so it is checked now: a run's
    verdicts are not to be lost to a path that was never writable (the rules are
    :func:`pytest_tileconform.files.write_atomic`'s)."""
    import stat

    where = f"--tile-report {path}"
    try:
        info = path.stat()
    except FileNotFoundError:
        info = None
    except OSError as exc:
        raise pytest.UsageError(f"{where}: {exc.strerror or exc}") from None
    if info is not None:
        if stat.S_ISDIR(info.st_mode):
            raise pytest.UsageError(f"{where}: is a folder; name a file in it")
        if stat.S_ISREG(info.st_mode) and not info.st_mode & 0o222:
            raise pytest.UsageError(f"{where}: is read-only")
        if not (stat.S_ISREG(info.st_mode) or stat.S_ISCHR(info.st_mode) or stat.S_ISFIFO(info.st_mode)):
            raise pytest.UsageError(f"{where}: is not a file to write")
        return
    folder = path.parent
    while not folder.exists() and folder != folder.parent:
        folder = folder.parent
    if not folder.is_dir():
        raise pytest.UsageError(f"{where}: {folder} is not a folder")
    if not os.access(folder, os.W_OK | os.X_OK):
        raise pytest.UsageError(f"{where}: {folder} is not writable")


def pytest_configure(config: pytest.Config) -> None:
    resolve_ini_keys(config)  # before any backend reads its options
    paths = _matrix_paths(config)
    if not paths:
        return
    check_options(config, SESSION_OPTIONS)
    if config.getoption("tile_update") and os.environ.get("CI") and not config.getoption("tile_update_force"):
        raise pytest.UsageError(
            "--tile-update refuses to rewrite matrices when CI is set; "
            "add --tile-update-force to do it anyway"
        )
    shard = config.getoption("tile_shard")
    if shard is not None:
        try:
            config.stash[SHARD_KEY] = Shard.parse(shard)
        except ShardSpecError as exc:
            raise pytest.UsageError(str(exc)) from None
    workerinput: dict[str, Any] | None = getattr(config, "workerinput", None)
    if workerinput is not None:
        gpu = gpu_for_worker(workerinput["workerid"], visible_gpus())
        if gpu is not None:
            os.environ["CUDA_VISIBLE_DEVICES"] = gpu
    archs = config.getoption("tile_arch")
    arch_filter = frozenset(a.strip().lower() for a in archs.split(",") if a.strip()) if archs else None
    _check_archs(archs, arch_filter)
    if workerinput is None and config.getoption("tile_report"):
        _check_report(config.invocation_params.dir / config.getoption("tile_report"))
    session = TileSession.start(config, paths, arch_filter, run_options(config))
    config.pluginmanager.register(EnvironmentGuard(session), "tileconform-environment")
    config.pluginmanager.register(TerminateAsInterrupt(), "tileconform-sigterm")
    config.stash[SESSION_KEY] = session
    for arch in sorted({c.arch for c in session.all_cases()}):
        config.addinivalue_line("markers", f"{arch}: tile matrix cases of {arch}")
    config.addinivalue_line("markers", "tileconform: a tile matrix case")
    config.addinivalue_line(
        "markers", f"{UNRUN_MARKER}: a tile matrix case whose device will not run the kernel here"
    )
    args, folders = collection_args(paths)
    named = config.args if config.args_source == pytest.Config.ArgsSource.ARGS else []
    if folders:
        config.pluginmanager.register(OnlyMatrices(folders, paths, named), "tileconform-only-matrices")
    config.args = [*named, *(arg for arg in args if arg not in named)]
    if workerinput is None:
        report = config.getoption("tile_report")
        recorder = Recorder(
            session,
            update=config.getoption("tile_update"),
            report_path=config.invocation_params.dir / report if report else None,
        )
        config.pluginmanager.register(recorder, "tileconform-recorder")
        config.pluginmanager.register(UnrunReporting(config), "tileconform-unrun")


def pytest_collect_file(file_path: Path, parent: pytest.Collector) -> MatrixFile | None:
    session = parent.config.stash.get(SESSION_KEY, None)
    if session is not None and file_path.resolve() in session.matrix_paths:
        return MatrixFile.from_parent(parent, path=file_path)
    return None


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """--tile-shard: deselect the matrix cases of the other shards (other tests are kept)."""
    shard = config.stash.get(SHARD_KEY, None)
    if shard is None:
        return
    kept, deselected = [], []
    for item in items:
        if isinstance(item, TileCase) and not shard.owns(item.case.id):
            deselected.append(item)
        else:
            kept.append(item)
    if deselected:
        config.hook.pytest_deselected(items=deselected)
        items[:] = kept


def pytest_report_teststatus(report: pytest.TestReport) -> tuple[str, str, Any] | None:
    """A case that passed every stage judged without its kernel running is reported as
    :data:`~.verdict.UNRUN` (letter ``u``), never as a bare pass; its exit status stays 0, as for a
    pass (``--tile-require-run`` makes it a failure instead)."""
    if not is_unrun(report):
        return None
    return UNRUN, "u", ("UNRUN", {"yellow": True})


def pytest_report_header(config: pytest.Config) -> str | None:
    shard = config.stash.get(SHARD_KEY, None)
    return f"tileconform: shard {shard} (cases split by a hash of their id)" if shard else None


def pytest_collection_finish(session: pytest.Session) -> None:
    """After every plugin (-k, -m, --lf) has deselected: these are the cases this process runs."""
    tile_session = session.config.stash.get(SESSION_KEY, None)
    if tile_session is not None:
        tile_session.will_run([item.case for item in session.items if isinstance(item, TileCase)])


@pytest.hookimpl(optionalhook=True, tryfirst=True)
def pytest_xdist_auto_num_workers(config: pytest.Config) -> int | None:
    """``-n auto`` with a tile matrix: one worker per visible GPU.

    tryfirst: xdist's own implementation (CPU count) is a plain hookimpl, so without it the
    answer depends on which plugin was registered last (seen on an H200x2 host with ``-p``).
    """
    if not _matrix_paths(config):
        return None
    return len(visible_gpus()) or None
