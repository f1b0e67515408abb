"""Where output goes when it is not a plain new file: ``write_atomic``'s rules (its docstring),
every command's ``-o``, and a stdout that is closed, full or whose reader left."""

from __future__ import annotations

import fcntl
import os
import stat
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from helpers.cli_corpus import LIMIT_S, VALID_RESULTS, tileconform

from pytest_tileconform import files
from pytest_tileconform.commands.cli import main
from pytest_tileconform.files import FileRefused, write_atomic


def test_a_new_file_and_its_parents(tmp_path: Path) -> None:
    target = tmp_path / "a" / "b" / "out.md"
    write_atomic(target, "x\n")
    assert target.read_text() == "x\n" and stat.S_IMODE(target.stat().st_mode) == 0o644


def test_a_regular_file_keeps_its_mode(tmp_path: Path) -> None:
    target = tmp_path / "out.md"
    target.write_text("old")
    target.chmod(0o600)
    write_atomic(target, "new")
    assert target.read_text() == "new" and stat.S_IMODE(target.stat().st_mode) == 0o600


def test_dev_null_is_written_into_not_replaced() -> None:
    before = os.stat("/dev/null")
    write_atomic(Path("/dev/null"), "gone\n")
    after = os.stat("/dev/null")
    assert stat.S_ISCHR(after.st_mode) and after.st_rdev == before.st_rdev and after.st_ino == before.st_ino


def test_dev_full_is_an_error_not_a_replacement() -> None:
    with pytest.raises(OSError, match="No space left"):
        write_atomic(Path("/dev/full"), "x")
    assert stat.S_ISCHR(os.stat("/dev/full").st_mode)


def test_a_symlink_in_its_folder_is_followed_and_kept(tmp_path: Path) -> None:
    (tmp_path / "real.md").write_text("old")
    (tmp_path / "link.md").symlink_to("real.md")
    write_atomic(tmp_path / "link.md", "new")
    assert (tmp_path / "link.md").is_symlink() and (tmp_path / "real.md").read_text() == "new"


def test_a_dangling_symlink_in_its_folder_creates_its_target(tmp_path: Path) -> None:
    (tmp_path / "link.md").symlink_to("later.md")
    write_atomic(tmp_path / "link.md", "new")
    assert (tmp_path / "link.md").is_symlink() and (tmp_path / "later.md").read_text() == "new"


def test_a_symlink_out_of_its_folder_is_refused(tmp_path: Path) -> None:
    (tmp_path / "elsewhere").mkdir()
    (tmp_path / "elsewhere" / "precious").write_text("keep")
    (tmp_path / "out").mkdir()
    (tmp_path / "out" / "link.md").symlink_to(tmp_path / "elsewhere" / "precious")
    with pytest.raises(FileRefused, match="outside its own folder"):
        write_atomic(tmp_path / "out" / "link.md", "new")
    assert (tmp_path / "elsewhere" / "precious").read_text() == "keep"


def test_a_symlink_loop_is_refused(tmp_path: Path) -> None:
    (tmp_path / "a").symlink_to(tmp_path / "b")
    (tmp_path / "b").symlink_to(tmp_path / "a")
    with pytest.raises(FileRefused, match="symlink loop"):
        write_atomic(tmp_path / "a", "x")


def test_a_read_only_file_is_refused_even_for_root(tmp_path: Path) -> None:
    target = tmp_path / "ro.md"
    target.write_text("keep")
    target.chmod(0o444)
    with pytest.raises(FileRefused, match="read-only"):
        write_atomic(target, "new")
    assert target.read_text() == "keep"


def test_a_directory_is_refused(tmp_path: Path) -> None:
    with pytest.raises(FileRefused, match="is a directory"):
        write_atomic(tmp_path, "x")


def test_a_fifo_nobody_reads_is_refused_without_blocking(tmp_path: Path) -> None:
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    with pytest.raises(FileRefused, match="FIFO that no process reads"):
        write_atomic(fifo, "x")
    assert stat.S_ISFIFO(fifo.stat().st_mode)


def test_a_fifo_with_a_reader_is_written_into(tmp_path: Path) -> None:
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    reader = subprocess.Popen(["cat", str(fifo)], stdout=subprocess.PIPE, text=True)
    try:
        for _ in range(100):  # until cat has opened it
            try:
                write_atomic(fifo, "through\n")
                break
            except FileRefused:
                time.sleep(0.05)
        out, _ = reader.communicate(timeout=LIMIT_S)
    finally:
        reader.kill()
    assert out == "through\n" and stat.S_ISFIFO(fifo.stat().st_mode)


def test_stale_temporaries_of_a_killed_writer_are_removed(tmp_path: Path) -> None:
    """Only this tool's temporary files (``.NAME.tileconform-*.tmp``) with proof that they are a
    killed writer's: old, and no writer holds their lock. A user's own ``.out.md.mine.tmp`` stays."""
    target = tmp_path / "out.md"
    stale, fresh, other, users, held = (
        tmp_path / ".out.md.tileconform-abc.tmp",
        tmp_path / ".out.md.tileconform-def.tmp",
        tmp_path / ".x.md.tileconform-abc.tmp",
        tmp_path / ".out.md.mine.tmp",
        tmp_path / ".out.md.tileconform-live.tmp",
    )
    for leftover in (stale, fresh, other, users, held):
        leftover.write_text("torn")
    old = time.time() - files.STALE_TMP_SECONDS - 60
    for leftover in (stale, other, users, held):
        os.utime(leftover, (old, old))
    with held.open() as writer:  # a live writer that has been slow
        fcntl.flock(writer.fileno(), fcntl.LOCK_EX)
        write_atomic(target, "x")
    assert not stale.exists() and fresh.exists() and other.exists() and users.exists() and held.exists()


