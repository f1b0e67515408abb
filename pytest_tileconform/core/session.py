"""Per-process state of a tileconform run: the loaded matrices, the backends and the verdicts seen."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from ..backend import BackendRegistry, CheckingBackend, FinishingBackend
from ..matrix.bounds import MAX_CASES, MAX_CASES_RAISED
from ..matrix.cases import Case
from ..matrix.kinds import CaseKind, kinds_by_backend
from ..matrix.load import LoadedMatrix, MatrixInvalid, load_matrices
from ..results.observation import Observation
from ..verdict import UNRUN, Verdict
from .runoptions import RunOptions


def max_cases(config: pytest.Config) -> int:
    """The most cases a matrix file may expand to (--tile-max-cases, refused by
    :func:`refuse_max_cases` when out of bounds)."""
    value = config.getoption("tile_max_cases", None)
    return MAX_CASES if value is None else int(value)


def refuse_max_cases(value: int) -> str | None:
    if value < 1:
        return "must be at least 1"
    if value > MAX_CASES_RAISED:
        return (
            f"must be at most {MAX_CASES_RAISED:,} (each case is a pytest item held in memory: a "
            "million take about 2.5 GB before any is judged)"
        )
    return None


@dataclass
class TileSession:
    config: pytest.Config
    registry: BackendRegistry
    #: what each backend declares of its cases (:mod:`..matrix.kinds`)
    kinds: dict[str, CaseKind]
    matrices: list[LoadedMatrix]
    arch_filter: frozenset[str] | None
    options: RunOptions
    _observations: dict[str, Observation] = field(default_factory=dict)
    _cases: dict[Path, list[Case]] = field(default_factory=dict)
    _index: dict[tuple[Path, str], Case] = field(default_factory=dict)
    _prepared: set[str] = field(default_factory=set)
    _to_run: list[Case] = field(default_factory=list)
    _finished: bool = False
    _split_cache: dict[str, tuple[Path, str]] = field(default_factory=dict)
    _resolved: dict[str, Path] = field(default_factory=dict)

    @classmethod
    def start(
        cls,
        config: pytest.Config,
        paths: Sequence[Path],
        arch_filter: frozenset[str] | None,
        options: RunOptions,
    ) -> TileSession:
        """Load and validate every matrix; raise pytest.UsageError listing every problem."""
        try:
            registry = BackendRegistry(
                [
                    b
                    for found in config.hook.pytest_tileconform_register_backends(
                        config=config, options=options
                    )
                    for b in found
                ]
            )
            kinds = kinds_by_backend(config.hook.pytest_tileconform_case_kinds())
        except ValueError as exc:
            raise pytest.UsageError(str(exc)) from None
        try:
            # --tile-update removes the expectations of ids that are no longer cases
            stale_ok = bool(config.getoption("tile_update"))
            matrices = load_matrices(
                paths,
                kinds,
                registry.names(),
                max_cases=max_cases(config),
                stale_ok=stale_ok,
                archs=registry.archs(),
                dtypes=registry.dtypes(),
            )
        except MatrixInvalid as exc:
            raise pytest.UsageError("invalid tile matrix:\n" + str(exc)) from None
        session = cls(config, registry, kinds, matrices, arch_filter, options)
        config.add_cleanup(session.finish)  # when this process's session ends
        cases = [c for m in matrices for c in m.cases if arch_filter is None or c.arch in arch_filter]
        config.hook.pytest_tileconform_modify_cases(config=config, cases=cases)
        for case in cases:
            session._cases.setdefault(case.matrix, []).append(case)
            session._index[case.matrix, case.id] = case
        return session

    @property
    def matrix_paths(self) -> set[Path]:
        return {m.path for m in self.matrices}

    def cases_of(self, path: Path) -> list[Case]:
        return self._cases.get(path, [])

    def all_cases(self) -> list[Case]:
        return [c for cases in self._cases.values() for c in cases]

    def will_run(self, cases: Sequence[Case]) -> None:
        """The cases selected in this process after -k/-m/--lf; backends prepare them together."""
        self._to_run = list(cases)

    def check_environment(self, cases: Sequence[Case]) -> None:
        """Ask each backend that can check its host whether it can judge its part of ``cases``
        (:class:`~..backend.CheckingBackend`); raises
        :class:`~..verdict.UnusableEnvironment`. A backend with no case selected is not
        asked, so a run of other cases needs nothing of it."""
        for backend in self.registry:
            mine = [c for c in cases if c.backend == backend.name]
            if mine and isinstance(backend, CheckingBackend):
                backend.check_environment(mine)

    def judge(self, case: Case) -> Verdict:
        backend = self.registry[case.backend]
        if backend.name not in self._prepared:
            self._prepared.add(backend.name)
            backend.prepare([c for c in self._to_run if c.backend == backend.name] or [case])
        verdict = backend.judge(case)
        self.config.hook.pytest_tileconform_verdict(config=self.config, case=case, verdict=verdict)
        return verdict

    def finish(self) -> None:
        """The session is over in this process: each backend that has ``finish`` restores what
        it changed in the process (once, however often this is called)."""
        if self._finished:
            return
        self._finished = True
        for backend in self.registry:
            if isinstance(backend, FinishingBackend):
                backend.finish()

    @property
    def observations(self) -> list[Observation]:
        return list(self._observations.values())

    def observe(self, report: pytest.TestReport, verdict_json: str | None, at: float = 0.0) -> None:
        """Record a case's report; a later setup/teardown failure marks the case as an error."""
        known = self._observations.get(report.nodeid)
        if known is not None:
            if report.failed and report.when != "call":
                known.outcome = "error"
            return
        matrix, case_id = self._split_nodeid(report.nodeid)
        verdict = Verdict.from_json(json.loads(verdict_json)) if verdict_json else None
        outcome: str = report.outcome
        if hasattr(report, "wasxfail"):
            outcome = "xfailed" if report.skipped else "xpassed"
        elif report.failed and report.when != "call":
            outcome = "error"
        elif report.passed and verdict is not None and verdict.unrun:
            outcome = UNRUN  # as pytest_report_teststatus reports it
        skip_reason = ""
        if report.skipped and isinstance(report.longrepr, tuple):
            skip_reason = str(report.longrepr[2]).removeprefix("Skipped: ")
        # on the xdist controller a worker's report carries its WorkerController as .node
        workerinput = getattr(getattr(report, "node", None), "workerinput", None) or {}
        self._observations[report.nodeid] = Observation(
            case_id,
            matrix,
            outcome,
            verdict,
            skip_reason,
            report.duration,
            at,
            str(workerinput.get("workerid", "")),
        )

    def _matrix_for(self, nodeid_path: str) -> Path:
        known = self._resolved.get(nodeid_path)
        if known is not None:
            return known
        target = (self.config.rootpath / nodeid_path).resolve()
        for path in self.matrix_paths:
            if path == target:
                target = path
                break
        self._resolved[nodeid_path] = target
        return target

    def case_by_id(self, matrix: Path, case_id: str) -> Case | None:
        return self._index.get((matrix, case_id))

    def _split_nodeid(self, nodeid: str) -> tuple[Path, str]:
        """The matrix and case id of a node id ``PATH::CASE_ID``.

        A case id may itself hold ``::`` (or ``/``, ``[``, spaces), so the id is not split at
        the first or the last ``::``: each split is tried, left to right, and the first whose
        path is a loaded matrix with that case wins. A node id that names no case (a Python test
        in the same session) splits at its last ``::``.
        """
        found = self._split_cache.get(nodeid)
        if found is not None:
            return found
        start = 0
        while (at := nodeid.find("::", start)) != -1:
            matrix = self._matrix_for(nodeid[:at])
            if (matrix, nodeid[at + 2 :]) in self._index:
                found = (matrix, nodeid[at + 2 :])
                break
            start = at + 1
        if found is None:
            path_str, _, case_id = nodeid.rpartition("::")
            found = (self._matrix_for(path_str), case_id)
        self._split_cache[nodeid] = found
        return found

    def case_for_nodeid(self, nodeid: str) -> Case | None:
        """The case a test report's node id names (None for a test that is not a case)."""
        if "::" not in nodeid:
            return None
        return self.case_by_id(*self._split_nodeid(nodeid))
