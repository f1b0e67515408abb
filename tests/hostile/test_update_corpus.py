"""Hostile inputs of the write side, as users run it: ``pytest --tile-update`` (and ``tileconform
report apply``) on matrices written in every form the loader reads, and with things happening to
the file and beside it while the update writes.

Each row of ``FORMS`` is a matrix text and the documented outcome of one ``--tile-update`` run in
which case A fails at compile, case B at launch (and C at run, where the matrix has an entry for it): ``Written(text)``, exit 0 and exactly that
text; or ``Refused(message)``, exit 1, the message in the summary, and the file byte for byte as
it was (an entry refused alone: the others written). The tests below the table are the things
that happen to the file: hard links, a hand edit saved during the write, temporary files of a
user's beside it, and expectations larger than the input bounds would let a user write.
"""

# ruff: noqa: E501  (the matrix texts read best one line to a line)
from __future__ import annotations

import os
import threading
import time
from dataclasses import dataclass
from pathlib import Path

import pytest
from helpers.fake_backend import BASIC, BASIC_IDS, TEST_KINDS, FakeKinds, TileRun, matrix_errors, output

from pytest_tileconform import files
from pytest_tileconform.commands.cli import main
from pytest_tileconform.matrix import rewrite, update
from pytest_tileconform.matrix.bounds import MAX_BYTES, MAX_ENTRY_NODES
from pytest_tileconform.matrix.load import load_matrix
from pytest_tileconform.matrix.update import entry_line
from pytest_tileconform.verdict import Stage, Verdict

A, B, C = BASIC_IDS
A_LINE = f'{A}: {{stage: compile, source: "fake"}}'
B_LINE = f'{B}: {{stage: launch, source: "fake"}}'
SUITE = "  - arch: sm90\n    dtype: bf16\n    tile: [128x64x64, 128x128x64, 256x128x64]\n    problems: {experts: 2, rows: 64, n: 256, k: 128}\n"


@dataclass(frozen=True)
class Written:
    text: str


@dataclass(frozen=True)
class Refused:
    message: str
    written: tuple[str, ...] = ()  # the lines of other entries that were written


