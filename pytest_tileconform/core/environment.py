"""A host that cannot judge any case (no CUDA toolkit, no library sources, a device that
cannot load the cases' code, compiles killed for memory) ends the session with one line and
pytest's usage-error status, once, instead of failing every case with a traceback.

A backend says so by raising :class:`~..verdict.UnusableEnvironment`: from ``check_environment``
(a :class:`~..backend.CheckingBackend`), called once the cases to run are known and before any
is judged, or from ``prepare``/``judge`` when it finds out only while building. The
:class:`EnvironmentGuard` turns it into :class:`pytest.UsageError` in the process that owns the
terminal: the xdist controller, or the only process. A worker cannot end the session by itself
(an exception or ``pytest.exit`` there is an internal error of xdist), so there the case's
report carries the message to the controller, which stops the session when it sees it.
"""

from __future__ import annotations

from collections.abc import Generator, Sequence
from typing import TYPE_CHECKING, Any

import pytest

from ..matrix.cases import Case
from ..verdict import UnusableEnvironment
from .items import TileCase

if TYPE_CHECKING:
    from .session import TileSession

#: The user property a case's report carries the message in, from a worker to the controller.
UNUSABLE_PROPERTY = "tileconform_unusable_environment"


def _is_worker(config: pytest.Config) -> bool:
    return hasattr(config, "workerinput")


class EnvironmentGuard:
    """Runs the backends' checks once the selected cases are known, and ends the session with
    one line when a backend finds this host unusable (registered by the plugin in each process
    with a tile session)."""

    def __init__(self, session: TileSession) -> None:
        self.session = session
        self._checked = False

    def _check(self, config: pytest.Config, cases: Sequence[Case]) -> None:
        if self._checked or config.option.collectonly:
            return
        self._checked = True
        try:
            self.session.check_environment(cases)
        except UnusableEnvironment as exc:
            raise pytest.UsageError(str(exc)) from None

    def pytest_collection_finish(self, session: pytest.Session) -> None:
        """The selected cases (after -k, -m, --lf, shards) of the only process; under xdist the
        controller checks instead (:meth:`pytest_xdist_node_collection_finished`)."""
        if _is_worker(session.config):
            return
        self._check(session.config, [i.case for i in session.items if isinstance(i, TileCase)])

    @pytest.hookimpl(optionalhook=True)
    def pytest_xdist_node_collection_finished(self, node: Any, ids: Sequence[str]) -> None:
        """The xdist controller collects nothing: the first worker's collection says which
        cases run (every worker collects the same), before any is scheduled."""
        config = self.session.config
        self._check(config, [c for nodeid in ids if (c := self.session.case_for_nodeid(nodeid))])

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_makereport(
        self, item: pytest.Item, call: pytest.CallInfo[None]
    ) -> Generator[None, pytest.TestReport, pytest.TestReport]:
        """A case that met an unusable environment: its report is the one line, and says so
        to the controller."""
        report = yield
        if call.excinfo is not None and isinstance(call.excinfo.value, UnusableEnvironment):
            message = str(call.excinfo.value)
            report.longrepr = message
            report.user_properties.append((UNUSABLE_PROPERTY, message))
        return report

    @pytest.hookimpl(tryfirst=True)
    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        """Stop the session before the report is shown or recorded (tryfirst)."""
        if _is_worker(self.session.config):
            return
        message = dict(report.user_properties).get(UNUSABLE_PROPERTY)
        if isinstance(message, str):
            raise pytest.UsageError(message)
