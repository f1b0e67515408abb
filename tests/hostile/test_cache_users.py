"""A cache shared between users: a second user (a subprocess that drops to an unused uid and
gid, no /etc/passwd entry needed) reads what root built: a group-shared cache (setgid folder,
umask 002, ``TILECONFORM_CACHE_TRUST=group:GID``) and a read-only one (``chmod -R a-w``).
The second user is a forked child that drops root's uid and gid before it touches the cache.
It must judge cached cases without an error and without taking locks, and a build a
read-only cache lacks must stop with one clear line.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from helpers.run_as import run_as

from pytest_tileconform.compile.cache import BuildCache, BuildSpec, CacheUnusable
from pytest_tileconform.compile.trust import TrustPolicy

pytestmark = pytest.mark.skipif(
    not hasattr(os, "geteuid") or os.geteuid() != 0, reason="needs root to act as a second user"
)

SECOND_UID = 54329
TEAM_GID = 54330
#: a "compiler" the second user can run (the interpreter may lie in root's home, out of reach)
FAKE_COMPILER = '#!/bin/sh\ncp "$1" "$2"\n'


def read_as_second_user(root: Path, specs: list[BuildSpec]) -> dict[str, Any]:
    """What the second user does: look the specs up, build what is missing, say what happened."""
    messages: list[str] = []
    cache = BuildCache(root, messages.append)
    try:
        built = cache.build(specs, jobs=1)
        out: dict[str, Any] = {"artifacts": [built[s.key].artifact.read_text() for s in specs], "ok": True}
    except CacheUnusable as exc:
        out = {"error": str(exc), "ok": False}
    return {**out, "messages": messages}


@pytest.fixture
def shared(tmp_path: Path) -> Iterator[Path]:
    """A folder the second user can reach (pytest's own tmp folders are root's, 0700)."""
    top = Path(tempfile.mkdtemp(prefix="tileconform-shared-"))
    top.chmod(0o755)
    (top / "fake_nvcc.sh").write_text(FAKE_COMPILER)
    (top / "fake_nvcc.sh").chmod(0o755)
    yield top
    shutil.rmtree(top, ignore_errors=True)


def make_spec(source: str, shared: Path) -> BuildSpec:
    command = ("/bin/sh", str(shared / "fake_nvcc.sh"), "{src}", "{out}")
    return BuildSpec(source, command, "nvcc 13.0", 1 << 20, source.strip())


def as_second_user(
    root: Path, specs: list[BuildSpec], groups: tuple[int, ...] = (), **env: str
) -> dict[str, Any]:
    """:func:`read_as_second_user` as ``SECOND_UID`` (and ``groups``), with ``env`` in place of
    this process's cache settings."""
    return run_as(
        SECOND_UID,
        groups[0] if groups else SECOND_UID,
        groups,
        lambda: read_as_second_user(root, specs),
        env=env,
        clear_cache_env=True,
    )


def locks(root: Path) -> list[Path]:
    return list(root.rglob("*.lock"))


def build_group_shared(shared: Path, specs: list[BuildSpec]) -> Path:
    """What the team's first user does: a setgid folder of the team, umask 002."""
    root = shared / "cache"
    root.mkdir()
    os.chown(root, -1, TEAM_GID)
    root.chmod(0o2775)
    old = os.umask(0o002)
    try:
        BuildCache(root, trust=TrustPolicy.parse(f"group:{TEAM_GID}")).build(specs, jobs=1)
    finally:
        os.umask(old)
    return root


def test_entries_follow_umask_and_the_setgid_folder(shared: Path) -> None:
    case = make_spec("a\n", shared)
    root = build_group_shared(shared, [case])
    entry = BuildCache(root).entry(case)
    for path in (entry.parent, entry):
        assert path.stat().st_gid == TEAM_GID and path.stat().st_mode & 0o2070 == 0o2070
    assert (entry / "harness").stat().st_mode & 0o060 == 0o060
    for lock in locks(root):
        assert lock.stat().st_mode & 0o060 == 0o060  # another member may lock it too


