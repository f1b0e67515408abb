"""Attacks on a cache that its checks used to miss, each carried out by a real second account
``M`` (``useradd``; a member of the team group ``T``) against a reader, and each failing closed:
no entry believed, nothing of it run, one line saying what is wrong and how to fix it.

* **A file of a signed team cache swapped between its check and its run**: ``M`` (in ``T``,
  without the key) rewrites or replaces a checked harness. What runs is a descriptor of the
  checked bytes (a sealed copy, since ``M`` can write the file): a change before it is opened
  stops the session, one after it does not reach what runs, for a program run once (the virtual
  harness, the tactics probe), a unit the runner loads (the hardware harness) and the runner.
* **A folder above the cache** that ``M`` can write (or a link through one): ``M`` renames the
  checked cache away and puts theirs in its place. The cache is refused before anything in it is
  used, naming the folder (a sticky folder, as /tmp, is fine).
* **A signing key ``M`` can read**: ``M`` signs what they like. Refused, naming the file and
  ``chmod 600``.
* **A FIFO (or another non-file) planted as build.json**, its signature or a key: the run used to
  wait for a writer forever. Refused without waiting.
"""

from __future__ import annotations

import functools
import grp
import os
import pwd
import shutil
import signal
import subprocess
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from types import FrameType
from typing import Any

import pytest
from helpers import run_as
from helpers.run_as import account_name

from pytest_tileconform.compile.cache import BuildCache, BuildSpec, CacheUnusable
from pytest_tileconform.compile.signing import SigningError, check_key_file
from pytest_tileconform.compile.trust import TrustPolicy

pytestmark = pytest.mark.skipif(
    not hasattr(os, "geteuid") or os.geteuid() != 0 or shutil.which("useradd") is None,
    reason="needs root and useradd to create the second user",
)

MEMBER, TEAM = account_name("tcswap-m"), account_name("tcswap-team")
#: the "compiler": the unit's text becomes an executable shell script (mode by the umask, as nvcc's)
FAKE_COMPILER = '#!/bin/sh\ncp "$1" "$2" && chmod +x "$2"\n'


def _run(*command: str) -> None:
    subprocess.run(command, check=True, capture_output=True)


@pytest.fixture(scope="module")
def member() -> Iterator[tuple[pwd.struct_passwd, int]]:
    """``M``, with a group of its own and a member of ``T``; both removed after."""
    made_group = made_user = False
    try:
        grp.getgrnam(TEAM)
    except KeyError:
        _run("groupadd", TEAM)
        made_group = True
    try:
        pwd.getpwnam(MEMBER)
    except KeyError:
        _run("useradd", "-U", "-M", "-s", "/usr/sbin/nologin", MEMBER)
        made_user = True
    _run("usermod", "-aG", TEAM, MEMBER)
    yield pwd.getpwnam(MEMBER), grp.getgrnam(TEAM).gr_gid
    if made_user:
        subprocess.run(["userdel", MEMBER], capture_output=True)
    if made_group:
        subprocess.run(["groupdel", TEAM], capture_output=True)


@pytest.fixture
def shared() -> Iterator[Path]:
    """A folder every account can reach (pytest's tmp folders are root's, 0700), holding the
    fake compiler."""
    top = Path(tempfile.mkdtemp(prefix="tileconform-swaps-"))
    top.chmod(0o755)
    (top / "cc.sh").write_text(FAKE_COMPILER)
    (top / "cc.sh").chmod(0o755)
    yield top
    shutil.rmtree(top, ignore_errors=True)


def spec(source: str, shared: Path) -> BuildSpec:
    return BuildSpec(source, ("/bin/sh", str(shared / "cc.sh"), "{src}", "{out}"), "cc", 1 << 20, "unit")


def as_member(member: tuple[pwd.struct_passwd, int], job: Callable[[], dict[str, Any]]) -> dict[str, Any]:
    done: dict[str, Any] = run_as.as_account(member[0], job, clear_cache_env=True)
    return done


@pytest.fixture
def no_hang() -> Iterator[None]:
    """Fails the test in 20 s where a blocking open of a FIFO would wait forever."""

    def fire(_signum: int, _frame: FrameType | None) -> None:
        raise TimeoutError("the cache waited on a FIFO")

    previous = signal.signal(signal.SIGALRM, fire)
    signal.alarm(20)
    yield
    signal.alarm(0)
    signal.signal(signal.SIGALRM, previous)


