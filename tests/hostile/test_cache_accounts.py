"""Owner trust as the system decides it, with real accounts (``useradd``): a reader ``R`` with
its own group, a member ``M`` of the system who is not ``R``. Each test is an attack ``M`` can
carry out on ``R``'s cache or keys, or a setting that looks private and is not:

* a group named like ``R`` that is ``M``'s primary group (or lists ``M``) is not private;
* an ACL (or a folder's default ACL) that lets ``M`` write makes the file untrusted;
* a key file ``M`` can write, or replace in its folder, is refused, and so is a signing key
  ``M`` can read.

``R`` and ``M`` act in forked children that drop root's ids for theirs (the venv's interpreter
may be out of their reach, so they are forked, not exec'd).
"""

from __future__ import annotations

import os
import pwd
import shutil
import subprocess
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from helpers import run_as
from helpers.run_as import account_name

from pytest_tileconform.compile.cache import BuildCache, BuildSpec
from pytest_tileconform.compile.signing import SigningError, check_key_file
from pytest_tileconform.compile.trust import TrustPolicy

pytestmark = pytest.mark.skipif(
    not hasattr(os, "geteuid") or os.geteuid() != 0 or shutil.which("useradd") is None,
    reason="needs root and useradd to create the second users",
)

READER, MEMBER, OTHER = (account_name(name) for name in ("tctrust-r", "tctrust-m", "tctrust-n"))
FAKE_COMPILER = '#!/bin/sh\ncp "$1" "$2"\n'


def _run(*command: str) -> None:
    subprocess.run(command, check=True, capture_output=True)


def _exists(name: str) -> bool:
    try:
        pwd.getpwnam(name)
    except KeyError:
        return False
    return True


@pytest.fixture(scope="module")
def accounts() -> Iterator[dict[str, pwd.struct_passwd]]:
    """``R`` with its own group (``useradd -U``), ``M`` and ``N`` with theirs; removed after."""
    made = []
    for name in (READER, MEMBER, OTHER):
        if not _exists(name):
            _run("useradd", "-U", "-M", "-s", "/usr/sbin/nologin", name)
            made.append(name)
    yield {name: pwd.getpwnam(name) for name in (READER, MEMBER, OTHER)}
    for name in made:
        subprocess.run(["userdel", name], capture_output=True)


@pytest.fixture
def member_restored(accounts: dict[str, pwd.struct_passwd]) -> Iterator[None]:
    """Puts ``M`` and ``N`` back in their own groups after a test moved them."""
    yield
    for name in (MEMBER, OTHER):
        _run("usermod", "-g", name, "-G", "", name)


@pytest.fixture
def shared() -> Iterator[Path]:
    """A folder every account can reach (pytest's tmp folders are root's, 0700)."""
    top = Path(tempfile.mkdtemp(prefix="tileconform-accounts-"))
    top.chmod(0o755)
    (top / "fake_nvcc.sh").write_text(FAKE_COMPILER)
    (top / "fake_nvcc.sh").chmod(0o755)
    yield top
    shutil.rmtree(top, ignore_errors=True)


def spec(source: str, shared: Path) -> BuildSpec:
    return BuildSpec(
        source, ("/bin/sh", str(shared / "fake_nvcc.sh"), "{src}", "{out}"), "nvcc", 1 << 20, "s"
    )


def as_account(user: pwd.struct_passwd, job: Callable[[], dict[str, Any]]) -> dict[str, Any]:
    """``job()`` as ``user``, without this process's cache settings (each job names its cache)."""
    return run_as.as_account(user, job, clear_cache_env=True)


def reads(root: Path, case: BuildSpec) -> Callable[[], dict[str, Any]]:
    """Look ``case`` up in ``root``: what was found and what the cache said."""

    def job() -> dict[str, Any]:
        messages: list[str] = []
        found = BuildCache(root, messages.append, trust=TrustPolicy()).lookup(case)
        return {"found": found.artifact.read_text() if found else None, "messages": messages}

    return job


