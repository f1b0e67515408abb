"""Expectations match stage and, where the matrix records one, status: a known-bad case failing at
its stage for another reason is a failure that shows both, in every output, and --tile-update
records the status it now fails with."""

from __future__ import annotations

import json

from helpers.fake_backend import TileRun, verbose_outcomes

from pytest_tileconform.commands.cli import main

MATRIX = """\
version: 1
backend: fake
suites:
  - arch: sm90
    dtype: bf16
    problems: {experts: 2, rows: 64, n: 256, k: 128}
    tile: [128x64x64, 128x128x64, 128x256x64]
expectations:
  sm90-bf16-128x64x64-c1x1x1-none: {stage: initialize, status: "Error Internal", smem: 240000}
  sm90-bf16-128x128x64-c1x1x1-none: {stage: initialize, status: "Error Internal"}
  sm90-bf16-128x256x64-c1x1x1-none: {stage: initialize}
"""

SAME = "sm90-bf16-128x64x64-c1x1x1-none"  # the recorded status
OTHER = "sm90-bf16-128x128x64-c1x1x1-none"  # another status at the recorded stage
ANY = "sm90-bf16-128x256x64-c1x1x1-none"  # no status recorded: any
VERDICTS = {
    SAME: {"stage": "initialize", "status": "Error Internal", "smem": 240000, "limit": 232448},
    OTHER: {"stage": "initialize", "status": "Error Workspace Null"},
    ANY: {"stage": "initialize", "status": "Error Workspace Null"},
}


def run(tc: TileRun, *args: str):  # type: ignore[no-untyped-def]
    tc.matrix(MATRIX)
    tc.verdicts(VERDICTS)
    return tc.run("-v", *args)


def test_the_status_decides_between_known_bad_and_failure(tc: TileRun) -> None:
    result = run(tc)
    assert verbose_outcomes(result) == {
        f"m.yaml::{SAME}": "XFAIL",
        f"m.yaml::{OTHER}": "FAILED",
        f"m.yaml::{ANY}": "XFAIL",
    }
    assert result.ret == 1


def test_a_mismatch_shows_expected_and_actual_stage_and_status(tc: TileRun) -> None:
    result = run(tc)
    result.stdout.fnmatch_lines(
        [
            f"*_ {OTHER} _*",
            "expected rejection at stage initialize (status 'Error Internal'), but rejected at stage "
            "initialize (status 'Error Workspace Null')",
            "  verdict: initialize status='Error Workspace Null' [[]fake[]]",
            "*",
            "  expectation: m.yaml:10",
            "",
            "m.yaml:7: StatusMismatch",
        ]
    )
    lines = run(tc, "--tb=line").outlines
    assert any(
        line.startswith("m.yaml:7: expected rejection at stage initialize (status 'Error Internal'), but")
        for line in lines
    )


def test_another_stage_shows_the_status_too(tc: TileRun) -> None:
    tc.matrix(MATRIX)
    tc.verdicts({**VERDICTS, OTHER: {"stage": "can_implement", "status": "Error Invalid Problem"}})
    tc.run("-v").stdout.fnmatch_lines(
        [
            "expected rejection at stage initialize (status 'Error Internal'), but rejected at stage "
            "can_implement (status 'Error Invalid Problem')",
        ]
    )


def test_junit_and_results_file_carry_the_expected_status(tc: TileRun) -> None:
    run(tc, "--junitxml", "j.xml", "--tile-report", "r.json")
    text = (tc.path / "j.xml").read_text()
    assert '<property name="expected_status" value="Error Internal" />' in text
    cases = {entry["id"]: entry for entry in json.loads((tc.path / "r.json").read_text())["cases"]}
    assert cases[OTHER]["expected_status"] == "Error Internal"
    assert cases[OTHER]["outcome"] == "failed"
    assert "expected_status" not in cases[ANY]


def test_the_tables_call_a_mismatch_a_regression(tc: TileRun, capsys) -> None:  # type: ignore[no-untyped-def]
    run(tc, "--tile-report", "r.json")
    assert main(["report", "merge", str(tc.path / "r.json")]) == 0
    text = capsys.readouterr().out
    assert "| known-bad 1/1 (initialize, Error Internal, 240,000 B > 232,448) " in text
    assert (
        "| **regression 1/1** (initialize, expected initialize (status 'Error Internal'), Error "
        "Workspace Null) | known-bad 1/1 (initialize, Error Workspace Null) |" in text
    )
    assert (
        f"| D1 | `{OTHER}` | regression | initialize (status 'Error Internal') | initialize "
        "| Error Workspace Null |" in text
    )


def test_update_records_the_status_it_now_fails_with(tc: TileRun) -> None:
    result = run(tc, "--tile-update")
    result.stdout.fnmatch_lines(
        [
            "*m.yaml: 1 expectation(s) updated",
            f"  {OTHER}: initialize (status 'Error Internal') -> initialize (status 'Error Workspace Null')",
        ]
    )
    text = (tc.path / "m.yaml").read_text()
    assert f'  {OTHER}: {{stage: initialize, status: "Error Workspace Null", source: "fake"}}\n' in text
    # the other two entries are as they were: one matched, one records no status
    assert f'  {SAME}: {{stage: initialize, status: "Error Internal", smem: 240000}}\n' in text
    assert f"  {ANY}: {{stage: initialize}}\n" in text
    again = tc.run("-v")
    assert set(verbose_outcomes(again).values()) == {"XFAIL"} and again.ret == 0