FORMS: list[tuple[str, str, Written | Refused]] = [
    ("comment-on-rewritten-entry",
     BASIC + f"expectations:\n  {B}: {{stage: compile}}   # measured on H100\n",
     Written(BASIC + f"expectations:\n  {B_LINE}  # measured on H100\n  {A_LINE}\n")),
    ("comment-on-rewritten-block-entry",
     BASIC + f"expectations:\n  {B}:   # why\n    stage: compile  # the old stage\n",
     Written(BASIC + f"expectations:\n  # the old stage\n  {B_LINE}  # why\n  {A_LINE}\n")),
    ("comment-on-empty-expectations",
     BASIC + "expectations:   # written by --tile-update\n",
     Written(BASIC + f"expectations:   # written by --tile-update\n  {A_LINE}\n  {B_LINE}\n")),
    ("comment-on-empty-flow-expectations",
     BASIC + "expectations: {}  # none yet\n",
     Written(BASIC + f"expectations:  # none yet\n  {A_LINE}\n  {B_LINE}\n")),
    ("comment-on-null-expectations",
     BASIC + "expectations: ~  # none yet\n",
     Written(BASIC + f"expectations:  # none yet\n  {A_LINE}\n  {B_LINE}\n")),
    ("block-entry-with-comment-and-blank-lines",
     BASIC + f"expectations:\n  {B}:\n    # hand written\n    stage: compile\n\n    reason: x\n  {C}: {{stage: run}}  # keep\n",
     Written(BASIC + f"expectations:\n  # hand written\n  {B_LINE}\n  {C}: {{stage: run}}  # keep\n  {A_LINE}\n")),
    ("block-scalar-reason",
     BASIC + f"expectations:\n  {B}:\n    stage: compile\n    reason: |\n      two\n      # lines\n  # between\n  {C}: {{stage: run}}\n",
     Written(BASIC + f"expectations:\n  {B_LINE}\n  # between\n  {C}: {{stage: run}}\n  {A_LINE}\n")),
    ("document-end",
     BASIC + "...\n",
     Written(BASIC + f"expectations:\n  {A_LINE}\n  {B_LINE}\n...\n")),
    ("document-end-with-expectations",
     BASIC + f"expectations:\n  {B}: {{stage: compile}}\n...\n# after the end\n",
     Written(BASIC + f"expectations:\n  {B_LINE}\n  {A_LINE}\n...\n# after the end\n")),
    ("document-start",
     "---\n" + BASIC,
     Written("---\n" + BASIC + f"expectations:\n  {A_LINE}\n  {B_LINE}\n")),
    ("indented-root",
     "".join(f"  {line}\n" for line in BASIC.splitlines()),
     Written("".join(f"  {line}\n" for line in BASIC.splitlines()) + f"  expectations:\n    {A_LINE}\n    {B_LINE}\n")),
    ("indented-root-with-expectations",
     "".join(f"   {line}\n" for line in (BASIC + f"expectations:\n  {B}: {{stage: compile}}\n").splitlines()),
     Written("".join(f"   {line}\n" for line in (BASIC + f"expectations:\n  {B_LINE}\n  {A_LINE}\n").splitlines()))),
    ("explicit-key-entry",
     BASIC + f"expectations:\n  ? {B}\n  : {{stage: compile}}  # asked\n  ? {C}\n  : {{stage: run}}\n",
     Written(BASIC + f"expectations:\n  {B_LINE}  # asked\n  ? {C}\n  : {{stage: run}}\n  {A_LINE}\n")),
    ("no-final-newline",
     BASIC + f"expectations:\n  {B}: {{stage: compile}}  # last",
     Written(BASIC + f"expectations:\n  {B_LINE}  # last\n  {A_LINE}\n")),
    ("alias-entry-rewritten",
     BASIC + f"expectations:\n  {C}: &run {{stage: run}}\n  {B}: *run  # same\n",
     Written(BASIC + f"expectations:\n  {C}: &run {{stage: run}}\n  {B_LINE}  # same\n  {A_LINE}\n")),
    ("anchor-another-entry-uses",
     BASIC + f"expectations:\n  {B}: &x {{stage: compile}}\n  {C}: *x\n",
     Refused(f"{B}: compile -> launch: its entry (line 9) holds the anchor &x that another entry uses (*x)", (A_LINE,))),
    ("flow-expectations",
     BASIC + f"expectations: {{{B}: {{stage: compile}}}}\n",
     Refused("--tile-update needs 'expectations' in block style, one entry per line; here it is one flow mapping {...}")),
    ("flow-root",
     "{version: 1, backend: fake, suites: [{arch: sm90, dtype: bf16, tile: [128x64x64, 128x128x64, 256x128x64], problems: {experts: 2, rows: 64, n: 256, k: 128}}]}\n",
     Refused("the matrix is one flow mapping ({...}); the update adds expectation lines only to a block mapping")),
    ("explicit-expectations-key-empty",
     "version: 1\nbackend: fake\nsuites:\n" + SUITE + "? expectations\n:\n",
     Refused("an explicit '? expectations' key with no entries: write 'expectations:'")),
]  # fmt: skip


@pytest.mark.parametrize(("text", "expected"), [r[1:] for r in FORMS], ids=[r[0] for r in FORMS])
def test_every_form_the_loader_reads_is_updated_or_refused_by_name(
    tc: TileRun, text: str, expected: Written | Refused
) -> None:
    path = tc.path / "m.yaml"
    path.write_text(text, encoding="utf-8")
    tc.verdicts({A: "compile", B: "launch", **({C: "run"} if C in text else {})})
    result = tc.run("--tile-update")
    if isinstance(expected, Written):
        assert result.ret == 0, output(result)
        assert path.read_text(encoding="utf-8") == expected.text
        assert tc.run().ret == 0  # the written file loads and agrees with the run
        return
    assert result.ret == 1, output(result)
    assert expected.message in output(result)
    if expected.written:
        assert [line for line in expected.written if line not in path.read_text()] == []
    else:
        assert path.read_text(encoding="utf-8") == text


def test_two_updates_through_hard_links_keep_both_runs_entries(tc: TileRun) -> None:
    """Two folders share one matrix by a hard link: each update is seen through both names (it
    is written in place), and the second run, through the other name, adds to the first's."""
    shared = tc.matrix(BASIC, "a.yaml")
    (tc.path / "other").mkdir()
    other = tc.path / "other" / "m.yaml"
    os.link(shared, other)
    tc.verdicts({A: "compile"})
    assert tc.run("--tile-update", matrix="a.yaml").ret == 0
    tc.verdicts({A: "compile", B: "launch"})
    assert tc.run("--tile-update", matrix="other/m.yaml").ret == 0
    assert os.path.samefile(shared, other) and shared.stat().st_nlink == 2
    assert shared.read_text() == BASIC + f"expectations:\n  {A_LINE}\n  {B_LINE}\n"
    tc.run(matrix="a.yaml").assert_outcomes(passed=1, xfailed=2)