def reader_cache(shared: Path, accounts: dict[str, pwd.struct_passwd], case: BuildSpec) -> Path:
    """``R``'s cache, built by ``R`` with umask 002: group-writable, by ``R``'s own group."""
    root = shared / "cache"
    root.mkdir()
    os.chown(root, accounts[READER].pw_uid, accounts[READER].pw_gid)
    root.chmod(0o775)

    def build() -> dict[str, Any]:
        BuildCache(root, trust=TrustPolicy()).build([case], jobs=1)
        return {}

    as_account(accounts[READER], build)
    return root


def rewrite(path: Path) -> Callable[[], dict[str, Any]]:
    """``M`` rewrites a file in place, as its group or ACL lets it."""

    def job() -> dict[str, Any]:
        try:
            with path.open("r+") as f:
                f.write("owned\n")
        except OSError as exc:
            return {"wrote": False, "error": exc.strerror}
        return {"wrote": True}

    return job


def test_a_private_group_is_trusted(shared: Path, accounts: dict[str, pwd.struct_passwd]) -> None:
    """``useradd -U`` and umask 002: the group-writable entries are ``R``'s alone."""
    case = spec("genuine\n", shared)
    root = reader_cache(shared, accounts, case)
    assert BuildCache(root).entry(case).stat().st_mode & 0o020
    out = as_account(accounts[READER], reads(root, case))
    assert out == {"found": "genuine\n", "messages": []}


@pytest.mark.usefixtures("member_restored")
def test_a_group_that_is_another_users_primary_group_is_not_private(
    shared: Path, accounts: dict[str, pwd.struct_passwd]
) -> None:
    """``M``'s primary group is ``R``'s (not listed as a member): ``M`` rewrites ``R``'s harness."""
    case = spec("genuine\n", shared)
    root = reader_cache(shared, accounts, case)
    _run("usermod", "-g", READER, MEMBER)
    member = pwd.getpwnam(MEMBER)
    assert as_account(member, rewrite(BuildCache(root).entry(case) / "harness"))["wrote"]
    out = as_account(accounts[READER], reads(root, case))
    assert out["found"] is None
    assert f"writable by group {READER}" in out["messages"][0]


@pytest.mark.usefixtures("member_restored")
def test_a_group_with_another_member_is_not_private(
    shared: Path, accounts: dict[str, pwd.struct_passwd]
) -> None:
    """``N`` is listed in ``R``'s group (``usermod -aG``)."""
    case = spec("genuine\n", shared)
    root = reader_cache(shared, accounts, case)
    _run("usermod", "-aG", READER, OTHER)
    out = as_account(accounts[READER], reads(root, case))
    assert out["found"] is None and f"writable by group {READER}" in out["messages"][0]


needs_setfacl = pytest.mark.skipif(
    shutil.which("setfacl") is None, reason="needs setfacl (apt-get install acl)"
)


@needs_setfacl
def test_an_acl_letting_another_user_write_refuses_the_entry(
    shared: Path, accounts: dict[str, pwd.struct_passwd]
) -> None:
    """Mode 644, owner ``R``, and ``setfacl -m u:M:rw`` on the harness: ``M`` rewrites it."""
    case = spec("genuine\n", shared)
    root = reader_cache(shared, accounts, case)
    harness = BuildCache(root).entry(case) / "harness"
    _run("chmod", "-R", "g-w", str(root))
    _run("setfacl", "-m", f"u:{MEMBER}:rw", str(harness))
    assert as_account(accounts[MEMBER], rewrite(harness))["wrote"]
    out = as_account(accounts[READER], reads(root, case))
    assert out["found"] is None
    assert f"writable by user {MEMBER} ({accounts[MEMBER].pw_uid}) (ACL)" in out["messages"][0]


@needs_setfacl
def test_an_inherited_default_acl_refuses_the_cache(
    shared: Path, accounts: dict[str, pwd.struct_passwd]
) -> None:
    """A default ACL on the cache folder gives ``M`` write on every entry made in it."""
    case = spec("genuine\n", shared)
    root = reader_cache(shared, accounts, case)
    _run("setfacl", "-d", "-m", f"u:{MEMBER}:rwx", str(root))
    out = as_account(accounts[READER], reads(root, case))
    assert out["found"] is None
    assert f"writable by user {MEMBER} ({accounts[MEMBER].pw_uid}) (default ACL)" in out["messages"][0]


