"""tileconform --version and tileconform matrices: the shipped matrices, listed and copied out."""

from __future__ import annotations

import importlib.metadata
from pathlib import Path

import pytest
from helpers.fake_backend import TEST_KINDS
from helpers.paths import REPO

from pytest_tileconform.commands.cli import main
from pytest_tileconform.flashinfer.commands import matrices
from pytest_tileconform.matrix.load import load_matrix

SHIPPED = sorted(REPO.joinpath("matrices").glob("*.yaml"))


def test_version_is_the_distributions(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_info:
        main(["--version"])
    assert exit_info.value.code == 0
    assert capsys.readouterr().out == f"tileconform {importlib.metadata.version('pytest-tileconform')}\n"


def test_the_list_is_the_matrices_folder(capsys: pytest.CaptureFixture[str]) -> None:
    """In a checkout (an editable install) the top-level folder is read where it is; the wheel's
    copy of it is checked by .ci/run on an installed wheel."""
    assert Path(str(matrices.shipped_folder())) == REPO / "matrices"
    assert main(["matrices"]) == 0
    listed = capsys.readouterr()
    assert main(["matrices", "list"]) == 0
    assert capsys.readouterr().out == listed.out
    header, *rows = listed.out.splitlines()
    assert header.split() == ["name", "arch", "cases", "about"]
    assert [row.split()[0] for row in rows] == sorted(path.stem for path in SHIPPED)
    for row, path in zip(rows, sorted(SHIPPED, key=lambda p: p.stem), strict=True):
        name, arch, cases, about = row.split(maxsplit=3)
        loaded = load_matrix(path, TEST_KINDS)
        assert name == path.stem
        assert int(cases) == len(loaded.cases)
        assert arch.split(",") == sorted({c.arch for c in loaded.cases})
        assert "# " + about == path.read_text().splitlines()[0]
    assert "'tileconform matrices copy NAME [DEST]'" in listed.err


def test_copy(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    original = (REPO / "matrices" / "smoke-sm90.yaml").read_bytes()
    monkeypatch.chdir(tmp_path)
    assert main(["matrices", "copy", "smoke-sm90"]) == 0
    assert (tmp_path / "smoke-sm90.yaml").read_bytes() == original
    assert "run it with: pytest --tile-matrix smoke-sm90.yaml" in capsys.readouterr().err
    assert main(["matrices", "copy", "smoke-sm90.yaml", "sub/dir/"]) == 0  # a folder, made
    assert (tmp_path / "sub" / "dir" / "smoke-sm90.yaml").read_bytes() == original
    assert main(["matrices", "copy", "smoke-sm90", "sub"]) == 0  # an existing folder
    assert (tmp_path / "sub" / "smoke-sm90.yaml").read_bytes() == original
    assert main(["matrices", "copy", "sm120", "mine.yaml"]) == 0
    capsys.readouterr()
    assert main(["matrices", "copy", "smoke-sm90", "-"]) == 0
    assert capsys.readouterr().out.encode() == original


def test_copy_never_overwrites_without_force(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    mine = tmp_path / "smoke-sm90.yaml"
    mine.write_text("my edits\n")
    assert main(["matrices", "copy", "smoke-sm90", str(tmp_path)]) == 2
    assert f"{mine} exists; --force overwrites it" in capsys.readouterr().err
    assert mine.read_text() == "my edits\n"
    assert main(["matrices", "copy", "smoke-sm90", str(mine), "--force"]) == 0
    assert mine.read_bytes() == (REPO / "matrices" / "smoke-sm90.yaml").read_bytes()


@pytest.mark.parametrize("name", ["sm80", "../matrices/sm90", ""])
def test_unknown_name(name: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["matrices", "copy", name]) == 2
    assert "no shipped matrix" in capsys.readouterr().err


def test_a_matrix_that_does_not_load_is_listed_with_a_warning(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "broken.yaml").write_text("# half written\nversion: 1\nsuites: [\n")
    (tmp_path / "notes.txt").write_text("not a matrix\n")
    monkeypatch.setattr(matrices, "shipped_folder", lambda: tmp_path)
    assert main(["matrices"]) == 0
    captured = capsys.readouterr()
    assert captured.out.splitlines()[1].split() == ["broken", "-", "?", "half", "written"]
    assert "warning: broken does not load: " in captured.err
