"""``tileconform report apply``: a run's --tile-report file applied to the matrix afterwards writes
what that run's --tile-update would have written, and refuses files that do not fit the matrix."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from helpers.fake_backend import FakeKinds, TileRun
from helpers.fake_matrices import OBSERVED, ORIGINAL, UPDATED

from pytest_tileconform.commands.cli import main


def report_of(tc: TileRun, name: str = "r.json") -> Path:
    """The results file of a plain run (no --tile-update) of the pytester's matrix."""
    report = tc.path / name
    result = tc.run("--tile-report", str(report))
    result.assert_outcomes(passed=0, failed=3, xfailed=1)
    return report


def test_apply_writes_what_tile_update_writes(tc: TileRun, capsys: pytest.CaptureFixture[str]) -> None:
    path = tc.matrix(ORIGINAL)
    tc.verdicts(OBSERVED)
    report = report_of(tc)
    assert path.read_text() == ORIGINAL
    assert main(["report", "apply", str(path), str(report)], plugins=[FakeKinds()]) == 0
    assert path.read_text() == UPDATED
    out = capsys.readouterr().out
    assert f"{path}: 3 expectation(s) updated" in out
    assert "  sm90-bf16-128x64x64-c1x1x1-none: pass -> initialize" in out
    assert "  sm90-bf16-256x128x64-c1x1x1-none: initialize -> pass" in out
    # applied again, nothing is left to change; the updated matrix runs green
    assert main(["report", "apply", str(path), str(report)], plugins=[FakeKinds()]) == 0
    assert (
        "no expectation changed: 4 of the matrix's 4 case(s) judged in these files agree"
        in capsys.readouterr().out
    )
    tc.run().assert_outcomes(passed=1, xfailed=3)


def test_check_lists_the_changes_and_writes_nothing(tc: TileRun, capsys: pytest.CaptureFixture[str]) -> None:
    path = tc.matrix(ORIGINAL)
    tc.verdicts(OBSERVED)
    report = report_of(tc)
    assert main(["report", "apply", "--check", str(path), str(report)], plugins=[FakeKinds()]) == 1
    assert path.read_text() == ORIGINAL
    out = capsys.readouterr().out
    assert f"{path}: 3 expectation(s) would change (4 of the matrix's 4 case(s) judged" in out
    assert "  sm90-bf16-64x64x64-c1x1x1-none: compile -> can_implement" in out
    assert main(["report", "apply", str(path), str(report)], plugins=[FakeKinds()]) == 0
    assert main(["report", "apply", str(path), str(report), "--check"], plugins=[FakeKinds()]) == 0


def test_slices_judged_apart_are_applied_in_one_write(tc: TileRun) -> None:
    path = tc.matrix(ORIGINAL)
    tc.verdicts(OBSERVED)
    first, second = tc.path / "a.json", tc.path / "b.json"
    tc.run("--tile-report", str(first), "-k", "128x64x64 or 64x64x64")
    tc.run("--tile-report", str(second), "-k", "not 128x64x64 and not 64x64x64")
    assert main(["report", "apply", str(path), str(first), str(second)], plugins=[FakeKinds()]) == 0
    assert path.read_text() == UPDATED


def _edit_report(report: Path, case_id: str, **changes: object) -> None:
    document = json.loads(report.read_text())
    for entry in document["cases"]:
        if entry["id"] == case_id:
            entry["case"].update(changes)
    report.write_text(json.dumps(document))