@needs_setfacl
def test_an_acl_for_the_trusted_group_is_trusted(
    shared: Path, accounts: dict[str, pwd.struct_passwd]
) -> None:
    """``group:NAME`` trusts NAME however its write is granted; a named user still is not."""
    case = spec("genuine\n", shared)
    root = shared / "cache"
    BuildCache(root, trust=TrustPolicy()).build([case], jobs=1)
    harness = BuildCache(root).entry(case) / "harness"
    _run("setfacl", "-m", f"g:{MEMBER}:rw", str(harness))
    team = TrustPolicy.parse(f"group:{MEMBER}")
    assert BuildCache(root, trust=team).lookup(case) is not None
    assert BuildCache(root, lambda _m: None, trust=TrustPolicy()).lookup(case) is None
    _run("setfacl", "-m", f"u:{OTHER}:rw", str(harness))
    messages: list[str] = []
    assert BuildCache(root, messages.append, trust=team).lookup(case) is None
    assert f"writable by user {OTHER}" in messages[0]


def _key(directory: Path, mode: int) -> Path:
    key = directory / "cache.pub.pem"
    key.write_text("not read before the file is checked\n")
    key.chmod(mode)
    return key


def test_a_verify_key_others_can_write_is_refused(
    shared: Path, accounts: dict[str, pwd.struct_passwd]
) -> None:
    folder = shared / "keys"
    folder.mkdir()
    key = _key(folder, 0o664)
    os.chown(key, -1, accounts[MEMBER].pw_gid)
    with pytest.raises(SigningError, match=f"writable by group {MEMBER}"):
        check_key_file(key, "cache verify key", secret=False)
    key.chmod(0o644)
    check_key_file(key, "cache verify key", secret=False)


@needs_setfacl
def test_a_verify_key_with_an_acl_for_another_user_is_refused(
    shared: Path, accounts: dict[str, pwd.struct_passwd]
) -> None:
    folder = shared / "keys"
    folder.mkdir()
    key = _key(folder, 0o644)
    _run("setfacl", "-m", f"u:{MEMBER}:rw", str(key))
    with pytest.raises(SigningError, match=f"writable by user {MEMBER}"):
        check_key_file(key, "cache verify key", secret=False)


def test_a_verify_key_in_a_folder_others_can_write_is_refused(
    shared: Path, accounts: dict[str, pwd.struct_passwd]
) -> None:
    """``M`` cannot write the key but can rename another over it."""
    folder = shared / "keys"
    folder.mkdir()
    key = _key(folder, 0o644)
    os.chown(folder, -1, accounts[MEMBER].pw_gid)
    folder.chmod(0o775)
    with pytest.raises(SigningError, match=f"lies below {folder}, which is writable by group"):
        check_key_file(key, "cache verify key", secret=False)
    folder.chmod(0o1775)  # sticky, as /tmp: only the owner may replace it
    check_key_file(key, "cache verify key", secret=False)


def test_a_signing_key_others_can_read_is_refused(shared: Path) -> None:
    key = _key(shared, 0o644)
    with pytest.raises(SigningError, match=r"readable by every user \(mode\), .*\(chmod 600 "):
        check_key_file(key, "cache signing key", secret=True)
    key.chmod(0o600)
    check_key_file(key, "cache signing key", secret=True)


def test_a_verify_key_refused_stops_the_lookup(shared: Path, accounts: dict[str, pwd.struct_passwd]) -> None:
    """Through the cache: the session's one line, not an entry quietly unverified."""
    case = spec("genuine\n", shared)
    root = shared / "cache"
    BuildCache(root, trust=TrustPolicy()).build([case], jobs=1)
    key = _key(shared, 0o666)
    with pytest.raises(SigningError, match="writable by every user"):
        BuildCache(root, trust=TrustPolicy(verify_key=key)).lookup(case)
