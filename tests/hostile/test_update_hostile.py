"""Hostile cases of ``--tile-update``'s read-modify-write (:func:`pytest_tileconform.matrix.update.update_matrix`).

Each row of ``ROWS`` is something that happens to the matrix between the run loading it and the
update writing it (``meanwhile``), the changes the run wants, and the documented outcome:

* ``written``: the run's changes are in the file, and whatever ``meanwhile`` did survives;
* ``already``: the file already says what the run would write; nothing to write;
* ``conflict``: the expectation was edited meanwhile to a third thing; the change is refused
  with a message and the edit kept;
* ``gone``: the case left the matrix meanwhile; the change is refused by name;
* ``refused`` / ``invalid`` / ``flow``: the whole matrix is refused (UpdateRefused, MatrixInvalid,
  Unrewritable) with a message, and the file is left byte for byte as ``meanwhile`` left it.

No row may lose an edit or leave a lock or temporary file of its own behind; a file beside the
matrix that this tool did not make (a user's ``.m.yaml.x.tmp``) is never touched.
"""

# ruff: noqa: E501  (the table rows read best one to a line)
from __future__ import annotations

import multiprocessing
import os
import signal
import stat
import threading
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from helpers.fake_backend import TEST_KINDS

from pytest_tileconform import files
from pytest_tileconform.matrix.load import MatrixInvalid, load_matrix
from pytest_tileconform.matrix.rewrite import Change, Unrewritable
from pytest_tileconform.matrix.schema import Expectation
from pytest_tileconform.matrix.update import (
    UpdateRefused,
    matrix_lock,
    update_matrix,
)

A = "sm90-bf16-128x64x64-c1x1x1-none"
B = "sm90-bf16-128x128x64-c1x1x1-none"
C = "sm90-bf16-256x128x64-c1x1x1-none"
D = "sm90-bf16-64x64x64-c1x1x1-none"

BASE = f"""\
version: 1
backend: fake
suites:
  - arch: sm90
    dtype: bf16
    tile: [128x64x64, 128x128x64, 256x128x64, 64x64x64]
    problems: {{experts: 2, rows: 64, n: 256, k: 128}}
expectations:
  {B}: {{stage: compile}}
  {C}: {{stage: launch, reason: "old"}}
"""

#: What the run started with, for the cases it changes.
STARTED = {A: None, B: Expectation(stage="compile"), C: Expectation(stage="launch", reason="old"), D: None}


def add(case_id: str, stage: str, before: str = "pass") -> Change:
    return Change(case_id, before, stage, f"{case_id}: {{stage: {stage}}}")


def drop(case_id: str, before: str) -> Change:
    return Change(case_id, before, "pass", None)


ADD_A = {A: add(A, "initialize")}
MOVE_B = {B: add(B, "run", "compile")}
DROP_C = {C: drop(C, "launch")}


def edit(old: str, new: str) -> Callable[[Path], None]:
    def apply(path: Path) -> None:
        text = path.read_text(encoding="utf-8")
        assert old in text, old
        path.write_text(text.replace(old, new), encoding="utf-8")

    return apply


def write(text: str) -> Callable[[Path], None]:
    def apply(path: Path) -> None:
        path.write_text(text, encoding="utf-8")

    return apply


def nothing(path: Path) -> None:
    pass


#: files beside the matrix that a row made and that must still be there, unchanged, after the update
KEPT: dict[str, str] = {}


@pytest.fixture(autouse=True)
def _kept_of_this_test() -> None:
    KEPT.clear()


def leftovers(
    *names: str, age: float = 2 * files.STALE_TMP_SECONDS, kept: bool = False
) -> Callable[[Path], None]:
    """Temporary files beside the matrix, ``age`` seconds old: the tool's own (named
    ``.m.yaml.tileconform-*.tmp``) from an update killed with ``kill -9``, or a user's own."""

    def apply(path: Path) -> None:
        for name in names:
            leftover = path.parent / name
            leftover.write_text(f"half a matrix {name}")
            old = time.time() - age
            os.utime(leftover, (old, old))
            if kept:
                KEPT[name] = leftover.read_text()

    return apply


def read_only(path: Path) -> None:
    path.chmod(stat.S_IRUSR | stat.S_IRGRP)


def delete(path: Path) -> None:
    path.unlink()