# -- a folder above the cache -------------------------------------------------------------


def open_folder(shared: Path, member: tuple[pwd.struct_passwd, int], mode: int = 0o775) -> Path:
    """A folder ``M`` can write through ``T`` (as a project folder of the team)."""
    folder = shared / "projects"
    folder.mkdir()
    os.chown(folder, -1, member[1])
    folder.chmod(mode)
    return folder


def swap_whole(root: Path) -> Callable[[], dict[str, Any]]:
    """``M`` renames the cache away and puts a folder of theirs in its place."""

    def job() -> dict[str, Any]:
        os.rename(root, root.with_name("moved"))
        root.mkdir()
        return {"swapped": True}

    return job


def test_an_owner_cache_below_a_folder_another_user_can_write_is_refused(
    shared: Path, member: tuple[pwd.struct_passwd, int]
) -> None:
    """The reader's own cache, private all through, lies in a folder ``M`` can write: ``M`` can
    swap it whole (shown), so nothing in it is believed, and a build says why in one line."""
    folder = open_folder(shared, member)
    root = folder / "cache"
    case = spec("#!/bin/sh\necho genuine\n", shared)
    BuildCache(root, trust=TrustPolicy("any")).build([case], jobs=1)  # made before the check existed
    messages: list[str] = []
    cache = BuildCache(root, messages.append, trust=TrustPolicy())
    assert cache.lookup(case) is None
    assert messages[0] == (
        f"build cache refused: {root} lies below {folder}, which is writable by group {TEAM} "
        f"({member[1]}) (mode): the cache could be swapped after it is checked; move it below folders "
        f"only you and root can change (--tile-cache-dir), or make {folder} so (chmod go-w, or "
        "chmod +t as /tmp is)"
    )
    with pytest.raises(CacheUnusable, match=f"not trusted: {root} lies below {folder}, which is writable"):
        cache.build([case], jobs=1)
    assert as_member(member, swap_whole(root)) == {"swapped": True}  # what the refusal prevents


def test_a_link_into_a_folder_another_user_can_write_is_refused(
    shared: Path, member: tuple[pwd.struct_passwd, int]
) -> None:
    """The cache is named through a link of the reader's, in the reader's folder; its target
    lies where ``M`` can write. The folder named is the target's."""
    folder = open_folder(shared, member)
    (folder / "cache").mkdir()
    (shared / "mine").mkdir()
    (shared / "mine" / "cache").symlink_to(folder / "cache")
    with pytest.raises(CacheUnusable, match=f"lies below {folder}, which is writable by group {TEAM}"):
        BuildCache(shared / "mine" / "cache", trust=TrustPolicy()).build([spec("x\n", shared)], jobs=1)


def test_dotdot_after_a_link_is_where_the_link_leads(
    shared: Path, member: tuple[pwd.struct_passwd, int]
) -> None:
    """``mine/link/../cache`` is the cache beside the link's target, as the kernel resolves it
    (in ``M``'s folder), not ``mine/cache`` as the text reads."""
    folder = open_folder(shared, member)
    (folder / "x").mkdir()
    (shared / "mine").mkdir()
    (shared / "mine" / "link").symlink_to(folder / "x")
    with pytest.raises(CacheUnusable, match=f"lies below {folder}, which is writable by group {TEAM}"):
        BuildCache(shared / "mine" / "link" / ".." / "cache", trust=TrustPolicy()).build(
            [spec("x\n", shared)], jobs=1
        )


def test_a_link_of_another_user_on_the_way_is_refused(
    shared: Path, member: tuple[pwd.struct_passwd, int]
) -> None:
    """In a sticky folder (as /tmp) ``M`` may own a link the reader's path goes through; ``M``
    can replace it, so it is refused."""
    sticky = open_folder(shared, member, 0o1777)

    def plant() -> dict[str, Any]:
        (sticky / "link").symlink_to(shared)
        return {}

    as_member(member, plant)
    with pytest.raises(CacheUnusable, match=f"{sticky / 'link'}, which is a link belonging to uid"):
        BuildCache(sticky / "link" / "cache", trust=TrustPolicy()).build([spec("x\n", shared)], jobs=1)


