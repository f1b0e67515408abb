"""Hook specifications of pytest-tileconform, registered in ``pytest_addhooks``.

A backend is a pytest plugin that implements ``pytest_tileconform_register_backends``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import pytest

if TYPE_CHECKING:
    import argparse
    from pathlib import Path

    from .backend import Backend
    from .core.runoptions import RunOptions
    from .matrix.cases import Case
    from .matrix.kinds import CaseKind
    from .results.fingerprint import HostColumn
    from .results.merge import CaseNote
    from .verdict import Verdict


@pytest.hookspec
def pytest_tileconform_register_backends(  # type: ignore[empty-body]
    config: pytest.Config, options: RunOptions
) -> list[Backend]:
    """Return the backends this plugin provides (each has a unique ``name``).

    Called once per session, before any matrix is read; a matrix's ``backend:`` key must
    name one of them. ``options`` are the run's options every backend reads the same way
    (device, build cache, compiles at once, timeout, the stages a hardware run adds), already
    checked; a backend registers and checks only options of its own.
    """


@pytest.hookspec
def pytest_tileconform_case_kinds() -> list[CaseKind]:  # type: ignore[empty-body]
    """Return what this plugin's backends declare of their cases (:mod:`.matrix.kinds`): their
    axes, id words, recorded coordinates and JUnit properties, one kind per backend name.

    Called by pytest before any matrix is read and by the ``tileconform`` command line
    (:mod:`.commands.plugins`), which reads matrices without any backend: keep it cheap.
    """


@pytest.hookspec
def pytest_tileconform_modify_cases(config: pytest.Config, cases: list[Case]) -> None:
    """Called with the cases of all matrices before items are made; may reorder or drop them in place."""


@pytest.hookspec
def pytest_tileconform_verdict(config: pytest.Config, case: Case, verdict: Verdict) -> None:
    """Called (where the case ran) with each verdict a backend returned."""


@pytest.hookspec
def pytest_tileconform_before_run(config: pytest.Config, case: Case, run_dir: Path) -> None:
    """Called by a backend once it has written ``case``'s inputs into ``run_dir`` and before its
    harness runs on them: a plugin may look at or change the inputs (a test plugin injects a
    fault this way). Not called for cases decided before anything runs (compile, compile only).
    """


@pytest.hookspec
def pytest_tileconform_host_fingerprint(config: pytest.Config) -> dict[str, Any]:  # type: ignore[empty-body]
    """Return this plugin's part of the host fingerprint a ``--tile-report`` records.

    Called once, where the results file is written. The dicts of all implementations are merged
    into ``host.fingerprint`` after the core's ``gpus``, ``driver``, ``cuda_driver`` and
    ``tileconform``; a None value adds nothing. Keep it cheap and free of imports that
    initialize devices.
    """


@pytest.hookspec
def pytest_tileconform_host_columns() -> list[HostColumn]:  # type: ignore[empty-body]
    """The fields of this plugin's host fingerprint (:func:`pytest_tileconform_host_fingerprint`),
    each a column ``report merge`` shows after the core's CUDA column of its device rows; one
    marked ``toolkit`` gives rows without a driver their CUDA version."""


@pytest.hookspec
def pytest_tileconform_add_commands(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add this plugin's ``tileconform`` commands: each a parser of ``subparsers`` whose
    defaults name its ``handler`` (the parsed arguments -> an exit status).

    Called by the ``tileconform`` command line, not by pytest: it registers the ``pytest11``
    plugins of the distributions that require pytest-tileconform (:mod:`.commands.plugins`), so
    a backend's commands come with its pytest plugin. Import what a command needs when it runs:
    every ``tileconform --help`` calls this. Adding a command another plugin added already hands
    that parser back to join (:class:`.commands.plugins.Commands`).
    """


@pytest.hookspec
def pytest_tileconform_add_merge_options(parser: argparse.ArgumentParser) -> None:
    """Add options to ``tileconform report merge`` that ask this plugin for a note column
    (:func:`pytest_tileconform_merge_note`)."""


@pytest.hookspec(firstresult=True)
def pytest_tileconform_merge_note(args: argparse.Namespace) -> CaseNote | None:
    """The column this plugin adds to the notable cases of ``report merge``, as its options in
    ``args`` ask (None: they ask for none). Raise ``commands.output.CommandError`` for an input
    that cannot be read."""