def test_an_update_through_one_name_waits_for_one_through_another(tc: TileRun) -> None:
    """The lock is the file's: an update through ``other/m.yaml`` holds it (and edits the file)
    while a run through ``a.yaml`` updates; the run waits, then writes on top of that edit."""
    shared = tc.matrix(BASIC, "a.yaml")
    (tc.path / "other").mkdir()
    other = tc.path / "other" / "m.yaml"
    os.link(shared, other)
    held, done = threading.Event(), threading.Event()

    def holder() -> None:
        with update.matrix_lock(other, 30):
            held.set()
            time.sleep(1.0)
            other.write_text(BASIC.replace("suites:", "# edited through the other name\nsuites:"))
        done.set()

    thread = threading.Thread(target=holder)
    thread.start()
    held.wait(30)
    tc.verdicts({A: "compile"})
    result = tc.run("--tile-update", matrix="a.yaml")
    thread.join()
    assert done.is_set() and result.ret == 0, output(result)
    text = shared.read_text()
    assert "# edited through the other name" in text and A_LINE in text and os.path.samefile(shared, other)


@pytest.fixture(params=["renamed", "hard-linked"])
def edited_while_written(
    request: pytest.FixtureRequest, tc: TileRun, monkeypatch: pytest.MonkeyPatch
) -> Path:
    """The matrix, and an editor that saves it in place after the update read it, just before the
    update writes (at the update's text edit, which runs between the two)."""
    path: Path = tc.matrix(BASIC + f"expectations:\n  {B}: {{stage: compile}}\n")
    if request.param == "hard-linked":
        os.link(path, tc.path / "link.yaml")
    real = rewrite.apply_changes

    def apply_then_edit(*args: object, **kwargs: object) -> str:
        text = real(*args, **kwargs)  # type: ignore[arg-type]
        with path.open("r+", encoding="utf-8") as editor:  # saved in place, no lock, as vim may
            edited = editor.read().replace("suites:", "# saved by hand\nsuites:")
            editor.seek(0)
            editor.write(edited)
            editor.truncate()
        return text

    monkeypatch.setattr("pytest_tileconform.matrix.update.apply_changes", apply_then_edit)
    return path


def test_a_hand_edit_saved_during_the_write_is_kept(tc: TileRun, edited_while_written: Path) -> None:
    tc.verdicts({A: "compile", B: "compile"})
    result = tc.run("--tile-update")
    assert result.ret == 1
    result.stdout.fnmatch_lines(
        [
            f"{edited_while_written}: not updated: the matrix was changed while this update wrote it "
            "(a hand edit saved meanwhile?): nothing written, the change kept; rerun the update",
            f"{edited_while_written}: 1 expectation(s) NOT written:",
            f"  {A}: pass -> compile",
        ]
    )
    assert edited_while_written.read_text() == BASIC.replace("suites:", "# saved by hand\nsuites:") + (
        f"expectations:\n  {B}: {{stage: compile}}\n"
    )