def test_a_sticky_folder_and_a_trusted_groups_folder_are_fine(
    shared: Path, member: tuple[pwd.struct_passwd, int]
) -> None:
    """In a sticky folder only the reader (and root) may rename the reader's cache; a folder
    the trusted group can write is as trusted as the group's entries."""
    folder = open_folder(shared, member, 0o1777)
    case = spec("#!/bin/sh\necho genuine\n", shared)
    cache = BuildCache(folder / "cache", trust=TrustPolicy())
    assert cache.build([case], jobs=1)[case.key].ok
    assert BuildCache(folder / "cache", trust=TrustPolicy()).lookup(case) is not None
    folder.chmod(0o2775)
    team = TrustPolicy.parse(f"group:{member[1]}")
    assert BuildCache(folder / "cache", trust=team).lookup(case) is not None
    assert BuildCache(folder / "cache", lambda _m: None, trust=TrustPolicy()).lookup(case) is None


def test_host_builds_below_a_folder_another_user_can_write_are_refused(
    shared: Path, member: tuple[pwd.struct_passwd, int]
) -> None:
    """The runner and the virtual runtime (:func:`build_once`) lie in the same cache."""
    from pytest_tileconform.compile.hostbuild import HostBuildError, build_once

    def produce(directory: Path) -> None:
        (directory / "tool").write_text("x")

    folder = open_folder(shared, member)
    with pytest.raises(HostBuildError, match=f"lies below {folder}, which is writable by group"):
        build_once(folder / "cache", "tool", (b"x",), "tool", produce)


# -- a signing key others can read --------------------------------------------------------


def test_a_signing_key_another_user_can_read_is_refused(
    shared: Path, member: tuple[pwd.struct_passwd, int]
) -> None:
    """Readable by ``T`` (mode 640): ``M`` reads it (shown), so it is not used."""
    key = shared / "ci.pem"
    key.write_text("-----BEGIN PRIVATE KEY-----\n")
    os.chown(key, -1, member[1])
    key.chmod(0o640)
    assert as_member(member, lambda: {"read": key.read_text()[:5]}) == {"read": "-----"}
    with pytest.raises(SigningError) as refused:
        check_key_file(key, "cache signing key", secret=True)
    assert str(refused.value) == (
        f"cache signing key {key} is readable by group {TEAM} ({member[1]}) (mode), who could then "
        f"sign cache entries: refused (chmod 600 {key})"
    )
    key.chmod(0o600)
    assert check_key_file(key, "cache signing key", secret=True).startswith(b"-----BEGIN")
    key.chmod(0o644)  # a public key may be read by all
    check_key_file(key, "cache verify key", secret=False)


def test_a_signing_key_below_a_folder_another_user_can_write_is_refused(
    shared: Path, member: tuple[pwd.struct_passwd, int]
) -> None:
    folder = open_folder(shared, member)
    (folder / "keys").mkdir(mode=0o700)
    key = folder / "keys" / "ci.pem"
    key.write_text("k")
    key.chmod(0o600)
    with pytest.raises(SigningError, match=f"lies below {folder}, which is writable by group {TEAM}"):
        check_key_file(key, "cache signing key", secret=True)


# -- a FIFO where a file is expected ------------------------------------------------------


def group_cache(shared: Path, member: tuple[pwd.struct_passwd, int], case: BuildSpec) -> BuildCache:
    """The team's cache (setgid, umask 002), which ``M`` may write."""
    root = shared / "cache"
    root.mkdir()
    os.chown(root, -1, member[1])
    root.chmod(0o2775)
    cache = BuildCache(root, trust=TrustPolicy("group", member[1]))
    old = os.umask(0o002)
    try:
        cache.build([case], jobs=1)
    finally:
        os.umask(old)
    return cache


def plant_fifo(path: Path) -> Callable[[], dict[str, Any]]:
    def job() -> dict[str, Any]:
        path.unlink()
        os.mkfifo(path, 0o664)
        return {}

    return job


