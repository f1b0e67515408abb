"""``tileconform cache push``: a cache filled with no remote is published into one (file://),
every entry checked first; a second cache then finds its units and cases with no compile, and
an entry damaged locally is refused, not spread."""

from __future__ import annotations

from pathlib import Path

import pytest
from helpers.stand_in_compiler import invocations, make_compiler, spec

from pytest_tileconform.commands.cli import main
from pytest_tileconform.compile.cache import BuildCache
from pytest_tileconform.compile.remote import RemoteTier, TieredCache, manifest_name
from pytest_tileconform.compile.store import RemoteStore

pytest.importorskip("fsspec")


def test_a_filled_cache_is_pushed_checked_and_found_elsewhere(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    compiler = make_compiler(tmp_path)
    shared, case, damaged = spec("unit\n", compiler), spec("case\n", compiler), spec("other\n", compiler)
    local = BuildCache(tmp_path / "local")
    built = local.build([shared, damaged], jobs=1)
    local.link(case, built[shared.key])
    (built[damaged.key].artifact).write_text("planted\n")
    remote = tmp_path / "remote"

    assert main(["cache", "push", remote.as_uri(), "--cache-dir", str(tmp_path / "local")]) == 0
    out, err = capsys.readouterr()
    assert out.strip().endswith("(1 refused here, not pushed)") and out.startswith("2 entries of ")
    assert "fails its checksums" in err
    assert not (remote / manifest_name(damaged.key)).exists()

    say: list[str] = []
    tier = RemoteTier(RemoteStore(remote.as_uri()), say.append)
    reader = TieredCache(tmp_path / "b", say.append, tier=tier)
    found = reader.lookup(case)
    assert found is not None and found.artifact.read_text() == "unit\n" and say == []
    assert invocations(compiler) == ["unit", "other"]  # nothing compiled for the reader


def test_pushing_to_a_read_only_remote_is_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    compiler = make_compiler(tmp_path)
    BuildCache(tmp_path / "local").build([spec("unit\n", compiler)], jobs=1)
    status = main(["cache", "push", "http://127.0.0.1:9/x", "--cache-dir", str(tmp_path / "local")])
    assert status == 3 and "takes no entries" in capsys.readouterr().err
