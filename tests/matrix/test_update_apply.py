"""Unit tests of update.py (expectation_change, entry_line, apply_changes) and files.write_atomic."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest
from helpers.fake_backend import TEST_KINDS

from pytest_tileconform.files import write_atomic
from pytest_tileconform.matrix.load import MatrixInvalid, load_matrix
from pytest_tileconform.matrix.rewrite import Change, apply_changes
from pytest_tileconform.matrix.update import (
    entry_line,
    expectation_change,
    update_matrix,
)
from pytest_tileconform.reasons import MATRIX_REASON_LIMIT
from pytest_tileconform.verdict import Stage, Verdict

A = "sm90-bf16-128x64x64-c1x1x1-none"
B = "sm90-bf16-128x128x64-c1x1x1-none"
C = "sm90-bf16-256x128x64-c1x1x1-none"

HEAD = """\
version: 1
backend: fake
suites:
  - {arch: sm90, dtype: bf16, tile: [128x64x64, 128x128x64, 256x128x64], problems: {experts: 1, rows: 8, n: 64, k: 64}}
"""  # noqa: E501


def verdict(stage: str | None, through: str = "numerics", **kw: object) -> Verdict:
    return Verdict(
        failed_stage=Stage(stage) if stage else None,
        judged_through=Stage(through),
        source="fake",
        **kw,  # type: ignore[arg-type]
    )


def add(case_id: str, stage: str) -> Change:
    return Change(case_id, "pass", stage, f"{case_id}: {{stage: {stage}}}")


def remove(case_id: str, before: str) -> Change:
    return Change(case_id, before, "pass", None)


# --- expectation_change / entry_line --------------------------------------------------------


def test_no_change_when_verdict_agrees() -> None:
    assert expectation_change(A, "pass", verdict(None)) is None
    assert expectation_change(A, "launch", verdict("launch")) is None


def test_change_to_a_new_stage() -> None:
    change = expectation_change(A, "initialize", verdict("compile"))
    assert change == Change(A, "initialize", "compile", f'{A}: {{stage: compile, source: "fake"}}')
    assert change.describe() == f"{A}: initialize -> compile"


def test_pass_removes_the_entry() -> None:
    assert expectation_change(A, "run", verdict(None)) == Change(A, "run", "pass", None)


def test_pass_short_of_the_expected_stage_changes_nothing() -> None:
    assert expectation_change(A, "run", verdict(None, through="launch")) is None
    assert expectation_change(A, "numerics", verdict(None, through="run")) is None
    # judged through the stage it expected, without the kernel running: removed, and named unrun
    assert expectation_change(A, "launch", verdict(None, through="launch")) == Change(
        A, "launch", "unrun (entry removed: expect a pass; the kernel did not run)", None
    )
    assert expectation_change(A, "launch", verdict(None, through="numerics")) == remove(A, "launch")


def test_entry_line_fields_in_order() -> None:
    line = entry_line(
        A,
        verdict(
            "initialize",
            status="kErrorWorkspaceNull",
            smem_requested=240000,
            smem_limit=232448,
            detail='too much smem: "quoted"\nsecond line',
        ),
    )
    assert line == (
        f'{A}: {{stage: initialize, status: "kErrorWorkspaceNull", smem: 240000, '
        'limit: 232448, source: "fake", reason: "too much smem: \\"quoted\\"\\nsecond line"}'
    )


def test_entry_line_keeps_a_long_reason_whole() -> None:
    """A reason of some hundred characters (the sm120 finalize tiles' has 575) is kept whole."""
    detail = "cuTensorMapEncodeTiled: NULL globalAddress; " * 40
    line = entry_line(A, verdict("run", detail=detail))
    assert line == f'{A}: {{stage: run, source: "fake", reason: "{detail.strip()}"}}'


def test_entry_line_cuts_a_runaway_reason_at_a_word_with_a_marker() -> None:
    detail = "word " * 1000
    line = entry_line(A, verdict("run", detail=detail))
    kept = "word " * (MATRIX_REASON_LIMIT // 5)
    cut = len(detail.strip()) - len(kept.strip())
    assert line == f'{A}: {{stage: run, source: "fake", reason: "{kept.strip()} [... {cut} characters cut]"}}'


def test_entry_line_reason_has_stable_paths() -> None:
    detail = (
        "/home/ci/.cache/pytest-tileconform/.build-k3j2x9q1/0123456789abcdef0123456789abcdef/"
        "tu.cu(13): error: static assertion failed"
    )
    line = entry_line(
        A, verdict("compile", status="/tmp/tileconform-run-ab12cd34/verdict.json", detail=detail)
    )
    assert line == (
        f'{A}: {{stage: compile, status: "verdict.json", source: "fake", '
        'reason: "tu.cu(13): error: static assertion failed"}'
    )


def test_entry_line_is_valid_yaml_for_awkward_text(tmp_path: Path) -> None:
    detail = "colon: hash # brace } bracket ] quote ' \" backslash \\ unicode \u00b5s"
    line = entry_line(A, verdict("run", status="a: b", detail=detail))
    text = HEAD + "expectations:\n  " + line + "\n"
    loaded = load_matrix(tmp_path / "m.yaml", TEST_KINDS, text=text)
    assert loaded.model.expectations is not None
    expectation = loaded.model.expectations[A]
    assert (expectation.stage, expectation.status, expectation.reason) == ("run", "a: b", detail)


# --- apply_changes ---------------------------------------------------------------------------


def test_apply_changes_without_changes_is_identity(tmp_path: Path) -> None:
    text = HEAD + "expectations:\n  # c\n  " + A + ": {stage: run}  # keep\n"
    assert apply_changes(tmp_path / "m.yaml", text, {}) == text


def test_apply_changes_keeps_indentation_of_the_block(tmp_path: Path) -> None:
    text = HEAD + "expectations:\n    " + A + ": {stage: run}\n\nother_comment: 1\n"
    new = apply_changes(tmp_path / "m.yaml", text, {B: add(B, "compile")})
    assert new == (
        HEAD
        + "expectations:\n    "
        + A
        + ": {stage: run}\n    "
        + B
        + ": {stage: compile}\n\nother_comment: 1\n"
    )


def test_apply_changes_replaces_a_multiline_entry_with_one_line(tmp_path: Path) -> None:
    text = (
        HEAD
        + "expectations:\n"
        + f"  {A}:\n    stage: run\n    reason: >-\n      folded\n      text\n"
        + f"  # about {B}\n  {B}: {{stage: launch}}\n"
    )
    new = apply_changes(tmp_path / "m.yaml", text, {A: add(A, "compile")})
    assert new == (
        HEAD + f"expectations:\n  {A}: {{stage: compile}}\n  # about {B}\n  {B}: {{stage: launch}}\n"
    )


def test_apply_changes_removes_add_and_changes_together(tmp_path: Path) -> None:
    text = HEAD + f"expectations:\n  {A}: {{stage: run}}\n  {B}: {{stage: launch}}\n# end\n"
    new = apply_changes(
        tmp_path / "m.yaml",
        text,
        {A: remove(A, "run"), B: add(B, "numerics"), C: add(C, "compile")},
    )
    assert new == HEAD + f"expectations:\n  {B}: {{stage: numerics}}\n  {C}: {{stage: compile}}\n# end\n"


def test_apply_changes_removing_an_absent_entry_does_nothing(tmp_path: Path) -> None:
    text = HEAD + f"expectations:\n  {A}: {{stage: run}}\n"
    assert apply_changes(tmp_path / "m.yaml", text, {B: remove(B, "run")}) == text
    assert apply_changes(tmp_path / "m.yaml", HEAD, {B: remove(B, "run")}) == HEAD


def test_apply_changes_refuses_flow_style_block(tmp_path: Path) -> None:
    text = HEAD + f"expectations: {{{A}: {{stage: run}}}}\n"
    with pytest.raises(ValueError, match=r"m\.yaml:5:1: --tile-update needs 'expectations' in block"):
        apply_changes(tmp_path / "m.yaml", text, {B: add(B, "compile")})


def test_apply_changes_on_crlf_text_keeps_line_endings(tmp_path: Path) -> None:
    text = (HEAD + f"expectations:\n  {A}: {{stage: run}}\n").replace("\n", "\r\n")
    new = apply_changes(tmp_path / "m.yaml", text, {A: add(A, "compile")})
    assert new == text.replace("{stage: run}", "{stage: compile}")


# --- write_atomic / update_matrix ----------------------------------------------------------


def test_write_atomic_replaces_content_and_leaves_no_temp_files(tmp_path: Path) -> None:
    path = tmp_path / "m.yaml"
    path.write_text("old\n")
    write_atomic(path, "new\n\u00b5\n")
    assert path.read_text(encoding="utf-8") == "new\n\u00b5\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["m.yaml"]


def test_write_atomic_keeps_the_file_mode(tmp_path: Path) -> None:
    path = tmp_path / "m.yaml"
    path.write_text("old\n")
    path.chmod(0o640)
    write_atomic(path, "new\n")
    assert stat.S_IMODE(path.stat().st_mode) == 0o640


def test_write_atomic_creates_a_missing_file(tmp_path: Path) -> None:
    path = tmp_path / "r.json"
    write_atomic(path, "{}\n")
    assert path.read_text() == "{}\n"
    assert stat.S_IMODE(path.stat().st_mode) == 0o644
    assert sorted(p.name for p in tmp_path.iterdir()) == ["r.json"]


def test_write_atomic_failure_leaves_the_original(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "m.yaml"
    path.write_text("original\n")

    def broken_replace(src: object, dst: object) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "replace", broken_replace)
    with pytest.raises(OSError, match="No space left on device"):
        write_atomic(path, "new\n")
    assert path.read_text() == "original\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["m.yaml"]


def test_write_atomic_failure_while_writing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "m.yaml"
    path.write_text("original\n")

    def broken_fsync(fd: int) -> None:
        raise OSError(5, "Input/output error")

    monkeypatch.setattr(os, "fsync", broken_fsync)
    with pytest.raises(OSError, match="Input/output error"):
        write_atomic(path, "new\n")
    assert path.read_text() == "original\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["m.yaml"]


def test_update_matrix_writes_the_changes(tmp_path: Path) -> None:
    path = tmp_path / "m.yaml"
    path.write_text(HEAD)
    update_matrix(path, TEST_KINDS, {A: add(A, "launch")})
    assert path.read_text() == HEAD + f"expectations:\n  {A}: {{stage: launch}}\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["m.yaml"]


def test_update_matrix_does_not_write_a_matrix_that_would_not_load(tmp_path: Path) -> None:
    path = tmp_path / "m.yaml"
    path.write_text(HEAD)
    bad = Change(A, "pass", "launch", f"{A}: {{stage: lunch}}")
    with pytest.raises(MatrixInvalid, match=r"m\.yaml:6:\d+: .*stage"):
        update_matrix(path, TEST_KINDS, {A: bad})
    assert path.read_text() == HEAD
    assert sorted(p.name for p in tmp_path.iterdir()) == ["m.yaml"]