def test_a_file_that_judged_other_coordinates_is_refused(
    tc: TileRun, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tc.matrix(ORIGINAL)
    tc.verdicts(OBSERVED)
    report = report_of(tc)
    _edit_report(report, "sm90-bf16-128x64x64-c1x1x1-none", cluster="2x1x1")
    assert main(["report", "apply", str(path), str(report)], plugins=[FakeKinds()]) == 2
    assert path.read_text() == ORIGINAL
    err = capsys.readouterr().err
    assert f"{path}: nothing written" in err
    assert f"{report}: sm90-bf16-128x64x64-c1x1x1-none: judged other coordinates" in err
    assert "(cluster '2x1x1' there, '1x1x1' here)" in err


def test_files_that_disagree_are_refused(tc: TileRun, capsys: pytest.CaptureFixture[str]) -> None:
    path = tc.matrix(ORIGINAL)
    tc.verdicts(OBSERVED)
    first = report_of(tc, "a.json")
    tc.verdicts({**OBSERVED, "sm90-bf16-128x64x64-c1x1x1-none": "can_implement"})
    second = tc.path / "b.json"
    tc.run("--tile-report", str(second))
    assert main(["report", "apply", str(path), str(first), str(second)], plugins=[FakeKinds()]) == 2
    assert path.read_text() == ORIGINAL
    err = capsys.readouterr().err
    assert f"sm90-bf16-128x64x64-c1x1x1-none: {first} says initialize, {second} says can_implement" in err


ONE_TILE = """\
version: 1
backend: fake
suites:
  - arch: sm90
    dtype: bf16
    tile: [{tile}]
    problems: {{experts: 2, rows: 64, n: 256, k: 128}}
"""


def test_cases_of_another_matrix_are_left_out(tc: TileRun, capsys: pytest.CaptureFixture[str]) -> None:
    tc.verdicts(OBSERVED)
    tc.matrix(ORIGINAL)
    report = report_of(tc)
    other = tc.matrix(ONE_TILE.format(tile="64x64x64"), "o.yaml")
    assert main(["report", "apply", str(other), str(report)], plugins=[FakeKinds()]) == 0
    assert "3 judged case(s) of these files are not in" in capsys.readouterr().err
    assert "sm90-bf16-64x64x64-c1x1x1-none: {stage: can_implement" in other.read_text()
    nothing = tc.matrix(ONE_TILE.format(tile="64x128x64"), "n.yaml")
    assert main(["report", "apply", str(nothing), str(report)], plugins=[FakeKinds()]) == 2
    assert "no case of" in capsys.readouterr().err
    assert nothing.read_text() == ONE_TILE.format(tile="64x128x64")


@pytest.mark.parametrize("content", ["not json", '{"format": 3}'])
def test_an_unreadable_file_is_refused(tc: TileRun, capsys: pytest.CaptureFixture[str], content: str) -> None:
    path = tc.matrix(ORIGINAL)
    bad = tc.path / "bad.json"
    bad.write_text(content)
    assert main(["report", "apply", str(path), str(bad)], plugins=[FakeKinds()]) == 2
    assert str(bad) in capsys.readouterr().err
    assert path.read_text() == ORIGINAL


def test_a_matrix_that_does_not_load_is_refused(tc: TileRun, capsys: pytest.CaptureFixture[str]) -> None:
    tc.verdicts(OBSERVED)
    tc.matrix(ORIGINAL)
    report = report_of(tc)
    broken = tc.matrix("version: 1\nsuites: []\n", "broken.yaml")
    assert main(["report", "apply", str(broken), str(report)], plugins=[FakeKinds()]) == 2
    assert "broken.yaml" in capsys.readouterr().err
    missing = tc.path / "missing.yaml"
    assert main(["report", "apply", str(missing), str(report)], plugins=[FakeKinds()]) == 2
    assert "missing.yaml" in capsys.readouterr().err


def test_the_last_file_that_judged_a_case_gives_its_details(tc: TileRun) -> None:
    path = tc.matrix(ORIGINAL)
    tc.verdicts(OBSERVED)
    first = report_of(tc, "a.json")
    first_seen = OBSERVED["sm90-bf16-128x64x64-c1x1x1-none"]
    assert isinstance(first_seen, dict)
    later = {**first_seen, "smem": 250000}
    tc.verdicts({**OBSERVED, "sm90-bf16-128x64x64-c1x1x1-none": later})
    second = tc.path / "b.json"
    tc.run("--tile-report", str(second))
    assert main(["report", "apply", str(path), str(first), str(second)], plugins=[FakeKinds()]) == 0
    assert path.read_text() == UPDATED.replace("smem: 240000", "smem: 250000")
