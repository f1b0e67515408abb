"""Hostile wheels for ``--tile-flashinfer WHEEL`` and ``bisect``: every member is checked before
anything is unpacked, and a refused wheel leaves nothing in the cache. Sizes are faked in the zip
headers where a real member would be large."""

from __future__ import annotations

import struct
import zipfile
from collections.abc import Callable
from pathlib import Path

import pytest

from pytest_tileconform.flashinfer.releases import ReleaseError, unpack_wheel
from pytest_tileconform.flashinfer.wheel import MAX_MEMBER_BYTES, MAX_METADATA_BYTES

NV = "flashinfer/data/csrc/nv_internal"
GOOD = {
    f"{NV}/tensorrt_llm/kernels/cutlass_kernels/moe_gemm/launchers/moe_gemm_tma_ws_launcher.inl": "// l\n",
    "flashinfer/data/cutlass/include/cutlass/cutlass.h": "// cutlass\n",
    "flashinfer/data/include/flashinfer/x.cuh": "// fi\n",
}
META = "flashinfer_python-0.6.0.dist-info/METADATA"


def _wheel(
    path: Path, members: dict[str, str], extra: Callable[[zipfile.ZipFile], None] | None = None
) -> Path:
    from pytest_tileconform.flashinfer.sources import LAUNCHER_INL

    with zipfile.ZipFile(path, "w") as zf:
        for name, text in {**GOOD, **members}.items():
            zf.writestr(name.replace("moe_gemm_tma_ws_launcher.inl", Path(LAUNCHER_INL).name), text)
        zf.writestr(META, "Metadata-Version: 2.4\nName: flashinfer-python\nVersion: 0.6.0\n\n")
        if extra is not None:
            extra(zf)
    return path


def _symlink(name: str, target: str) -> Callable[[zipfile.ZipFile], None]:
    def add(zf: zipfile.ZipFile) -> None:
        info = zipfile.ZipInfo(name)
        info.create_system = 3
        info.external_attr = 0o120777 << 16
        zf.writestr(info, target)

    return add


def _fake_size(path: Path, name: str, size: int) -> None:
    """Rewrite the uncompressed size of member ``name`` in both headers to ``size``."""
    data = bytearray(path.read_bytes())
    encoded = name.encode()
    offset = 0
    while (local := data.find(b"PK\x03\x04", offset)) != -1:
        name_len = struct.unpack_from("<H", data, local + 26)[0]
        if data[local + 30 : local + 30 + name_len] == encoded:
            struct.pack_into("<I", data, local + 22, size)
        offset = local + 4
    offset = 0
    while (central := data.find(b"PK\x01\x02", offset)) != -1:
        name_len = struct.unpack_from("<H", data, central + 28)[0]
        if data[central + 46 : central + 46 + name_len] == encoded:
            struct.pack_into("<I", data, central + 24, size)
        offset = central + 4
    path.write_bytes(bytes(data))


def _encrypt_flag(path: Path, name: str) -> None:
    """Set member ``name``'s "encrypted" flag in its local and central headers."""
    data = bytearray(path.read_bytes())
    encoded = name.encode()
    for signature, name_at, flag_at, on in ((b"PK\x03\x04", 30, 6, True), (b"PK\x01\x02", 46, 8, True)):
        offset = 0
        while on and (at := data.find(signature, offset)) != -1:
            name_len = struct.unpack_from(
                "<H", data, at + name_at - 4 if signature == b"PK\x03\x04" else at + 28
            )[0]
            if data[at + name_at : at + name_at + name_len] == encoded:
                flags = struct.unpack_from("<H", data, at + flag_at)[0]
                struct.pack_into("<H", data, at + flag_at, flags | 0x1)
            offset = at + 4
    path.write_bytes(bytes(data))


BOMB = "flashinfer/data/include/flashinfer/bomb.cuh"
LONG_PART = "flashinfer/data/include/flashinfer/" + "n" * 256 + ".cuh"
LONG_NAME = "flashinfer/data/include/" + "/".join(["d" * 200] * 6) + "/x.cuh"