def test_report_apply_keeps_a_hand_edit_saved_during_the_write(
    tc: TileRun, edited_while_written: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    tc.verdicts({A: "compile", B: "compile"})
    report = tc.path / "r.json"
    tc.run("--tile-report", str(report))
    status = main(["report", "apply", str(edited_while_written), str(report)], plugins=[FakeKinds()])
    err = capsys.readouterr().err
    assert status == 1, err
    assert "the matrix was changed while this update wrote it" in err
    assert "# saved by hand" in edited_while_written.read_text()
    assert A not in edited_while_written.read_text()


def test_only_the_tools_own_stale_temporary_files_are_removed(tc: TileRun) -> None:
    path = tc.matrix(BASIC)
    old = time.time() - 2 * files.STALE_TMP_SECONDS
    mine = {
        name: f"the user's {name}"
        for name in (".m.yaml.mine.tmp", ".m.yaml.1.tmp", ".m.yaml.tileconform.tmp")
    }
    for name, text in mine.items():
        (tc.path / name).write_text(text)
        os.utime(tc.path / name, (old, old))
    stale = tc.path / ".m.yaml.tileconform-k1ll3d.tmp"  # an update killed with kill -9 left it
    stale.write_text("half a matrix")
    os.utime(stale, (old, old))
    tc.verdicts({A: "compile"})
    assert tc.run("--tile-update").ret == 0
    assert A_LINE in path.read_text()
    assert {name: (tc.path / name).read_text() for name in mine} == mine
    assert not stale.exists()
    assert sorted(p.name for p in tc.path.glob(".m.yaml*")) == sorted(mine)


PROBLEMS = 1000  # x 5 tiles: 5,000 cases
TILES = "[128x64x64, 128x128x64, 256x128x64, 64x64x64, 64x128x64]"
BIG = "version: 1\nbackend: fake\nsuites:\n  - arch: sm90\n    dtype: bf16\n    tile: {tiles}\n    problems:\n{rows}".format(
    tiles=TILES,
    rows="".join(f"      - {{name: p{i}, experts: 1, rows: 64, n: 256, k: 128}}\n" for i in range(PROBLEMS)),
)


def test_the_entries_an_update_of_5000_failing_cases_writes_load_again(tc: TileRun) -> None:
    """Every case of a 5,000-case matrix fails: the update writes 5,000 entries (about 70,000 YAML
    nodes counted field by field, over the 60,000 a user's file may have), and the next run must
    load them: an entry counts two nodes. The lines are the update's own (``entry_line``); the
    update itself, through two shards, is tests/integration/test_update_concurrent.py."""
    path = tc.matrix(BIG)
    ids = [f"m.yaml::{case.id}" for case in load_matrix(path, TEST_KINDS).cases]
    assert len(ids) == 5000
    verdict = Verdict(
        failed_stage=Stage.INITIALIZE,
        judged_through=Stage.NUMERICS,
        source="virtual-sm90",
        status="kErrorInternal",
        detail="shared memory 240000 B over the opt-in limit 232448 B (the kernel's SharedStorage)",
        smem_requested=240000,
        smem_limit=232448,
    )
    entries = "".join(f"  {entry_line(i.split('::')[1], verdict)}\n" for i in ids)
    path.write_text(BIG + "expectations:\n" + entries)
    assert len(path.read_text()) > 1_000_000
    assert tc.collect() == ids


def test_an_expectation_entry_over_its_node_bound_is_refused_where_it_is(tc: TileRun) -> None:
    path = tc.matrix(BASIC + f"expectations:\n  {A}: {{stage: compile, reason: [{', '.join(['x'] * 70)}]}}\n")
    errors = matrix_errors(tc.run(), path)
    assert len(errors) == 1 and errors[0].startswith("9:")
    assert f"this expectation entry has more than {MAX_ENTRY_NODES} YAML nodes" in errors[0]


def test_an_update_over_the_byte_bound_is_written_with_its_reasons_cut(tc: TileRun) -> None:
    """200 failures whose reasons are each a 2,000-character log (written 12 KB a line, as its
    control characters are escaped) would make a 2.4 MB matrix, over the 2 MB a matrix may be:
    the update cuts the reasons it writes until the file fits, says so, and the file loads."""
    rows = "".join(f"      - {{name: p{i}, experts: 1, rows: 64, n: 256, k: 128}}\n" for i in range(100))
    path = tc.matrix(
        "version: 1\nbackend: fake\nsuites:\n  - arch: sm90\n    dtype: bf16\n"
        f"    tile: [128x64x64, 128x128x64]\n    problems:\n{rows}"
    )
    ids = [case.id for case in load_matrix(path, TEST_KINDS).cases]
    log = "\x01" * 1999 + " the compiler's last words"
    tc.verdicts({i: {"stage": "compile", "detail": log} for i in ids})
    result = tc.run("--tile-update", "-q", "--tb=no", "-rN")
    assert result.ret == 0, output(result)[-3000:]
    result.stdout.fnmatch_lines(
        [
            f"{path}: 200 expectation(s) updated",
            f"{path}: the reasons of the entries written are cut to 500 characters to keep the matrix "
            f"within its {MAX_BYTES:,}-byte bound (the results file keeps them whole)",
        ]
    )
    expectations = load_matrix(path, TEST_KINDS).model.expectations or {}
    assert len(expectations) == 200 and all(e.stage == "compile" for e in expectations.values())
    assert all(
        e.reason and e.reason.startswith("\x01" * 250) and "characters cut]" in e.reason
        for e in expectations.values()
    )


def test_a_hard_link_made_during_the_write_is_not_split(tc: TileRun, monkeypatch: pytest.MonkeyPatch) -> None:
    """A second name made for the matrix after the update read it: a rename would leave that name
    with the old text, so nothing is written and the run says why."""
    path = tc.matrix(BASIC)
    real = rewrite.apply_changes

    def apply_then_link(*args: object, **kwargs: object) -> str:
        text = real(*args, **kwargs)  # type: ignore[arg-type]
        os.link(path, tc.path / "second-name.yaml")
        return text

    monkeypatch.setattr("pytest_tileconform.matrix.update.apply_changes", apply_then_link)
    tc.verdicts({A: "compile"})
    result = tc.run("--tile-update")
    assert result.ret == 1
    assert "the matrix was changed while this update wrote it" in output(result)
    assert path.read_text() == BASIC and os.path.samefile(path, tc.path / "second-name.yaml")
