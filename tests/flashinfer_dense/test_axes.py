"""A dense case's record in a results file states every axis (:class:`DenseRecord`), and a file
written before it did (no ``stream_k`` or ``cluster`` for a data-parallel 1x1x1 tactic) still
names the same cases: the shipped SM120 reports match their matrices' cases through the backends'
typed records."""

from __future__ import annotations

import pytest
from helpers.paths import REPO

from pytest_tileconform.commands.plugins import command_plugins
from pytest_tileconform.flashinfer_dense.axes import DenseAxes, DenseRecord
from pytest_tileconform.matrix.kinds import records_of
from pytest_tileconform.matrix.load import load_matrix
from pytest_tileconform.results.model import CaseRecord
from pytest_tileconform.results.store import read_results


def test_the_record_states_the_scheduler_and_the_cluster() -> None:
    data_parallel = {"swap_ab": False, "stream_k": False, "cluster": "1x1x1", "mnk": "256x256x512"}
    assert DenseAxes(False, (256, 256, 512)).record() == data_parallel
    assert DenseAxes(True, (64, 32, 128), True, (2, 1, 1)).record() == {
        "swap_ab": True,
        "stream_k": True,
        "cluster": "2x1x1",
        "mnk": "64x32x128",
    }
    # a weight-only GEMM's scale group, stated only for that family (0: one scale per channel)
    weight_only = DenseAxes(False, (1, 768, 1024), cluster=(1, 2, 1), group=0)
    assert weight_only.record() == {**data_parallel, "cluster": "1x2x1", "group": 0, "mnk": "1x768x1024"}
    assert weight_only.id_words() == ["c1x2x1", "gcol", "m1n768k1024"]


def test_a_record_without_the_scheduler_is_the_data_parallel_case() -> None:
    frame = {"arch": "sm120", "act": "mxfp8", "weight": "mxfp8", "out": "bf16", "tile": "128x32x128"}
    older = CaseRecord.model_validate({**frame, "swap_ab": False, "mnk": "256x256x512"})
    now = CaseRecord.model_validate({**frame, **DenseAxes(False, (256, 256, 512)).record()})
    stream_k = CaseRecord.model_validate({**frame, **DenseAxes(False, (256, 256, 512), True).record()})
    records = records_of(command_plugins().kinds().values())
    assert DenseRecord in records
    assert older.same_case(now, records) and now.same_case(older, records)
    assert not older.same_case(stream_k, records)
    assert not older.same_case(now)  # compared as written, the older file left a key out


@pytest.mark.parametrize(
    ("matrix", "report"),
    [
        ("gemm-sm120.yaml", "verdicts/gemm-sm120-2026-12-02-virtual.json.gz"),
        ("gemm-sm120-fp4.yaml", "verdicts/gemm-sm120-fp4-2026-12-02/virtual.json.gz"),
        ("gemm-sm121-fp4.yaml", "verdicts/gemm-sm121-fp4-2026-12-02-virtual.json.gz"),
    ],
)
def test_the_shipped_reports_name_their_matrices_cases(matrix: str, report: str) -> None:
    kinds = command_plugins().kinds()
    records = records_of(kinds.values())
    cases = {
        case.id: CaseRecord.model_validate(case.record())
        for case in load_matrix(REPO / "matrices" / matrix, kinds).cases
    }
    recorded = {entry.id: entry.case for entry in read_results(REPO / "results" / report).cases}
    assert recorded.keys() <= cases.keys() and recorded
    for case_id, record in recorded.items():
        assert record is not None and record.same_case(cases[case_id], records), case_id
