"""Every case of each shipped whole-space matrix has a recorded verdict, and the matrix agrees with
it: a case the reports judged failing carries an expectation at that stage, with the source and
the shared memory of the report, and a case without one passed wherever it was judged. A report
counts for a case when it judged the same coordinates (the backend's axes, read by its record),
whichever matrix file it was run from. The reports are those results/index.json lists for the
matrix; a matrix it marks complete must have a verdict for every case."""

from __future__ import annotations

import pytest
from helpers.evidence import complete_matrices, index, matrix_reports
from helpers.fake_backend import TEST_KINDS
from helpers.paths import REPO

from pytest_tileconform.matrix.kinds import records_of
from pytest_tileconform.matrix.load import load_matrix
from pytest_tileconform.results.model import CaseEntry, CaseRecord
from pytest_tileconform.results.store import read_results


def judged(matrix: str) -> dict[str, list[tuple[str, CaseEntry]]]:
    """Each case id the reports behind ``matrix`` judged, with every (report name, entry) that
    judged it."""
    seen: dict[str, list[tuple[str, CaseEntry]]] = {}
    for path in matrix_reports(matrix):
        for entry in read_results(path).cases:
            if entry.verdict is not None:
                seen.setdefault(entry.id, []).append((path.name, entry))
    return seen


def test_every_shipped_matrix_has_its_reports_in_the_index() -> None:
    shipped = sorted(path.name for path in (REPO / "matrices").glob("*.yaml"))
    assert sorted(index()["matrices"]) == shipped
    for name in shipped:
        assert matrix_reports(name), name
        assert "results/index.json" in (REPO / "matrices" / name).read_text().split("\nversion:")[0]


@pytest.mark.parametrize("matrix", complete_matrices())
def test_every_case_has_a_verdict_the_matrix_agrees_with(matrix: str) -> None:
    cases = {case.id: case for case in load_matrix(REPO / "matrices" / matrix, TEST_KINDS).cases}
    seen = judged(matrix)
    unjudged = sorted(set(cases) - seen.keys())
    assert not unjudged, f"{len(unjudged)} case(s) of {matrix} without a verdict, e.g. {unjudged[:3]}"
    disagree = []
    for case_id, case in cases.items():
        record = CaseRecord.model_validate(case.record())
        expected = case.expectation
        for name, entry in seen[case_id]:
            assert entry.case is not None and entry.case.same_case(record, records_of(TEST_KINDS.values())), (
                f"{name} judged other coordinates under the id {case_id}"
            )
            verdict = entry.verdict
            assert verdict is not None
            stage = None if verdict.failed_stage is None else verdict.failed_stage.value
            wanted = None if expected is None else expected.stage
            if stage != wanted:
                disagree.append(f"{case_id}: {name} says {stage or 'pass'}, the matrix {wanted or 'pass'}")
            elif expected is not None and (expected.source, expected.smem) != (
                verdict.source,
                verdict.smem_requested,
            ):
                disagree.append(f"{case_id}: {name}'s source or shared memory differs from the matrix's")
    assert not disagree, "\n".join(disagree[:10])