def old_lock_file(path: Path) -> None:
    """The lock file an older version made beside the matrix: no lock now, and not this one's."""
    (path.parent / ".m.yaml.lock").write_text("")
    KEPT[".m.yaml.lock"] = ""


def crlf(path: Path) -> None:
    path.write_bytes(path.read_bytes().replace(b"\n", b"\r\n"))


ROWS: list[tuple[str, Callable[[Path], None], dict[str, Change], str]] = [
    ("nothing-meanwhile-add", nothing, ADD_A, "written"),
    ("nothing-meanwhile-change", nothing, MOVE_B, "written"),
    ("nothing-meanwhile-remove", nothing, DROP_C, "written"),
    ("comment-added", edit("suites:\n", "# hand comment\nsuites:\n"), ADD_A, "written"),
    ("other-expectation-edited", edit(f"{C}: {{stage: launch", f"{C}: {{stage: run"), MOVE_B, "written"),
    ("other-expectation-added", edit("expectations:\n", f"expectations:\n  {D}: {{stage: run}}\n"), ADD_A, "written"),
    ("other-expectation-removed", edit(f'  {C}: {{stage: launch, reason: "old"}}\n', ""), MOVE_B, "written"),
    ("same-expectation-edited", edit(f"{B}: {{stage: compile}}", f"{B}: {{stage: launch}}"), MOVE_B, "conflict"),
    ("same-expectation-reason-edited", edit(f"{B}: {{stage: compile}}", f'{B}: {{stage: compile, reason: "x"}}'), MOVE_B, "conflict"),
    ("same-expectation-removed", edit(f"  {B}: {{stage: compile}}\n", ""), MOVE_B, "conflict"),
    ("same-expectation-added-else", edit("expectations:\n", f"expectations:\n  {A}: {{stage: run}}\n"), ADD_A, "conflict"),
    ("same-expectation-added-same", edit("expectations:\n", f"expectations:\n  {A}: {{stage: initialize}}\n"), ADD_A, "already"),
    ("same-expectation-edited-to-wanted", edit(f"{B}: {{stage: compile}}", f"{B}: {{stage: run}}"), MOVE_B, "already"),
    ("removal-but-reason-edited", edit('reason: "old"', 'reason: "new"'), DROP_C, "conflict"),
    ("removal-already-removed", edit(f'  {C}: {{stage: launch, reason: "old"}}\n', ""), DROP_C, "already"),
    ("case-left-the-matrix", edit("tile: [128x64x64, ", "tile: ["), ADD_A, "gone"),
    ("new-suite-added", edit("expectations:\n", "  - arch: sm90\n    dtype: fp16\n    tile: [128x64x64]\n    problems: {experts: 1, rows: 8, n: 64, k: 64}\nexpectations:\n"), ADD_A, "written"),
    ("replaced-reformatted", write(BASE.replace("version: 1\n", "# replaced\nversion: 1\n").replace("backend: fake", "backend:   fake")), ADD_A, "written"),
    ("replaced-crlf", crlf, ADD_A, "written"),
    ("deleted", delete, ADD_A, "refused"),
    ("read-only", read_only, ADD_A, "refused"),
    ("invalid-yaml", edit("suites:\n", "suites: [\n"), ADD_A, "invalid"),
    ("invalid-version", edit("version: 1", "version: 2"), ADD_A, "invalid"),
    ("invalid-empty", write(""), ADD_A, "invalid"),
    ("invalid-not-a-mapping", write("- a\n- b\n"), ADD_A, "invalid"),
    ("invalid-bad-stage-meanwhile", edit("{stage: compile}", "{stage: lunch}"), ADD_A, "invalid"),
    ("flow-style-meanwhile", edit(f'expectations:\n  {B}: {{stage: compile}}\n  {C}: {{stage: launch, reason: "old"}}\n', f"expectations: {{{B}: {{stage: compile}}}}\n"), MOVE_B, "flow"),
    ("kill9-temp-left", leftovers(".m.yaml.tileconform-abc123.tmp"), ADD_A, "written"),
    ("kill9-several-temps-left", leftovers(".m.yaml.tileconform-a.tmp", ".m.yaml.tileconform-b.tmp"), ADD_A, "written"),
    ("tool-temp-just-made-kept", leftovers(".m.yaml.tileconform-new.tmp", age=0, kept=True), ADD_A, "written"),
    ("user-temp-kept", leftovers(".m.yaml.abc123.tmp", ".m.yaml.mine.tmp", kept=True), ADD_A, "written"),
    ("user-temp-like-tool-kept", leftovers(".m.yaml.tileconformX.tmp", ".m.yaml.tileconform-.bak", kept=True), ADD_A, "written"),
    ("old-lock-file-left", old_lock_file, ADD_A, "written"),
]  # fmt: skip