@pytest.mark.usefixtures("no_hang")
@pytest.mark.parametrize("name", ["build.json", "harness"])
def test_a_fifo_planted_in_an_entry_is_refused_without_waiting(
    shared: Path, member: tuple[pwd.struct_passwd, int], name: str
) -> None:
    """``M`` replaces a file of a team entry with a FIFO: the lookup, the cheap count and a
    rebuild go on without waiting for a writer."""
    case = spec("#!/bin/sh\necho genuine\n", shared)
    cache = group_cache(shared, member, case)
    as_member(member, plant_fifo(cache.entry(case) / name))
    messages: list[str] = []
    reader = BuildCache(cache.root, messages.append, trust=cache.trust)
    assert reader.has(case) is (name != "build.json")
    assert reader.lookup(case) is None
    assert f"{cache.entry(case) / name} is a FIFO, not a regular file" in messages[0]
    rebuilt = reader.build([case], jobs=1)[case.key]
    assert rebuilt.ok and (rebuilt.path / name).is_file()


@pytest.mark.usefixtures("no_hang")
def test_a_fifo_as_a_signature_or_a_key_is_refused_without_waiting(shared: Path) -> None:
    pytest.importorskip("cryptography")
    fifo = shared / "key.pem"
    os.mkfifo(fifo, 0o600)
    with pytest.raises(SigningError, match="is not a key file"):
        check_key_file(fifo, "cache signing key", secret=True)
    case = spec("x\n", shared)
    cache = BuildCache(shared / "cache", trust=TrustPolicy())
    cache.build([case], jobs=1)
    os.mkfifo(cache.entry(case) / "build.json.sig", 0o600)
    public = shared / "ci.pub.pem"
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric import ed25519

    public.write_bytes(
        ed25519.Ed25519PrivateKey.generate()
        .public_key()
        .public_bytes(serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo)
    )
    messages: list[str] = []
    assert BuildCache(cache.root, messages.append, trust=TrustPolicy(verify_key=public)).lookup(case) is None
    assert "build.json.sig is a FIFO, not a regular file" in messages[0]


# -- a swap between the check and the run -------------------------------------------------

GENUINE, PAYLOAD = "#!/bin/sh\necho genuine\n", "#!/bin/sh\necho payload\ntouch {marker}\n"


def keypair(directory: Path) -> tuple[Path, Path]:
    crypto = pytest.importorskip("cryptography.hazmat.primitives.asymmetric.ed25519")
    serialization = pytest.importorskip("cryptography.hazmat.primitives.serialization")
    key = crypto.Ed25519PrivateKey.generate()
    private, public = directory / "ci.pem", directory / "ci.pub.pem"
    private.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
        )
    )
    private.chmod(0o600)
    public.write_bytes(
        key.public_key().public_bytes(
            serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
        )
    )
    return private, public


def signed_team_cache(
    shared: Path, member: tuple[pwd.struct_passwd, int], case: BuildSpec
) -> tuple[BuildCache, TrustPolicy]:
    """CI signs into the team's cache (setgid ``T``, umask 002: ``M`` may write every entry);
    readers trust ``T`` and CI's key."""
    private, public = keypair(shared)
    root = shared / "cache"
    root.mkdir()
    os.chown(root, -1, member[1])
    root.chmod(0o2775)
    old = os.umask(0o002)
    try:
        BuildCache(root, trust=TrustPolicy("group", member[1], signing_key=private)).build([case], jobs=1)
    finally:
        os.umask(old)
    reader = TrustPolicy("group", member[1], verify_key=public)
    return BuildCache(root, trust=reader), reader


def swap(path: Path, payload: bytes, how: str) -> Callable[[], dict[str, Any]]:
    """``M`` rewrites ``path`` in place (its group may write it) or renames a file of theirs over
    it (its folder's group may write it)."""

    def job() -> dict[str, Any]:
        if how == "rewrite":
            with path.open("r+b") as f:
                f.write(payload)
                f.truncate()
        else:
            planted = path.with_name("planted")
            planted.write_bytes(payload)
            planted.chmod(0o775)
            os.rename(planted, path)
        return {"owner": path.stat().st_uid}

    return job


@pytest.mark.parametrize("how", ["rewrite", "rename"])
def test_a_swap_after_the_check_is_not_run(
    shared: Path, member: tuple[pwd.struct_passwd, int], how: str
) -> None:
    """``M`` changes the harness after the reader checked the entry, before it runs: the run
    stops with one line, and ``M``'s code does not run."""
    from pytest_tileconform.compile.handles import EntryChanged

    case = spec(GENUINE, shared)
    cache, _ = signed_team_cache(shared, member, case)
    found = cache.lookup(case)
    assert found is not None and found.ok  # checked: sums, signature, writers
    marker = shared / "ran"
    payload = PAYLOAD.format(marker=marker).encode()
    assert as_member(member, swap(found.artifact, payload, how))["owner"] in (0, member[0].pw_uid)
    refused = pytest.raises(EntryChanged, match=r"harness is not what was checked .* nothing of it was run")
    with refused, found.running() as executable:
        subprocess.run([str(executable)], check=False)
    with pytest.raises(EntryChanged):
        found.runnable()
    assert not marker.exists()


