"""The virtual sm90 profile against the H200 on failing cases: a few cases of
matrices/sm90-failures.yaml are judged on the virtual device, through the plugin as users run
it, and must fail at the stage, with the status, that the hardware recording wrote into the
matrix's expectations (lab/gpu-failures.sh, --tile-update on an H200).

The cases share one translation unit (one dtype) with the smoke cases test_e2e_virtual.py
judges: one run and one compile serve both tests (:mod:`helpers.virtual_sm90`), kept in a cache
of its own between runs."""

from __future__ import annotations

from pathlib import Path

import pytest
from helpers.fake_backend import TEST_KINDS
from helpers.paths import REPO
from helpers.virtual_sm90 import FAILURE_CASES, FAILURES, judge_on_virtual_sm90

from pytest_tileconform.matrix.load import load_matrix

MATRIX = REPO / FAILURES
CASES = FAILURE_CASES


@pytest.mark.slow
def test_virtual_sm90_fails_where_the_h200_recorded(tmp_path: Path) -> None:
    recorded = {c.id: c.expectation for c in load_matrix(MATRIX, TEST_KINDS).cases if c.id in CASES}
    assert sorted(recorded) == sorted(CASES), "the matrix no longer has these cases"
    unrecorded = [case for case, e in recorded.items() if e is None or "hardware" not in (e.source or "")]
    if len(unrecorded) == len(CASES):
        pytest.skip(f"{MATRIX.name} has no hardware recording yet (lab/gpu-failures.sh)")
    assert not unrecorded, f"recorded on hardware only in part: {unrecorded}"
    judged = judge_on_virtual_sm90(tmp_path / "virtual.json")
    virtual = {i: c["verdict"] for i, c in judged.items() if c["matrix"].endswith(MATRIX.name)}
    # -k matches substrings: it also selects cases whose ids extend these (k100e, n100t1)
    assert set(CASES) <= set(virtual)
    for case, expectation in recorded.items():
        assert expectation is not None
        verdict = virtual[case]
        assert verdict["source"] == "virtual (sm90 profile)"
        assert (verdict["failed_stage"], verdict["status"]) == (expectation.stage, expectation.status), case
        assert verdict["judged_through"] == "launch" and not verdict["kernel_ran"], case
        if expectation.smem is not None:
            assert verdict["smem_requested"] == expectation.smem, case
