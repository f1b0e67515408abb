"""Hostile host builds: the virtual runtime ``libvcudart.a`` every virtual harness links, the
hardware runner that loads every unit, and any other :func:`build_once` tool. Each is checked
like a harness entry before its path is handed out; a damaged, planted, linked or unchecked
one is built again in place (its path is in build commands, so it cannot move)."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
from pathlib import Path

import pytest

from pytest_tileconform.compile.hostbuild import HostBuildError, build_once, once_path
from pytest_tileconform.compile.trust import TrustPolicy

INPUTS = (b"tool source", b"g++ 13")


class Tool:
    """A stand-in ``produce`` that writes the artifact and counts its builds."""

    def __init__(self) -> None:
        self.builds = 0

    def __call__(self, directory: Path) -> None:
        self.builds += 1
        (directory / "tool").write_text("genuine tool\n")
        (directory / "tool").chmod(0o755)


def build(cache: Path, tool: Tool, **kwargs: object) -> Path:
    return build_once(cache, "tool", INPUTS, "tool", tool, **kwargs)  # type: ignore[arg-type]


def test_host_build_records_checked_sums(tmp_path: Path) -> None:
    tool = Tool()
    path = build(tmp_path, tool)
    meta = json.loads((path.parent / "build.json").read_text())
    assert meta["key"] == path.parent.name
    assert meta["sha256"] == {"tool": hashlib.sha256(b"genuine tool\n").hexdigest()}
    assert build(tmp_path, tool) == path and tool.builds == 1


def test_damaged_host_build_is_rebuilt_in_place(tmp_path: Path) -> None:
    tool = Tool()
    path = build(tmp_path, tool)
    path.write_text("#!/bin/sh\necho owned\n")
    messages: list[str] = []
    assert build(tmp_path, tool, progress=messages.append) == path
    assert path.read_text() == "genuine tool\n" and tool.builds == 2
    assert "fails its checksums" in messages[0]


def test_unchecked_host_build_from_before_is_rebuilt(tmp_path: Path) -> None:
    """A folder without ``build.json`` (an old cache, or a planted one) is not trusted."""
    path = once_path(tmp_path, "tool", INPUTS, "tool")
    path.parent.mkdir()
    path.write_text("anything\n")
    tool = Tool()
    assert build(tmp_path, tool, progress=lambda _m: None).read_text() == "genuine tool\n"


def test_symlinked_host_build_folder_is_replaced(tmp_path: Path) -> None:
    elsewhere = tmp_path / "elsewhere"
    build(elsewhere, Tool())
    path = once_path(tmp_path / "cache", "tool", INPUTS, "tool")
    path.parent.parent.mkdir()
    path.parent.symlink_to(once_path(elsewhere, "tool", INPUTS, "tool").parent)
    messages: list[str] = []
    result = build(tmp_path / "cache", Tool(), progress=messages.append)
    assert not result.parent.is_symlink() and "symbolic link" in messages[0]


def test_planted_host_build_with_recomputed_sums_fails_signature(tmp_path: Path) -> None:
    ed25519 = pytest.importorskip("cryptography.hazmat.primitives.asymmetric.ed25519")
    serialization = pytest.importorskip("cryptography.hazmat.primitives.serialization")
    key = ed25519.Ed25519PrivateKey.generate()
    private, public = tmp_path / "k.pem", tmp_path / "k.pub"
    private.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
        )
    )
    private.chmod(0o600)  # a signing key others can read is refused
    public.write_bytes(
        key.public_key().public_bytes(
            serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
        )
    )
    tool = Tool()
    path = build(tmp_path / "cache", tool, trust=TrustPolicy(signing_key=private))
    path.write_text("planted\n")
    meta = json.loads((path.parent / "build.json").read_text())
    meta["sha256"]["tool"] = hashlib.sha256(b"planted\n").hexdigest()
    (path.parent / "build.json").write_text(json.dumps(meta, indent=1))
    trust = TrustPolicy(signing_key=private, verify_key=public)
    messages: list[str] = []
    rebuilt = build(tmp_path / "cache", tool, trust=trust, progress=messages.append)
    assert rebuilt.read_text() == "genuine tool\n"
    assert "signature does not match" in messages[0]


def test_host_build_in_a_refused_cache_folder_stops(tmp_path: Path) -> None:
    """A cache folder writable by a group nobody trusted: not used, not built into."""
    build(tmp_path / "cache", Tool())
    os.chown(tmp_path / "cache", -1, 54321)
    (tmp_path / "cache").chmod(0o775)
    with pytest.raises(HostBuildError, match="not trusted"):
        build(tmp_path / "cache", Tool(), trust=TrustPolicy())


def test_host_build_dir_is_not_private(tmp_path: Path) -> None:
    """``mkdtemp`` makes 0700 folders: a second user of a shared cache could not use them."""
    old = os.umask(0o022)
    try:
        path = build(tmp_path, Tool())
    finally:
        os.umask(old)
    assert path.parent.stat().st_mode & 0o777 == 0o755


def test_read_only_cache_serves_good_host_build_and_refuses_to_repair(tmp_path: Path) -> None:
    if os.geteuid() == 0:
        pytest.skip("root writes read-only folders; test_cache_users.py covers this as another user")
    tool = Tool()
    path = build(tmp_path / "cache", tool)
    (tmp_path / "cache").chmod(0o555)
    try:
        assert build(tmp_path / "cache", tool) == path
        path.parent.chmod(0o755)
        path.write_text("damaged\n")
        with pytest.raises(HostBuildError, match="read-only"):
            build(tmp_path / "cache", tool, progress=lambda _m: None)
    finally:
        (tmp_path / "cache").chmod(0o755)


def _cuda_home() -> Path:
    from pytest_tileconform.flashinfer.sources import FlashInferSourcesError, find_cuda_home

    if not shutil.which(os.environ.get("CXX") or "g++"):
        pytest.skip("needs a C++ compiler")
    try:
        return find_cuda_home()
    except FlashInferSourcesError as exc:
        pytest.skip(f"needs the CUDA toolkit headers: {exc}")


def test_damaged_libvcudart_is_rebuilt(tmp_path: Path) -> None:
    """The runtime every virtual harness links, truncated after it was built."""
    from pytest_tileconform.virtual.build import build_runtime

    home = _cuda_home()
    lib = build_runtime(tmp_path, home)
    good = lib.read_bytes()
    lib.write_bytes(good[: len(good) // 2])
    assert build_runtime(tmp_path, home) == lib and lib.read_bytes() == good


def test_damaged_runner_is_rebuilt(tmp_path: Path) -> None:
    """The hardware runner, replaced by a script that would report every case passed."""
    from pytest_tileconform.flashinfer.runner import build_runner

    _cuda_home()
    handle = build_runner(tmp_path)  # /proc/PID/fd/N of the checked bytes
    runner = Path(os.readlink(handle))  # the cache's file itself
    good = runner.read_bytes()
    runner.write_text("#!/bin/sh\nwhile read l; do echo 0; done\n")
    assert build_runner(tmp_path).read_bytes() == good and runner.read_bytes() == good