@pytest.mark.parametrize("how", ["rewrite", "rename"])
def test_a_swap_once_the_run_has_its_handle_does_not_reach_it(
    shared: Path, member: tuple[pwd.struct_passwd, int], how: str
) -> None:
    """The handle is a sealed copy of the checked bytes: what ``M`` does to the file after it was
    opened is not what runs."""
    case = spec(GENUINE, shared)
    cache, _ = signed_team_cache(shared, member, case)
    found = cache.lookup(case)
    assert found is not None
    marker = shared / "ran"
    kept = found.runnable()
    with found.running() as executable:
        assert os.readlink(executable).startswith("/memfd:")  # ``M`` can write the file: copied
        as_member(member, swap(found.artifact, PAYLOAD.format(marker=marker).encode(), how))
        ran = subprocess.run([str(executable)], capture_output=True, text=True, check=True)
    again = subprocess.run([str(kept)], capture_output=True, text=True, check=True)
    assert ran.stdout == again.stdout == "genuine\n" and not marker.exists()


def test_a_private_entry_runs_from_the_cache_file_itself(shared: Path) -> None:
    """The warm path: the reader's own cache, which no one else can write, is run from the file
    that was checked (no copy, not read again)."""
    case = spec(GENUINE, shared)
    cache = BuildCache(shared / "cache", trust=TrustPolicy())
    built = cache.build([case], jobs=1)[case.key]
    found = BuildCache(shared / "cache", trust=TrustPolicy()).lookup(case)
    assert found is not None
    for result in (built, found):
        with result.running() as executable:
            assert os.readlink(executable) == str(found.artifact)
            ran = subprocess.run([str(executable)], capture_output=True, text=True, check=True)
        assert ran.stdout == "genuine\n"


#: a stand-in harness unit the runner loads: its verdict names who built it
UNIT = """
#include <fstream>
#include <string>
extern "C" int tileconform_run_case(const char* run_dir, const char* name, int* context_lost) {
  *context_lost = 0;
  std::ofstream(std::string(run_dir) + "/verdict.json") << "{\\"stage\\": \\"pass\\", \\"by\\": \\"WHO\\"}";
  return 0;
}
"""


def test_the_runner_loads_the_checked_unit_whatever_is_swapped_in(
    shared: Path, member: tuple[pwd.struct_passwd, int], tmp_path: Path
) -> None:
    """The hardware path: the runner (itself a checked host build) loads a unit by the name it
    is given, ``/proc/PID/fd/N`` of the checked bytes; ``M`` replaces the unit's file after that
    name was handed out, and the runner still runs CI's unit."""
    from pytest_tileconform.compile.hostbuild import cxx
    from pytest_tileconform.flashinfer.runner import HarnessRunner, build_runner

    compiler = shared / "cc.sh"
    compiler.write_text(f'#!/bin/sh\n{cxx()} -shared -fPIC -x c++ "$1" -o "$2"\n')
    case = spec(UNIT.replace("WHO", "genuine"), shared)
    cache, _ = signed_team_cache(shared, member, case)
    (shared / "payload.cpp").write_text(UNIT.replace("WHO", "payload"))
    subprocess.run(
        [cxx(), "-shared", "-fPIC", str(shared / "payload.cpp"), "-o", str(shared / "payload.so")], check=True
    )
    found = cache.lookup(case)
    assert found is not None
    unit = found.runnable()
    as_member(member, swap(found.artifact, (shared / "payload.so").read_bytes(), "rename"))
    runner = HarnessRunner(functools.partial(build_runner, tmp_path / "own-cache"))
    try:
        run_dir = tmp_path / "run"
        run_dir.mkdir()
        assert runner.run(unit, run_dir, "case", 30).status == 0
        assert '"by": "genuine"' in (run_dir / "verdict.json").read_text()
    finally:
        runner.close()
