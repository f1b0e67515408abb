"""A release is unpacked for what every installed backend declares it reads, and an entry unpacked
for less is never used as complete (tiny fake wheels, no network)."""

from __future__ import annotations

import json
import zipfile
from pathlib import Path

import pytest
from helpers.wheels import KEPT, make_wheel

from pytest_tileconform.flashinfer.releases import (
    ENTRY_FILE,
    MEMBERS,
    installed_members,
    unpack_wheel,
)

EXTRA = "flashinfer/jit/gemm/core.py"
PATTERN = "flashinfer/data/csrc/*_gemm_cutlass*"
OTHERS = {
    EXTRA: "# generator\n",
    "flashinfer/data/csrc/fp4_gemm_cutlass.jinja": "// template\n",
    "flashinfer/data/csrc/fp4_gemm_cutlass.cu": "// binding\n",
    "flashinfer/data/csrc/xqa/kernel.cu": "// read by no backend\n",
}


def unpacked(release_data: Path) -> set[str]:
    entry = release_data.parent.parent
    return {str(p.relative_to(entry)) for p in entry.rglob("*") if p.is_file()} - {ENTRY_FILE}


def test_every_installed_backend_declares_its_own_members() -> None:
    members = installed_members()
    assert set(MEMBERS) <= set(members)
    dense = set(members) - set(MEMBERS)
    assert {EXTRA, PATTERN, "flashinfer/gemm/gemm_base.py"} <= dense
    assert not any("gemm_cutlass" in m or m.endswith("gemm/core.py") for m in MEMBERS)


def test_an_entry_unpacked_for_fewer_members_is_unpacked_again(tmp_path: Path) -> None:
    wheel = make_wheel(tmp_path, files={**KEPT, **OTHERS})
    cache = tmp_path / "cache"
    said: list[str] = []
    moe = unpack_wheel(wheel, cache, say=said.append, members=MEMBERS)
    assert EXTRA not in unpacked(moe.data_dir)
    both = unpack_wheel(wheel, cache, say=said.append, members=(*MEMBERS, EXTRA, PATTERN))
    assert both.data_dir == moe.data_dir
    (message,) = said
    assert f"is incomplete: it was unpacked without {PATTERN}, {EXTRA}" in message
    assert "unpacking it again" in message
    files = unpacked(both.data_dir)
    assert {
        EXTRA,
        "flashinfer/data/csrc/fp4_gemm_cutlass.jinja",
        "flashinfer/data/csrc/fp4_gemm_cutlass.cu",
    } <= files
    assert "flashinfer/data/csrc/xqa/kernel.cu" not in files
    meta = json.loads((both.data_dir.parent.parent / ENTRY_FILE).read_text())
    assert (
        meta["members"] == sorted({*MEMBERS, EXTRA, PATTERN}) and meta["files"] == len(files) - 1
    )  # VERSION
    # nothing left beside the entry: no temporary unpack, no replaced entry
    assert [p.name for p in both.data_dir.parent.parent.parent.iterdir() if p.name.startswith(".")] == []


def test_an_entry_keeps_what_it_had_and_serves_fewer(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Unpacked again for more, an entry keeps the members it had (a backend asking for fewer does
    not shrink it), and asking for fewer reuses it without opening the wheel."""
    wheel = make_wheel(tmp_path, files={**KEPT, **OTHERS})
    cache = tmp_path / "cache"
    unpack_wheel(wheel, cache, members=(*MEMBERS, EXTRA))
    release = unpack_wheel(wheel, cache, say=lambda _m: None, members=(*MEMBERS, PATTERN))
    assert {EXTRA, "flashinfer/data/csrc/fp4_gemm_cutlass.cu"} <= unpacked(release.data_dir)

    def no_zip(*args: object, **kwargs: object) -> None:
        raise AssertionError("the wheel was opened again")

    monkeypatch.setattr(zipfile, "ZipFile", no_zip)
    assert unpack_wheel(wheel, cache, members=MEMBERS).data_dir == release.data_dir
    assert unpack_wheel(wheel, cache, members=(EXTRA, PATTERN)).data_dir == release.data_dir


def test_an_entry_without_a_list_of_members_is_not_complete(tmp_path: Path) -> None:
    wheel = make_wheel(tmp_path, files={**KEPT, **OTHERS})
    cache = tmp_path / "cache"
    said: list[str] = []
    release = unpack_wheel(wheel, cache, members=MEMBERS)
    meta_file = release.data_dir.parent.parent / ENTRY_FILE
    meta = json.loads(meta_file.read_text())
    meta["members"] = "all"
    meta_file.write_text(json.dumps(meta))
    unpack_wheel(wheel, cache, say=said.append, members=MEMBERS)
    assert "has no list of members" in said[0]
    assert json.loads(meta_file.read_text())["members"] == sorted(MEMBERS)
