"""The controller-side plugin object: it sees every report (also from xdist workers), and at the
end of the session writes matrix updates and the results file once, then prints the summary."""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any

import pytest

from ..matrix.expect import expectation_update
from ..matrix.load import MatrixInvalid
from ..matrix.rewrite import Change
from ..matrix.update import UpdateOutcome, UpdateRefused, prune_change, update_matrix
from ..results.fingerprint import host_fingerprint
from ..results.observation import Observation
from ..results.report import grid_lines, results_document, source_lines, timing_lines
from ..results.store import write_results
from .items import VERDICT_PROPERTY
from .session import TileSession

#: the observed outcomes that fail a run (a strict XPASS is pytest's failure)
FAILURES = ("failed", "xpassed", "error")


def process_age() -> float | None:
    """Seconds since this process started (Linux's /proc), None where that cannot be read."""
    try:
        fields = Path("/proc/self/stat").read_text().rsplit(")", 1)[1].split()
        started = int(fields[19]) / os.sysconf("SC_CLK_TCK")  # field 22, starttime
        return round(time.clock_gettime(time.CLOCK_BOOTTIME) - started, 3)
    except (OSError, ValueError, IndexError, AttributeError):
        return None


class Recorder:
    def __init__(self, session: TileSession, *, update: bool, report_path: Path | None) -> None:
        self.session = session
        self.update = update
        self.report_path = report_path
        self.changes: dict[Path, dict[str, Change]] = {}
        self.started = time.monotonic()
        self.startup = process_age()  # finished_at_s counts from here; this is how late that is
        self.update_errors: list[str] = []
        self.report_problem = ""  # why --tile-report could not be written, and where it went
        self.update_outcomes: dict[Path, UpdateOutcome] = {}
        self.recorded = 0  # failures of this run the update wrote into their matrices
        self.unrecorded: list[str] = []  # and the ones it did not (:meth:`_unrecorded`)
        self.exit_cleared = False  # the exit status was set to 0 because every failure was recorded

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        if report.when != "call" and not (report.skipped or report.failed):
            return
        verdict = dict(report.user_properties).get(VERDICT_PROPERTY)
        self.session.observe(
            report, verdict if isinstance(verdict, str) else None, time.monotonic() - self.started
        )

    def _collect_changes(self) -> None:
        for matrix in self.session.matrices:
            expectations = matrix.model.expectations or {}
            for case_id in matrix.stale:
                self.changes.setdefault(matrix.path, {})[case_id] = prune_change(
                    case_id, expectations[case_id]
                )
        for obs in self.session.observations:
            case = self.session.case_by_id(obs.matrix, obs.case_id)
            if case is None or obs.verdict is None:
                continue
            change = expectation_update(case.id, case.expectation, obs.verdict)
            if change is not None:
                self.changes.setdefault(case.matrix, {})[case.id] = change

    def _update_matrices(self) -> None:
        """Write each matrix's changes against what the run loaded (``started``), so an update
        sees which expectations were edited by someone else meanwhile. A matrix that cannot be
        updated keeps its file as it is and its changes are listed as not written."""
        loaded = {m.path: m.model.expectations or {} for m in self.session.matrices}
        for path, changes in self.changes.items():
            started = {case_id: loaded.get(path, {}).get(case_id) for case_id in changes}
            try:
                self.update_outcomes[path] = update_matrix(path, self.session.kinds, changes, started)
            except (UpdateRefused, ValueError, OSError, MatrixInvalid) as exc:
                self.update_errors.append(f"{path}: not updated: {exc}")

    def _unrecorded(self, failures: list[Observation]) -> list[str]:
        """The ``failures`` of this run that the update did not record in a matrix: a test that is
        not a case, an error before a verdict, a failure no expectation expresses (an unrun pass
        under ``--tile-require-run``) or a change that was not written."""
        written = {
            (path, case_id)
            for path, outcome in self.update_outcomes.items()
            for case_id in (*outcome.written, *outcome.already)
        }
        missing = []
        for obs in failures:
            case = self.session.case_by_id(obs.matrix, obs.case_id)
            if case is None or (case.matrix, case.id) not in written:
                missing.append(obs.case_id)
        return missing

    @pytest.hookimpl(trylast=True)
    def pytest_sessionfinish(self, session: pytest.Session, exitstatus: int) -> None:
        if self.update and exitstatus == pytest.ExitCode.USAGE_ERROR:
            # stopped for its environment (a compile out of memory, a toolkit missing): what it
            # judged is a part, and what it could not judge must not look settled
            self.update_errors.append("no matrix updated: the session stopped for its environment")
        elif self.update:
            self._collect_changes()
            self._update_matrices()
            failures = [o for o in self.session.observations if o.outcome in FAILURES]
            self.unrecorded = self._unrecorded(failures)
            self.recorded = len(failures) - len(self.unrecorded)
            # the run that wrote the expectations succeeded when it wrote every failure it saw
            every = not self.unrecorded and session.testsfailed == len(failures)
            if session.exitstatus == pytest.ExitCode.TESTS_FAILED and every:
                session.exitstatus = pytest.ExitCode.OK
                self.exit_cleared = True
        if self.report_path is not None:
            contributions = session.config.hook.pytest_tileconform_host_fingerprint(config=session.config)
            document = results_document(
                self.session.case_by_id,
                self.session.observations,
                fingerprint=host_fingerprint(contributions),
                startup_s=self.startup,
            )
            self.report_problem = _write_report(self.report_path, document)

    def pytest_terminal_summary(self, terminalreporter: Any) -> None:
        observations = self.session.observations
        lines = grid_lines(self.session.case_by_id, observations)
        if lines:
            terminalreporter.section("tileconform verdicts (tiles: CTA MxNxK, K in elements)")
            for line in [*lines, *source_lines(observations)]:
                terminalreporter.write_line(line)
            timings = timing_lines(observations)
            if timings:
                terminalreporter.write_line("")
                for line in timings:
                    terminalreporter.write_line(line)
        if self.update:
            terminalreporter.section("tileconform --tile-update")
            for line in self.update_summary():
                terminalreporter.write_line(line)
        if self.report_problem:
            terminalreporter.write_line(f"tileconform: {self.report_problem}", red=True)
        elif self.report_path is not None:
            terminalreporter.write_line(f"tileconform: results written to {self.report_path}")

    def update_summary(self) -> list[str]:
        lines = list(self.update_errors)
        if not self.changes and not lines:
            lines.append("no expectation changed: every case that ran agrees with its matrix")
        for path, changes in self.changes.items():
            outcome = self.update_outcomes.get(path)
            if outcome is None:  # refused as a whole, above: what it would have written
                lines.append(f"{path}: {len(changes)} expectation(s) NOT written:")
                lines.extend(f"  {c.describe()}" for c in changes.values())
                continue
            lines.extend(outcome.lines(path))
        if self.exit_cleared:
            lines.append(
                f"every failure of this run ({self.recorded}) is recorded in its matrix: exit status 0 "
                "(review the diff; a rerun without --tile-update checks it)"
            )
        elif self.unrecorded:
            shown = ", ".join(self.unrecorded[:5]) + (", ..." if len(self.unrecorded) > 5 else "")
            lines.append(
                f"{len(self.unrecorded)} failure(s) of this run NOT recorded in a matrix ({shown}): "
                "the exit status stays 1"
            )
        return lines


def _write_report(path: Path, document: Any) -> str:
    """Write the results to ``path``; when that fails (the place changed since startup checked it),
    write them to a new file in the temporary folder instead, so a run's verdicts are never lost.
    The answer is what to tell the user, empty when ``path`` was written."""
    import tempfile

    from ..results.store import dumps

    try:
        write_results(path, document)
        return ""
    except OSError as exc:
        why = f"results NOT written to {path}: {exc.strerror or exc}"
    try:
        fd, spare = tempfile.mkstemp(prefix="tile-report-", suffix=".json")
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(dumps(document))
    except OSError as exc:
        return f"{why}; nor to the temporary folder: {exc.strerror or exc}"
    return f"{why}; they are in {spare}"
