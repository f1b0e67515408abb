"""Collection: a matrix file is a pytest File, each of its cases a pytest Item."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

import pytest
from _pytest._code.code import ExceptionInfo, TerminalRepr

from ..matrix.cases import Case
from ..verdict import STAGE_FAILURES, NotJudgeable, Stage, StageFailure, Verdict

if TYPE_CHECKING:
    from .session import TileSession

UPDATE_HINT = "the matrix is out of date: rerun with --tile-update to record the observed verdict"


class MatrixFile(pytest.File):
    """A ``--tile-matrix`` YAML file; its cases were loaded and validated at configure time."""

    def collect(self) -> Iterator[TileCase]:
        session = self.config.stash[SESSION_KEY]
        for case in session.cases_of(self.path):
            yield TileCase.from_parent(self, name=case.id, case=case)


class TileCase(pytest.Item):
    def __init__(self, *, case: Case, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.case = case
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
        try:
            verdict = session.judge(self.case)
        except NotJudgeable as exc:
            pytest.skip(str(exc))
        self.verdict = verdict
        self._record(verdict)
        expected = self.case.expected
        if verdict.failed_stage is not None:
            raise STAGE_FAILURES[verdict.failed_stage](verdict)
        if expected != "pass" and Stage(expected).order > verdict.judged_through.order:
            pytest.skip(
                f"expected to fail at {expected}, which {verdict.source} cannot judge "
                f"(it judges through {verdict.judged_through.value}); passed through "
                f"{verdict.judged_through.value}"
            )

    def _record(self, verdict: Verdict) -> None:
        case = self.case
        self.user_properties.extend(
            [
                ("arch", case.arch),
                ("dtypes", f"{case.act}/{case.weight}/{case.out}"),
                ("tile", "x".join(map(str, case.tile))),
                ("cluster", "x".join(map(str, case.cluster))),
                ("swap_ab", str(case.swap_ab).lower()),
                ("fusion", case.fusion),
                ("expected", case.expected),
                ("stage", verdict.outcome),
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
        if isinstance(excinfo.value, StageFailure):
            verdict = excinfo.value.verdict
            expected = self.case.expected
            if expected == "pass":
                head = f"expected pass, but rejected at stage {verdict.outcome}"
            else:
                head = f"expected rejection at stage {expected}, but rejected at stage {verdict.outcome}"
            lines = [head, f"  verdict: {verdict.describe()}"]
            if verdict.extra.get("numerics"):
                lines.append(f"  numerics: {verdict.extra['numerics']}")
            lines.append(f"  case: {self.case.describe()}")
            return "\n".join(lines)
        return super().repr_failure(excinfo, style=style)

    def reportinfo(self) -> tuple[Any, int | None, str]:
        return self.path, None, self.name


VERDICT_PROPERTY = "tileconform_verdict"
SESSION_KEY = pytest.StashKey["TileSession"]()
