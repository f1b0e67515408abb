"""pytest's own outputs of an unrun case (a pass whose kernel did not run): the short test summary
and JUnit XML, where pytest would otherwise show it as a plain pass.

pytest's JUnit writer gives a passing report a bare ``<testcase>``, which every JUnit viewer reads
as passed: GitLab's parser (a ``failure``, ``error`` or ``skipped`` child decides, else success)
and the GitHub publishers that read the file with ``junitparser``. Properties tell otherwise, but
no viewer shows them. So an unrun case gets a ``<skipped type="tileconform.unrun">`` child with the
verdict as its message, as pytest itself marks an xfail (``type="pytest.xfail"``), and the suite's
counts move it from passed to skipped. The terminal keeps its own word (``unrun``, letter ``u``)
and the exit status stays that of a pass.
"""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from collections.abc import Generator
from typing import Any

import pytest

from ..verdict import UNRUN, Verdict
from .items import OUTCOME_PROPERTY, VERDICT_PROPERTY

#: the ``-r`` letters that list unrun cases in the short test summary: their own (``u``, as the
#: progress line prints them) and pytest's for passes (``p``, part of ``-rA``)
SUMMARY_CHARS = frozenset("up")
#: the report lists of pytest's short summary, by ``-r`` letter: the summary has its header when
#: one of them holds a report
_PYTEST_SUMMARY_STATS = dict(f="failed", E="error", s="skipped", x="xfailed", X="xpassed", p="passed")


def is_unrun(report: pytest.TestReport) -> bool:
    """Whether a report is the passing call of a case whose kernel did not run (its recorded
    outcome, :attr:`..verdict.Verdict.reported`)."""
    if report.when != "call" or not report.passed or hasattr(report, "wasxfail"):
        return False
    return dict(report.user_properties).get(OUTCOME_PROPERTY) == UNRUN


def unrun_verdict(report: pytest.TestReport) -> Verdict | None:
    """The verdict of a report :func:`is_unrun` takes, else None."""
    if not is_unrun(report):
        return None
    recorded = dict(report.user_properties).get(VERDICT_PROPERTY)
    return Verdict.from_json(json.loads(recorded)) if isinstance(recorded, str) else None


def reason(verdict: Verdict) -> str:
    """Why a case is unrun, in the words JUnit's message and ``-ru`` show."""
    return (
        f"{UNRUN}: passed every stage {verdict.source} judges (through "
        f"{verdict.judged_through.value}); the kernel did not run and its output was not checked"
    )


class UnrunReporting:
    """Registered on the process that writes the terminal summary and the JUnit file."""

    def __init__(self, config: pytest.Config) -> None:
        self.config = config

    @pytest.hookimpl(trylast=True)  # after pytest's JUnit writer opened the testcase as passed
    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        from _pytest.junitxml import xml_key

        verdict = unrun_verdict(report)
        xml = self.config.stash.get(xml_key, None)
        if verdict is None or xml is None:
            return
        skipped = ET.Element("skipped", type="tileconform.unrun", message=reason(verdict))
        skipped.text = verdict.describe()
        xml.stats["passed"] -= 1
        xml.node_reporter(report).append(skipped)  # counts it as skipped

    @pytest.hookimpl(wrapper=True, tryfirst=True)  # around pytest's, which prints its summary last
    def pytest_terminal_summary(self, terminalreporter: Any) -> Generator[None]:
        try:
            return (yield)
        finally:
            self._short_summary(terminalreporter)

    def _short_summary(self, reporter: Any) -> None:
        """``-ru``, ``-rp`` or ``-rA``: one ``UNRUN node - reason`` line per unrun case, below
        pytest's own short summary lines (under its header, written here when pytest wrote none)."""
        chars: str = getattr(reporter, "reportchars", "")
        if self.config.option.no_summary or not SUMMARY_CHARS & set(chars):
            return
        lines = []
        for report in reporter.stats.get(UNRUN, []):
            verdict = unrun_verdict(report)
            if verdict is not None:
                lines.append(f"UNRUN {report.nodeid} - {reason(verdict)}")
        if not lines:
            return
        if not any(reporter.stats.get(_PYTEST_SUMMARY_STATS[c]) for c in chars if c in _PYTEST_SUMMARY_STATS):
            reporter.write_sep("=", "short test summary info", cyan=True, bold=True)
        for line in lines:
            reporter.write_line(line, yellow=True)