def _unchanged(path: Path, before: bytes | None) -> None:
    if before is None:
        assert not path.exists()
    else:
        assert path.read_bytes() == before


def _no_debris(folder: Path) -> None:
    """Nothing of the update's own beside the matrix, and every file a row made there as it was."""
    debris = {p.name for p in folder.iterdir() if p.name.startswith(".m.yaml")} - set(KEPT)
    assert debris == set()
    assert {name: (folder / name).read_text() for name in KEPT} == KEPT


@pytest.mark.parametrize(
    ("meanwhile", "changes", "expected"), [r[1:] for r in ROWS], ids=[r[0] for r in ROWS]
)
def test_update_after_a_change_meanwhile(
    tmp_path: Path, meanwhile: Callable[[Path], None], changes: dict[str, Change], expected: str
) -> None:
    path = tmp_path / "m.yaml"
    path.write_text(BASE, encoding="utf-8")
    meanwhile(path)
    before = path.read_bytes() if path.exists() else None
    started = {k: STARTED[k] for k in changes}
    if expected in ("refused", "invalid", "flow"):
        error = {"refused": UpdateRefused, "invalid": MatrixInvalid, "flow": Unrewritable}[expected]
        message = {"refused": "nothing written", "invalid": "m.yaml:", "flow": "block style"}[expected]
        with pytest.raises(error, match=message):
            update_matrix(path, TEST_KINDS, changes, started)
        _unchanged(path, before)
        _no_debris(tmp_path)
        return
    outcome = update_matrix(path, TEST_KINDS, changes, started)
    (case_id,) = changes
    text = path.read_text(encoding="utf-8") if path.exists() else ""
    if expected == "written":
        assert list(outcome.written) == [case_id] and not outcome.refused
        assert before is not None
        wanted = changes[case_id].line
        if wanted is None:
            assert f"{case_id}:" not in text
        else:
            assert wanted in text
        # every line the edit left is still there, except the changed entry's own
        kept = [line for line in before.decode().splitlines() if not line.strip().startswith(f"{case_id}:")]
        assert all(line in text.splitlines() for line in kept)
        if b"\r\n" in before:
            assert path.read_bytes().count(b"\r\n") == path.read_bytes().count(b"\n")
        load_matrix(path, TEST_KINDS)
    elif expected == "already":
        assert list(outcome.already) == [case_id] and not outcome.written
        _unchanged(path, before)
    elif expected == "conflict":
        assert list(outcome.refused) == [case_id] and not outcome.written
        assert "edited during the run" in outcome.refused[case_id][1]
        _unchanged(path, before)
    elif expected == "gone":
        assert list(outcome.refused) == [case_id]
        assert "no longer in the matrix" in outcome.refused[case_id][1]
        _unchanged(path, before)
    _no_debris(tmp_path)


def test_corpus_is_big_enough() -> None:
    assert len(ROWS) >= 30
    assert len({r[0] for r in ROWS}) == len(ROWS)


def test_another_matrix_temp_file_is_not_touched(tmp_path: Path) -> None:
    path = tmp_path / "m.yaml"
    path.write_text(BASE)
    other = tmp_path / ".other.yaml.tileconform-x.tmp"
    other.write_text("not mine")
    old = time.time() - 2 * files.STALE_TMP_SECONDS
    os.utime(other, (old, old))
    update_matrix(path, TEST_KINDS, ADD_A, {A: None})
    assert other.read_text() == "not mine"