def test_second_user_reads_a_group_shared_cache(shared: Path) -> None:
    specs = [make_spec("a\n", shared), make_spec("b\n", shared)]
    root = build_group_shared(shared, specs)
    before = locks(root)
    out = as_second_user(root, specs, (TEAM_GID,), TILECONFORM_CACHE_TRUST=f"group:{TEAM_GID}")
    assert out["ok"] and out["artifacts"] == ["a\n", "b\n"] and not out["messages"]
    assert locks(root) == before


def test_second_user_builds_into_a_group_shared_cache(shared: Path) -> None:
    """A member adds what the cache lacks; the first user then uses it."""
    root = build_group_shared(shared, [make_spec("a\n", shared)])
    new = make_spec("new\n", shared)
    out = as_second_user(root, [new], (TEAM_GID,), TILECONFORM_CACHE_TRUST=f"group:{TEAM_GID}")
    assert out["ok"] and out["artifacts"] == ["new\n"]
    found = BuildCache(root, trust=TrustPolicy.parse(f"group:{TEAM_GID}")).lookup(new)
    assert found is not None and found.path.stat().st_uid == SECOND_UID


def test_group_shared_cache_refused_without_trusting_the_group(shared: Path) -> None:
    """Without the setting the team's group-writable entries are someone else's to change."""
    case = make_spec("a\n", shared)
    root = build_group_shared(shared, [case])
    out = as_second_user(root, [case], (TEAM_GID,))
    assert not out["ok"] and "not trusted" in out["error"]
    assert any("writable by group" in m for m in out["messages"])


def test_second_user_judges_a_read_only_cache(shared: Path) -> None:
    """``chmod -R a-w``: cached cases are found, nothing is locked or written."""
    specs = [make_spec("a\n", shared), make_spec("b\n", shared)]
    root = shared / "cache"
    BuildCache(root, trust=TrustPolicy()).build(specs, jobs=1)
    subprocess.run(["chmod", "-R", "a-w", str(root)], check=True)
    before = sorted(p.name for p in root.rglob("*"))
    out = as_second_user(root, specs)
    assert out["ok"] and out["artifacts"] == ["a\n", "b\n"] and not out["messages"]
    assert sorted(p.name for p in root.rglob("*")) == before


def test_read_only_cache_lacking_a_build_says_so(shared: Path) -> None:
    """No overlay elsewhere: every verdict comes from the cache the user named."""
    cached, missing = make_spec("a\n", shared), make_spec("missing\n", shared)
    root = shared / "cache"
    BuildCache(root, trust=TrustPolicy()).build([cached], jobs=1)
    subprocess.run(["chmod", "-R", "a-w", str(root)], check=True)
    out = as_second_user(root, [cached, missing])
    assert not out["ok"]
    assert "read-only for you and lacks 1 build(s) (missing)" in out["error"]
    assert "--tile-cache-dir" in out["error"]


def test_read_only_cache_as_root_takes_no_locks(shared: Path) -> None:
    """Root can write anything, so this only checks that a lookup-only build locks nothing."""
    case = make_spec("a\n", shared)
    root = shared / "cache"
    cache = BuildCache(root, trust=TrustPolicy())
    cache.build([case], jobs=1)
    for lock in locks(root):
        lock.unlink()
    subprocess.run(["chmod", "-R", "a-w", str(root)], check=True)
    assert cache.build([case], jobs=1)[case.key].ok
    cache.link(make_spec("b\n", shared), cache.build([case], jobs=1)[case.key])
    assert locks(root) == [] or all(lock.parent.exists() for lock in locks(root))


def test_cache_unusable_stops_the_session_once() -> None:
    """It is the plugin's one-line environment error, not a failure per case."""
    from pytest_tileconform.verdict import UnusableEnvironment

    assert issubclass(CacheUnusable, UnusableEnvironment)
