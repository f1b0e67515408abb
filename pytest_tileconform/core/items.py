"""Collection: a matrix file is a pytest File, each of its cases a pytest Item."""

from __future__ import annotations

import dataclasses
import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn

import pytest
from _pytest._code.code import (
    ExceptionInfo,
    ReprExceptionInfo,
    ReprFileLocation,
    ReprTracebackNative,
    TerminalRepr,
)

from ..backend import ForeseeingBackend, PlacingBackend
from ..matrix.cases import Case
from ..matrix.expect import StatusMismatch, mismatch_text, status_mismatch
from ..matrix.load import CasePlace
from ..reasons import stable_reason
from ..verdict import STAGE_FAILURES, UNRUN, NotJudgeable, Stage, StageFailure, Verdict, kernel_ran

if TYPE_CHECKING:
    from .session import TileSession

UPDATE_HINT = "the matrix is out of date: rerun with --tile-update to record the observed verdict"


class MatrixFile(pytest.File):
    """A ``--tile-matrix`` YAML file; its cases were loaded and validated at configure time."""

    def collect(self) -> Iterator[TileCase]:
        session = self.config.stash[SESSION_KEY]
        places = next((m.places for m in session.matrices if m.path == self.path), {})
        for case in session.cases_of(self.path):
            item = TileCase.from_parent(self, name=case.id, case=case, place=places.get(case.id))
            backend = session.registry[case.backend]
            through = backend.judged_through(case) if isinstance(backend, ForeseeingBackend) else None
            if through is not None and not kernel_ran(through):
                item.add_marker(UNRUN_MARKER)  # known before judging, so ``-m`` can select on it
            yield item