def test_a_writer_killed_mid_write_leaves_a_temporary_the_next_write_removes(tmp_path: Path) -> None:
    target = tmp_path / "out.md"
    code = (
        "import os, sys\n"
        "from pathlib import Path\n"
        "import pytest_tileconform.files as f\n"
        "real = os.fsync\n"
        "def die(fd):\n"
        "    os.kill(os.getpid(), 9)\n"
        "os.fsync = die\n"
        f"f.write_atomic(Path({str(target)!r}), 'x' * 100000)\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], timeout=LIMIT_S)
    assert proc.returncode == -9
    leftovers = list(tmp_path.glob(".out.md.tileconform-*.tmp"))
    assert len(leftovers) == 1 and not target.exists()
    old = time.time() - files.STALE_TMP_SECONDS - 1
    os.utime(leftovers[0], (old, old))
    write_atomic(target, "y")
    assert list(tmp_path.glob(".out.md.*.tmp")) == [] and target.read_text() == "y"


# -- every command's -o, through main
OUTPUT_COMMANDS = [
    ["report", "schema"],
    ["report", "diff", str(VALID_RESULTS), str(VALID_RESULTS)],
    ["report", "merge", str(VALID_RESULTS)],
    ["report", "merge", str(VALID_RESULTS), "--html"],
]


@pytest.mark.parametrize(
    "command", OUTPUT_COMMANDS, ids=lambda c: "-".join(c[:2]) + ("-html" if "--html" in c else "")
)
@pytest.mark.parametrize(
    ("make", "status", "fragment"),
    [
        (lambda tmp: tmp, 2, "is a directory"),
        (lambda tmp: Path("/dev/null"), 0, "wrote /dev/null"),
        (lambda tmp: Path("/dev/full"), 2, "No space left on device"),
        (lambda tmp: tmp / "f" / "out", 2, "cannot write"),  # f is a file
        (lambda tmp: tmp / "ro.md", 2, "read-only"),
    ],
    ids=["directory", "dev-null", "dev-full", "under-a-file", "read-only"],
)
def test_outputs_of_every_command(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    command: list[str],
    make: Any,
    status: int,
    fragment: str,
) -> None:
    (tmp_path / "f").write_text("a file")
    (tmp_path / "ro.md").write_text("keep")
    (tmp_path / "ro.md").chmod(0o444)
    target = make(tmp_path)
    argv = [*command, str(target)] if command[-1] == "--html" else [*command, "-o", str(target)]
    assert main(argv) == status
    err = capsys.readouterr().err
    assert fragment in err
    assert stat.S_ISCHR(os.stat("/dev/null").st_mode) and (tmp_path / "ro.md").read_text() == "keep"


# -- stdout that cannot take the output: child processes, a message and a status, no traceback
def test_stdout_reader_left() -> None:
    proc = subprocess.run(
        f'{sys.executable} -m pytest_tileconform report schema | head -c1; echo " ${{PIPESTATUS[0]}}"',
        shell=True,
        executable="/bin/bash",
        capture_output=True,
        text=True,
        timeout=LIMIT_S,
    )
    assert proc.stdout == "{ 0\n" and proc.stderr == ""


def test_stdout_full() -> None:
    with open("/dev/full", "w") as full:
        proc = tileconform("report", "schema", stdout=full)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert proc.stderr == "tileconform: cannot write to stdout: No space left on device\n"


def test_stdout_closed() -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "pytest_tileconform", "report", "schema"],
        stdout=None,
        stderr=subprocess.PIPE,
        text=True,
        timeout=LIMIT_S,
        preexec_fn=lambda: os.close(1),
    )
    assert proc.returncode == 2 and "it is closed" in proc.stderr and "Traceback" not in proc.stderr


def test_dev_stdout_as_output_goes_to_stdout() -> None:
    proc = tileconform("report", "schema", "-o", "/dev/stdout")
    assert proc.returncode == 0 and proc.stdout.startswith("{") and "wrote /dev/stdout" in proc.stderr


def test_dev_stdout_redirected_to_a_file_is_appended_to_not_replaced(tmp_path: Path) -> None:
    out = tmp_path / "out.json"
    out.write_text("before\n")
    with out.open("a") as handle:
        proc = tileconform("report", "schema", "-o", "/dev/stdout", stdout=handle)
    assert proc.returncode == 0
    text = out.read_text()
    assert text.startswith("before\n{") and not out.is_symlink()


def test_a_report_that_cannot_be_written_at_the_end_goes_to_the_temporary_folder(tmp_path: Path) -> None:
    from pytest_tileconform.core.recorder import _write_report
    from pytest_tileconform.results.store import read_results

    document = read_results(VALID_RESULTS)
    (tmp_path / "d").mkdir()
    problem = _write_report(tmp_path / "d", document)  # a folder appeared where the report goes
    assert problem.startswith(f"results NOT written to {tmp_path / 'd'}: is a directory")
    spare = Path(problem.rsplit("they are in ", 1)[1])
    try:
        assert read_results(spare) == document
    finally:
        spare.unlink()
    assert _write_report(tmp_path / "r.json", document) == ""
    assert read_results(tmp_path / "r.json") == document