# (id, members added to a good wheel, extra writer, size fakes, message fragment)
CASES: list[tuple[str, dict[str, str], Callable[[zipfile.ZipFile], None] | None, dict[str, int], str]] = [
    (
        "symlink-in-sources",
        {},
        _symlink("flashinfer/data/include/flashinfer/evil.h", "/etc/passwd"),
        {},
        "is a symlink",
    ),
    ("symlink-elsewhere", {}, _symlink("flashinfer/__init__.py", "../../x"), {}, "is a symlink"),
    ("symlink-relative", {}, _symlink("flashinfer/data/include/l.h", "x.cuh"), {}, "is a symlink"),
    ("case-duplicate", {"flashinfer/data/include/flashinfer/X.cuh": "//"}, None, {}, "name one file"),
    (
        "case-duplicate-folder",
        {"flashinfer/data/include/Flashinfer/y.cuh": "//", "flashinfer/data/include/flashinfer/y.cuh": "//"},
        None,
        {},
        "name one file",
    ),
    (
        "dot-segment-duplicate",
        {"flashinfer/data/include/./flashinfer/x.cuh": "//"},
        None,
        {},
        "name one file",
    ),
    (
        "double-slash-duplicate",
        {"flashinfer/data/include//flashinfer/x.cuh": "//"},
        None,
        {},
        "name one file",
    ),
    (
        "file-and-folder",
        {"flashinfer/data/include/flashinfer": "// a file"},
        None,
        {},
        "is a file and also the folder",
    ),
    (
        "file-and-folder-other-case",
        {"flashinfer/data/include/FLASHINFER": "// a file"},
        None,
        {},
        "is a file and also the folder",
    ),
    (
        "file-and-dir-entry",
        {"flashinfer/data/include/z/": "", "flashinfer/data/include/Z": "//"},
        None,
        {},
        "is a file and also the folder",
    ),
    ("member-1gib", {BOMB: "x"}, None, {BOMB: 1 << 30}, "unpacks to 1,073,741,824 bytes"),
    ("member-4gib-minus", {BOMB: "x"}, None, {BOMB: 0xFFFFFFFF}, "a zip bomb?"),
    (
        "member-just-over",
        {BOMB: "x"},
        None,
        {BOMB: MAX_MEMBER_BYTES + 1},
        "more than the 67,108,864",
    ),
    (
        "total-over",
        {f"flashinfer/data/include/flashinfer/b{i}.cuh": "x" for i in range(40)},
        None,
        {f"flashinfer/data/include/flashinfer/b{i}.cuh": MAX_MEMBER_BYTES for i in range(40)},
        "sources unpack to more than",
    ),
    ("metadata-huge", {}, None, {META: MAX_METADATA_BYTES + 1}, "METADATA is larger than"),
    ("name-part-over-255-bytes", {LONG_PART: "//"}, None, {}, "has a name longer than a file system takes"),
    ("name-over-1024-bytes", {LONG_NAME: "//"}, None, {}, "(255 bytes a part, 1024 in all)"),
    ("name-multibyte-part", {"flashinfer/data/include/" + "é" * 128 + ".h": "//"}, None, {}, "name longer"),
]


@pytest.mark.parametrize(
    ("members", "extra", "sizes", "fragment"), [c[1:] for c in CASES], ids=[c[0] for c in CASES]
)
def test_refused_before_unpacking(
    tmp_path: Path,
    members: dict[str, str],
    extra: Callable[[zipfile.ZipFile], None] | None,
    sizes: dict[str, int],
    fragment: str,
) -> None:
    wheel = _wheel(tmp_path / "flashinfer_python-0.6.0-py3-none-any.whl", members, extra)
    for name, size in sizes.items():
        _fake_size(wheel, name, size)
    cache = tmp_path / "cache"
    with pytest.raises(ReleaseError) as info:
        unpack_wheel(wheel, cache)
    assert fragment in str(info.value) and str(wheel) in str(info.value)
    unpacked = [p for p in cache.rglob("*") if p.is_file() and not p.name.endswith(".lock")]
    assert unpacked == []


