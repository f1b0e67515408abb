"""Hostile matrices as users give them: files that are not regular files (a FIFO, a device, a
directory, a symlink loop) are refused unread, each read in a subprocess with a timeout since a
regression would block rather than fail; and a representative subset of the corpus
(:mod:`test_matrix_corpus`) through pytest: exit 4, the message once, no traceback.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from helpers.fake_backend import BASIC, TileRun, output
from helpers.matrix_corpus import CORPUS, POSITION, Refused

# --- files that are not regular files --------------------------------------------------------

READ_ONE = """
import sys
from pathlib import Path
from dataclasses import replace
from pytest_tileconform.flashinfer.axes import KIND
from pytest_tileconform.matrix.load import MatrixInvalid, load_matrix
try:
    load_matrix(Path(sys.argv[1]), {"fake": replace(KIND, backend="fake")}, {"fake"})
except MatrixInvalid as exc:
    print(exc)
else:
    print("LOADED")
"""


def load_in_subprocess(path: Path) -> str:
    """The loader's message for ``path``, from a child that is killed if it blocks."""
    done = subprocess.run(
        [sys.executable, "-c", READ_ONE, str(path)], capture_output=True, text=True, timeout=60, check=False
    )
    assert done.returncode == 0 and "Traceback" not in done.stderr, done.stderr
    return done.stdout.strip()


def symlink_loop(folder: Path) -> Path:
    (folder / "a.yaml").symlink_to(folder / "b.yaml")
    (folder / "b.yaml").symlink_to(folder / "a.yaml")
    return folder / "a.yaml"


def fifo(folder: Path) -> Path:
    os.mkfifo(folder / "m.yaml")
    return folder / "m.yaml"


def directory(folder: Path) -> Path:
    (folder / "m.yaml").mkdir()
    return folder / "m.yaml"


def link_to_basic(folder: Path) -> Path:
    (folder / "real.yaml").write_text(BASIC)
    (folder / "m.yaml").symlink_to(folder / "real.yaml")
    return folder / "m.yaml"


def dangling_link(folder: Path) -> Path:
    (folder / "m.yaml").symlink_to(folder / "gone")
    return folder / "m.yaml"


FILES = {
    "fifo": (fifo, "a FIFO, not a regular file"),
    "dev-zero": (lambda _: Path("/dev/zero"), "a device, not a regular file"),
    "dev-null": (lambda _: Path("/dev/null"), "a device, not a regular file"),
    "directory": (directory, "a directory, not a matrix file"),
    "symlink-loop": (symlink_loop, "cannot read matrix: Too many levels of symbolic links"),
    "missing": (lambda folder: folder / "nope.yaml", "cannot read matrix: No such file or directory"),
    "dangling-link": (dangling_link, "No such file"),
    "link-to-a-matrix": (link_to_basic, ""),
}


@pytest.mark.parametrize("name", FILES)
def test_non_regular_files_are_refused_unread(name: str, tmp_path: Path) -> None:
    make, text = FILES[name]
    path = make(tmp_path)
    start = time.perf_counter()
    message = load_in_subprocess(path)
    assert time.perf_counter() - start < 30
    if not text:
        assert message == "LOADED"
        return
    assert message == f"{path}:1:1: {text}" or (text in message and message.startswith(f"{path}:1:1: ")), (
        message
    )


# --- through pytest, as users run it ---------------------------------------------------------

THROUGH_PYTEST = [
    "utf16-le-bom",
    "bad-utf8-ff-at-4-9",
    "nul-in-middle",
    "too-large",
    "flow-nesting-50000",
    "billion-laughs-9",
    "a-billion-cases",
    "size-rows-3e9",
    "size-experts-1e9-scalar-rows",
    'version-"1"',
    "version-true",
    "arch-sm_90",
    "suite-name-double-colon",
    "problem-name-slash",
    "huge-int",
    "python-tag",
    "python-tag-verbatim-on-suites",
    "merge-key-in-a-suite",
    "merge-key-in-expectations",
    "recursive-suite-list",
    "local-tag-on-a-suite",
    "underscore-thousands",
    "huge-int-in-expectations",
]
BY_ID = {e.id: e for e in CORPUS}


@pytest.mark.parametrize("name", THROUGH_PYTEST)
def test_through_pytest_exit_4_once_without_traceback(tc: TileRun, name: str) -> None:
    entry = BY_ID[name]
    assert isinstance(entry.expect, Refused)
    path = tc.path / "m.yaml"
    path.write_bytes(entry.data)
    start = time.perf_counter()
    result = tc.run()
    assert time.perf_counter() - start < 30
    text = output(result)
    assert result.ret == 4, text
    assert "Traceback" not in text
    lines = [line for line in result.errlines if line.startswith(f"{path}:") and entry.expect.text in line]
    assert len(lines) == 1, text
    assert POSITION.match(lines[0][len(str(path)) :]), lines[0]
    assert text.count(entry.expect.text) == 1, text


@pytest.mark.parametrize("name", ["fifo", "dev-zero", "symlink-loop", "directory"])
def test_non_regular_files_through_pytest(tc: TileRun, name: str) -> None:
    make, text = FILES[name]
    folder = tc.path / "files"
    folder.mkdir()
    path = make(folder)
    result = tc.pytester.runpytest_subprocess("--tile-matrix", str(path), timeout=120)
    assert result.ret == 4, output(result)
    assert "Traceback" not in output(result)
    assert output(result).count(text) == 1, output(result)
