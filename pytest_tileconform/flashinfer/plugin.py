"""pytest plugin registering the FlashInfer CUTLASS MoE backend and its options."""

from __future__ import annotations

import contextlib
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from .header import progress_line

if TYPE_CHECKING:
    import argparse

    from ..core.runoptions import RunOptions
    from ..matrix.kinds import CaseKind
    from ..results.fingerprint import HostColumn
    from ..results.merge import CaseNote
    from .axes import MoeCase
    from .backend import FlashInferBackend


def pytest_addhooks(pluginmanager: pytest.PytestPluginManager) -> None:
    from . import hooks

    pluginmanager.add_hookspecs(hooks)


def pytest_tileconform_flashinfer_release_members() -> list[str]:
    """What this backend reads of a ``--tile-flashinfer`` wheel (:data:`.releases.MEMBERS`)."""
    from .releases import MEMBERS

    return list(MEMBERS)


def pytest_addoption(parser: pytest.Parser) -> None:
    from ..core.inikeys import add_options
    from .commands.options import PLUGIN_OPTIONS

    add_options(parser.getgroup("tileconform"), parser, PLUGIN_OPTIONS)


def _check_options(config: pytest.Config) -> None:
    """This backend's own options, checked once at startup: a bad value is one usage error
    (exit 4), not a failure of every case (the run options are the core's,
    :mod:`..core.runconfig`)."""
    from ..core.inikeys import check_options, spelled
    from .commands.options import PLUGIN_OPTIONS

    check_options(config, PLUGIN_OPTIONS)
    sources = config.getoption("tile_flashinfer_sources")
    if sources and not Path(sources).expanduser().is_dir():
        raise pytest.UsageError(f"{spelled(config, 'tile_flashinfer_sources', sources)}: no such folder")


def pytest_tileconform_case_kinds() -> list[CaseKind]:
    from .axes import KIND

    return [KIND]


def pytest_tileconform_register_backends(
    config: pytest.Config, options: RunOptions
) -> list[FlashInferBackend]:
    from .backend import FlashInferBackend, Settings

    _check_options(config)
    workerinput = getattr(config, "workerinput", None)
    sources_option = config.getoption("tile_flashinfer_sources")
    sources = Path(sources_option) if sources_option else None
    release_option = config.getoption("tile_flashinfer")
    release_ident = refusal = None
    if release_option:
        if sources_option:
            raise pytest.UsageError(
                "--tile-flashinfer and --tile-flashinfer-sources both name FlashInfer sources; give one"
            )
        from ..verdict import UnusableEnvironment
        from .releases import ReleaseError, release_members, resolve_release

        try:
            members = release_members(config.hook)
            release = resolve_release(release_option, options.cache_dir, members=members)
        except (ReleaseError, UnusableEnvironment) as exc:  # a release, or a key, it cannot use
            raise pytest.UsageError(f"--tile-flashinfer {release_option}: {exc}") from None
        from .compat import incompatibility

        reason = incompatibility(release.data_dir)
        if reason is not None:  # said only to a run with MoE cases: another backend may read it
            refusal = f"--tile-flashinfer {release_option}: {release.ident} cannot be judged by this "
            refusal += f"harness: {reason}"
        release_ident = release.ident
        sources = release.data_dir
    settings = Settings.of(options, sources, release_ident)
    worker = workerinput["workerid"] if workerinput else ""

    capture = config.pluginmanager.getplugin("capturemanager")

    def progress(message: str) -> None:
        """Compile progress goes to the terminal live, past pytest's output capture, each
        message a line of its own (:func:`.header.progress_line`)."""
        line = f"tileconform{'[' + worker + ']' if worker else ''}: {message}"
        reporter = None if worker else config.pluginmanager.getplugin("terminalreporter")
        with capture.global_and_fixture_disabled() if capture else contextlib.nullcontext():
            progress_line(reporter, line)

    def before_run(case: MoeCase, run_dir: Path) -> None:
        config.hook.pytest_tileconform_before_run(config=config, case=case, run_dir=run_dir)

    return [FlashInferBackend(settings, progress, before_run, refusal)]


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


def pytest_tileconform_host_columns() -> list[HostColumn]:
    """This backend's fingerprint fields (:func:`pytest_tileconform_host_fingerprint`): the
    FlashInfer version of each merged device row (a verdict of a ``--tile-flashinfer`` run names
    its release, the host fingerprint the installed one) and the nvcc that compiled the harnesses."""
    from ..results.fingerprint import HostColumn

    return [HostColumn("flashinfer", "FlashInfer"), HostColumn("nvcc", "nvcc", toolkit=True)]


def pytest_report_header(config: pytest.Config) -> list[str] | None:
    """How this run's FlashInfer cases will be judged and built (:mod:`.header`); printed by
    the process that owns the terminal (the xdist controller), before anything compiles."""
    from .header import report_header

    return report_header(config)


def pytest_tileconform_add_commands(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """The FlashInfer commands of ``tileconform`` (:mod:`.commands.cli`)."""
    from .commands.cli import add_commands

    add_commands(subparsers)


def pytest_tileconform_add_merge_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--tactics",
        type=Path,
        default=None,
        metavar="JSONL",
        help="a tactics probe output (drift/tactics --save-tactics): name FlashInfer's tactic ids "
        "of each listed case's kernel",
    )


def pytest_tileconform_merge_note(args: argparse.Namespace) -> CaseNote | None:
    """``report merge --tactics``: FlashInfer's tactic ids of each notable case's kernel."""
    if getattr(args, "tactics", None) is None:
        return None
    from ..results.merge import CaseNote
    from .commands.cli import tactic_ids_of

    return CaseNote("FlashInfer tactic ids", tactic_ids_of(args.tactics), "none offered")