def test_an_encrypted_member_is_refused(tmp_path: Path) -> None:
    """zipfile would raise RuntimeError (password required) on opening such a member: the
    listing refuses it before anything is unpacked."""
    wheel = _wheel(tmp_path / "flashinfer_python-0.6.0-py3-none-any.whl", {BOMB: "secret"})
    _encrypt_flag(wheel, BOMB)
    cache = tmp_path / "cache"
    with pytest.raises(ReleaseError) as info:
        unpack_wheel(wheel, cache)
    assert f"{wheel}: member {BOMB!r} is encrypted; a wheel's are not, refused" == str(info.value)
    assert [p for p in cache.rglob("*") if p.is_file() and not p.name.endswith(".lock")] == []


def test_a_full_disk_while_unpacking_keeps_nothing(tmp_path: Path) -> None:
    """The cache on a 256 KiB tmpfs, the wheel's sources 1 MiB: the unpack fails with ENOSPC part
    way, which is one ReleaseError naming the folder, and nothing of it is left there."""
    import os
    import subprocess

    cache = tmp_path / "small"
    cache.mkdir()
    mounted = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=256k", "tmpfs", str(cache)], capture_output=True
    )
    if mounted.returncode != 0 or os.geteuid() != 0:
        pytest.skip(f"cannot mount a small tmpfs here: {mounted.stderr.decode().strip()}")
    try:
        big = {f"flashinfer/data/include/flashinfer/b{i}.cuh": os.urandom(64 << 10).hex() for i in range(8)}
        wheel = _wheel(tmp_path / "flashinfer_python-0.6.0-py3-none-any.whl", big)
        with pytest.raises(ReleaseError) as info:
            unpack_wheel(wheel, cache)
        assert str(info.value).startswith(f"{wheel}: cannot unpack into {cache}/")
        assert "No space left on device; nothing was kept" in str(info.value)
        assert [p for p in cache.rglob("*") if not p.name.endswith(".lock") and p.is_file()] == []
    finally:
        subprocess.run(["umount", str(cache)], check=True)


def test_a_good_wheel_still_unpacks(tmp_path: Path) -> None:
    wheel = _wheel(
        tmp_path / "w.whl", {"flashinfer/data/include/../../../../escape.txt": "x", "/abs/x.h": "x"}
    )
    release = unpack_wheel(wheel, tmp_path / "cache")
    assert (release.data_dir / "include" / "flashinfer" / "x.cuh").read_text() == "// fi\n"
    assert not list((tmp_path / "cache").rglob("escape.txt")) and not list((tmp_path / "cache").rglob("x.h"))


@pytest.mark.parametrize(
    ("make", "fragment"),
    [
        (lambda tmp: tmp, "is not a regular file"),
        (lambda tmp: Path("/dev/zero"), "is not a regular file"),
        (lambda tmp: tmp / "missing.whl", "does not exist"),
        (lambda tmp: (tmp / "n.whl").write_bytes(b"not a zip") and tmp / "n.whl", "not a readable wheel"),
    ],
    ids=["directory", "dev-zero", "missing", "not-zip"],
)
def test_not_a_wheel(tmp_path: Path, make, fragment: str) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(ReleaseError, match=fragment):
        unpack_wheel(make(tmp_path), tmp_path / "cache")


def test_a_wheel_symlink_loop(tmp_path: Path) -> None:
    (tmp_path / "a.whl").symlink_to(tmp_path / "b.whl")
    (tmp_path / "b.whl").symlink_to(tmp_path / "a.whl")
    with pytest.raises(ReleaseError, match=r"a\.whl"):
        unpack_wheel(tmp_path / "a.whl", tmp_path / "cache")


def test_a_refused_wheel_is_a_usage_error_of_pytest(pytester: pytest.Pytester, tmp_path: Path) -> None:
    smoke = Path(__file__).resolve().parents[2] / "matrices" / "smoke-sm90.yaml"
    wheel = _wheel(tmp_path / "flashinfer_python-0.6.0-py3-none-any.whl", {BOMB: "x"})
    _fake_size(wheel, BOMB, 1 << 30)
    result = pytester.runpytest_subprocess(
        "--tile-matrix",
        str(smoke),
        "--tile-flashinfer",
        str(wheel),
        "--tile-cache-dir",
        str(tmp_path / "c"),
        "-p",
        "no:xdist",
        "--collect-only",
        timeout=120,
    )
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert "a zip bomb?" in result.stderr.str() and "Traceback" not in result.stderr.str()