def test_a_held_lock_refuses_after_the_timeout(tmp_path: Path) -> None:
    path = tmp_path / "m.yaml"
    path.write_text(BASE)
    held, release = threading.Event(), threading.Event()

    def holder() -> None:
        with matrix_lock(path, 5):
            held.set()
            release.wait(10)

    thread = threading.Thread(target=holder)
    thread.start()
    held.wait(5)
    try:
        with pytest.raises(UpdateRefused, match="another --tile-update has held"):
            update_matrix(path, TEST_KINDS, ADD_A, {A: None}, lock_timeout=0.2)
        assert path.read_text() == BASE
    finally:
        release.set()
        thread.join()


def test_an_update_waits_for_the_lock_and_then_writes_on_top(tmp_path: Path) -> None:
    path = tmp_path / "m.yaml"
    path.write_text(BASE)
    held = threading.Event()

    def holder() -> None:
        with matrix_lock(path, 5):
            held.set()
            time.sleep(0.3)
            edit("suites:\n", "# written while holding the lock\nsuites:\n")(path)

    thread = threading.Thread(target=holder)
    thread.start()
    held.wait(5)
    update_matrix(path, TEST_KINDS, ADD_A, {A: None})
    thread.join()
    text = path.read_text()
    line = ADD_A[A].line
    assert line is not None
    assert "# written while holding the lock" in text and line in text


def test_many_threads_updating_at_once_lose_nothing(tmp_path: Path) -> None:
    path = tmp_path / "m.yaml"
    path.write_text(BASE)
    runs = [{A: add(A, "initialize")}, {D: add(D, "run")}, MOVE_B, DROP_C]
    errors: list[BaseException] = []

    def run(changes: dict[str, Change]) -> None:
        try:
            update_matrix(path, TEST_KINDS, changes, {k: STARTED[k] for k in changes})
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    threads = [threading.Thread(target=run, args=(c,)) for c in runs]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    expectations = load_matrix(path, TEST_KINDS).model.expectations or {}
    assert {k: v.stage for k, v in expectations.items()} == {A: "initialize", D: "run", B: "run"}
    _no_debris(tmp_path)


def _killed_mid_write(path: str) -> None:
    """An update killed -9 while it holds the lock and has half-written its temporary file."""
    with matrix_lock(Path(path), 5):
        files.write_atomic(Path(path), "half", before_replace=lambda: os.kill(os.getpid(), signal.SIGKILL))


def test_an_update_killed_with_sigkill_leaves_nothing_that_blocks_the_next(tmp_path: Path) -> None:
    path = tmp_path / "m.yaml"
    path.write_text(BASE)
    process = multiprocessing.get_context("spawn").Process(target=_killed_mid_write, args=(str(path),))
    process.start()
    process.join(60)
    assert process.exitcode == -signal.SIGKILL
    (leftover,) = tmp_path.glob(".m.yaml.tileconform-*.tmp")
    old = time.time() - 2 * files.STALE_TMP_SECONDS  # its writer's lock went with it; and it is old
    os.utime(leftover, (old, old))
    outcome = update_matrix(path, TEST_KINDS, ADD_A, {A: None}, lock_timeout=10)
    assert list(outcome.written) == [A]
    assert path.read_text() == BASE.replace("expectations:\n", "expectations:\n") + f"  {ADD_A[A].line}\n"
    _no_debris(tmp_path)


def test_a_read_only_folder_is_refused_with_a_message(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The new file cannot be made where the folder is read-only (root can always make it, so
    the refusal is simulated where the temporary file is made)."""
    path = tmp_path / "m.yaml"
    path.write_text(BASE)

    def read_only_folder(*args: object, **kwargs: object) -> None:
        raise PermissionError(13, "Permission denied")

    monkeypatch.setattr("pytest_tileconform.files.tempfile.mkstemp", read_only_folder)
    with pytest.raises(UpdateRefused, match=r"the folder is read-only.*nothing written"):
        update_matrix(path, TEST_KINDS, ADD_A, {A: None})
    assert path.read_text() == BASE


def test_a_matrix_swapped_for_a_fifo_is_refused_without_reading_it(tmp_path: Path) -> None:
    path = tmp_path / "m.yaml"
    os.mkfifo(path)  # no writer: reading it would block for ever
    with pytest.raises(UpdateRefused, match="no longer a regular file; nothing written"):
        update_matrix(path, TEST_KINDS, ADD_A, {A: None}, lock_timeout=5)
    assert stat.S_ISFIFO(path.lstat().st_mode)
    _no_debris(tmp_path)
