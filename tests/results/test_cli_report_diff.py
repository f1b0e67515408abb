"""tileconform report diff on shipped results files and on runs edited through the store."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from helpers.evidence import report
from helpers.paths import REPO

from pytest_tileconform.commands.cli import main
from pytest_tileconform.results.model import CaseEntry, ResultsDocument
from pytest_tileconform.results.store import read_results, write_results
from pytest_tileconform.verdict import Stage

#: the virtual sm120 and sm120-flashinfer matrices in one run: 126 cases, 38 ids in both matrices,
#: six known-bad (xfailed at initialize)
SM12X = report("sm12x-virtual-after-reshape")
#: the 38-case sm120 matrix (two known-bad) and the 88 generated configurations before their
#: expectations were recorded (the four finalize rejections failed pytest)
SM120 = report("sm120-virtual")
GENERATED = report("sm120-flashinfer-virtual")

FINALIZE = "sm120-nvfp4-bf16-128x256x128-c1x1x1-finalize"
PASSING = "sm120-nvfp4-bf16-128x128x128-c1x1x1-none"


def _diff(capsys: pytest.CaptureFixture[str], *argv: str | Path) -> tuple[int, str, str]:
    status = main(["report", "diff", *map(str, argv)])
    captured = capsys.readouterr()
    return status, captured.out, captured.err


def _section(text: str, heading: str) -> list[str]:
    if f"## {heading} (" not in text:
        return []
    body = text.split(f"## {heading} (", 1)[1].split("\n## ", 1)[0]
    return [line for line in body.splitlines() if line.startswith("| `")]


def _entry(document: ResultsDocument, matrix: str, case_id: str) -> CaseEntry:
    return next(e for e in document.cases if e.id == case_id and Path(e.matrix or "").name == matrix)


def _edited(tmp_path: Path) -> Path:
    """The sm12x run with, in sm120.yaml only, the known-bad finalize tile passing (a strict
    XPASS, pytest's 'failed'); in sm120-flashinfer.yaml a passing tile refused at initialize;
    one case skipped without a verdict and one gone."""
    document = read_results(SM12X)
    fixed = _entry(document, "sm120.yaml", FINALIZE)
    assert fixed.verdict is not None and fixed.outcome == "xfailed"
    fixed.outcome = "failed"
    fixed.verdict = fixed.verdict.model_copy(
        update={"failed_stage": None, "outcome": "pass", "status": "", "smem_requested": 98304}
    )
    broken = _entry(document, "sm120-flashinfer.yaml", PASSING)
    assert broken.verdict is not None and broken.outcome == "unrun"  # a virtual pass
    broken.outcome = "failed"
    broken.verdict = broken.verdict.model_copy(
        update={"failed_stage": Stage.INITIALIZE, "outcome": "initialize", "status": "Error Internal"}
    )
    skipped = _entry(document, "sm120.yaml", "sm120-mxfp8xmxfp4-bf16-128x64x128-c1x1x1-none")
    skipped.outcome, skipped.verdict, skipped.skip_reason = "skipped", None, "nvcc is not installed"
    document.cases = [e for e in document.cases if e.id != "sm120-nvfp4-fp16-128x32x256-c1x1x1-none"]
    path = tmp_path / "new.json"
    write_results(path, ResultsDocument.model_validate(document.to_json()))
    return path


def test_a_run_against_its_own_baseline(capsys: pytest.CaptureFixture[str]) -> None:
    status, out, err = _diff(capsys, SM12X, SM12X)
    assert status == 0 and err == ""
    assert "126 case(s) in both. 0 new regression(s)" in out
    assert "judged by virtual sm120 (126)" in out
    assert "No case changed its category, verdict, status or expectation." in out


def test_ids_in_two_matrices_are_diffed_apart(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    status, out, err = _diff(capsys, SM12X, _edited(tmp_path))
    assert status == 1
    assert "1 new regression(s) in" in err
    assert _section(out, "New regressions") == [
        f"| `sm120-flashinfer.yaml::{PASSING}` | pass | unrun (through launch) "
        "| **regression: initialize (Error Internal, 89,088 B)** |"
    ]
    assert _section(out, "Fixes") == [
        f"| `sm120.yaml::{FINALIZE}` | initialize "
        "| known-bad: initialize (Error Internal, 102,400 B > 101,376) | **fixed†: unrun** |"
    ]
    assert _section(out, "Newly not judged") == [
        "| `sm120.yaml::sm120-mxfp8xmxfp4-bf16-128x64x128-c1x1x1-none` | pass | unrun (through launch) "
        "| not judged: nvcc is not installed |"
    ]
    assert _section(out, "Removed") == [
        "| `sm120-nvfp4-fp16-128x32x256-c1x1x1-none` | pass | unrun (through launch) | — |"
    ]
    # the same id in the other matrix did not change: it is in no section
    assert f"`sm120-flashinfer.yaml::{FINALIZE}`" not in out
    assert "125 case(s) in both. **1 new regression(s)** · 1 fix(es) · 0 changed · 1 newly not judged" in out


def test_expectations_recorded_after_a_run(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The generated sm120 matrix before its expectations (four regressions) against the run
    after them (four known-bad): no new regression; the other way round, four."""
    status, out, _ = _diff(capsys, GENERATED, SM12X)
    assert status == 0
    changed = _section(out, "Changed verdict or expectation")
    assert len(changed) == 4
    assert changed[0] == (
        "| `sm120-flashinfer.yaml::sm120-nvfp4-bf16-128x256x128-c1x1x1-finalize` | pass → initialize "
        "| regression: initialize (Error Internal, 102,400 B > 101,376) "
        "| known-bad: initialize (Error Internal, 102,400 B > 101,376) |"
    )
    assert "<details><summary>38 case(s)</summary>" in out  # sm120.yaml's cases, all added
    output = tmp_path / "diff.md"
    assert main(["report", "diff", str(SM12X), str(GENERATED), "-o", str(output)]) == 1
    assert len(_section(output.read_text(), "New regressions")) == 4


def test_shipped_matrices_of_one_day(capsys: pytest.CaptureFixture[str]) -> None:
    """Two files of different matrices: their ids are matched, the rest is added or removed."""
    status, out, _ = _diff(capsys, SM120, GENERATED)
    assert status == 1
    assert len(_section(out, "New regressions")) == 4
    assert "38 case(s) in both." in out and "48 added" in out


def test_bad_input(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "t.json").write_text('{"format": 1, "cases": [{"id": "x"}]}')
    status, out, err = _diff(capsys, SM120, tmp_path / "t.json")
    assert (status, out) == (2, "")
    assert "t.json: cases[0]: missing 'case'" in err


def test_no_common_case_warns(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    status, _, err = _diff(capsys, report("sm100-virtual"), SM120)
    assert status == 0
    assert "warning: no case of" in err and "is it the right baseline?" in err


def test_help() -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "pytest_tileconform", "report", "diff", "--help"],
        capture_output=True,
        text=True,
        cwd=REPO,
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith("usage: tileconform report diff")
    assert "1 NEW has a regression OLD did not have" in proc.stdout.replace("\n", " ").replace("  ", " ")