class TileCase(pytest.Item):
    """One matrix case. Its location is its tile entry in the matrix file (``place``), so skip
    lines, failure reports and JUnit's ``file``/``line`` point at the YAML, not at this module."""

    def __init__(self, *, case: Case, place: CasePlace | None = None, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.case = case
        self.place = place
        self.verdict: Verdict | None = None
        self.add_marker("tileconform")
        self.add_marker(case.arch)
        if case.expectation is not None:
            reason = case.expectation.reason or f"known bad at {case.expectation.stage}"
            self.add_marker(
                pytest.mark.xfail(
                    strict=True,
                    raises=STAGE_FAILURES[Stage(case.expectation.stage)],
                    reason=f"{reason} (expected stage: {case.expectation.stage}; if this "
                    f"passes, {UPDATE_HINT})",
                )
            )

    def runtest(self) -> None:
        session: TileSession = self.config.stash[SESSION_KEY]
        if self.place is not None:
            self.user_properties.append(("location", f"{self._where()}:{self.place.line}"))
        try:
            verdict = session.judge(self.case)
        except NotJudgeable as exc:
            self._skip(self._stable(str(exc)))
        verdict = dataclasses.replace(
            verdict, status=self._stable(verdict.status), detail=self._stable(verdict.detail)
        )
        self.verdict = verdict
        self._record(verdict)
        expected = self.case.expected
        if verdict.failed_stage is not None:
            mismatch = status_mismatch(self.case.expectation, verdict)
            raise mismatch or STAGE_FAILURES[verdict.failed_stage](verdict)
        if expected != "pass" and Stage(expected).order > verdict.judged_through.order:
            self._skip(
                f"expected to fail at {expected}, which {verdict.source} cannot judge "
                f"(it judges through {verdict.judged_through.value}); passed through "
                f"{verdict.judged_through.value}"
            )
        if verdict.unrun and expected == "pass" and self.config.getoption(REQUIRE_RUN_OPTION):
            raise UnrunFailure(verdict)

    def _skip(self, reason: str) -> NoReturn:
        """Skip, reported at the case's tile entry (``-rs``, JUnit) rather than at this line."""
        raise pytest.skip.Exception(reason, _use_item_location=self.place is not None)

    def _stable(self, text: str) -> str:
        """``text`` as recorded: temporary build paths gone, the build cache named ``<cache>``
        (:func:`..reasons.stable_reason`)."""
        session = self.config.stash[SESSION_KEY]
        places: dict[str, Path | str] = {"<cache>": session.options.cache_dir}
        backend = session.registry[self.case.backend]
        if isinstance(backend, PlacingBackend):
            places.update(backend.places())
        return stable_reason(text, places)

    def _where(self) -> str:
        """The matrix file as tracebacks name files: relative to where pytest was started when
        that is shorter."""
        relative = os.path.relpath(self.path, self.config.invocation_params.dir)
        return relative if len(relative) < len(str(self.path)) else str(self.path)

    def _record(self, verdict: Verdict) -> None:
        case = self.case
        self.user_properties.extend(
            [
                ("arch", case.arch),
                ("dtypes", f"{case.act}/{case.weight}/{case.out}"),
                ("tile", "x".join(map(str, case.tile))),
                *case.axes.properties(),
                ("expected", case.expected),
                ("expected_status", (case.expectation.status if case.expectation else None) or ""),
                ("stage", verdict.outcome),
                (OUTCOME_PROPERTY, verdict.reported),
                ("kernel_ran", str(verdict.kernel_ran).lower()),
                ("judged_through", verdict.judged_through.value),
                ("status", verdict.status),
                (
                    "smem_requested",
                    "" if verdict.smem_requested is None else str(verdict.smem_requested),
                ),
                ("smem_limit", "" if verdict.smem_limit is None else str(verdict.smem_limit)),
                ("source", verdict.source),
                ("gpu", str(verdict.extra.get("gpu", ""))),
                (VERDICT_PROPERTY, json.dumps(verdict.to_json())),
            ]
        )

    def repr_failure(self, excinfo: ExceptionInfo[BaseException], style: Any = None) -> str | TerminalRepr:
        """A stage failure as the verdict and the case, ending like a Python traceback at the
        case's ``file:line`` in the matrix (``--tb=line``, JUnit's message and problem matchers
        read that line)."""
        if not isinstance(excinfo.value, (StageFailure, StatusMismatch, UnrunFailure)):
            return super().repr_failure(excinfo, style=style)
        verdict = excinfo.value.verdict
        if isinstance(excinfo.value, UnrunFailure):
            head = str(excinfo.value)
        else:
            head = mismatch_text(self.case.expectation, verdict)
        lines = [head, f"  verdict: {verdict.describe()}"]
        if verdict.extra.get("numerics"):
            lines.append(f"  numerics: {verdict.extra['numerics']}")
        lines.append(f"  case: {self.case.describe()}")
        if self.place is None:
            return "\n".join(lines)
        where = self._where()
        if self.place.expectation_line is not None:
            lines.append(f"  expectation: {where}:{self.place.expectation_line}")
        lines += ["", f"{where}:{self.place.line}: {type(excinfo.value).__name__}"]
        if self.config.getoption("tbstyle", "auto") == "line":
            lines = []  # pytest prints the crash line below, as for a Python test
        return ReprExceptionInfo(
            reprtraceback=ReprTracebackNative([f"{line}\n" for line in lines]),
            reprcrash=ReprFileLocation(where, self.place.line, f"{head}: {verdict.describe()}"),
        )

    def reportinfo(self) -> tuple[Any, int | None, str]:
        """pytest's convention: the line is 0-based (it shows it plus one)."""
        return self.path, None if self.place is None else self.place.line - 1, self.name


class UnrunFailure(Exception):
    """An expected pass whose kernel did not run, under ``--tile-require-run``: a CI gate that
    wants every pass to have run on a GPU fails on it."""

    def __init__(self, verdict: Verdict) -> None:
        super().__init__(
            f"expected pass, but {UNRUN}: judged through {verdict.judged_through.value} only, the "
            "kernel did not run (--tile-require-run fails such a case)"
        )
        self.verdict = verdict


VERDICT_PROPERTY = "tileconform_verdict"
#: pytest's word for the case (:attr:`..verdict.Verdict.reported`): JUnit carries it, and the
#: terminal's letter and word are read from it (:func:`..plugin.pytest_report_teststatus`)
OUTCOME_PROPERTY = "tileconform_outcome"
#: the marker of a case whose device says, before judging, that it will not run the kernel
UNRUN_MARKER = "tileconform_unrun"
REQUIRE_RUN_OPTION = "tile_require_run"
SESSION_KEY = pytest.StashKey["TileSession"]()
