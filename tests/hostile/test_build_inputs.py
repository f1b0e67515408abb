"""What is signed is what was compiled from. A signed build copies what it reads (FlashInfer's
sources, the harness, the virtual runtime ``libvcudart.a``) into its private folder and checks
each copy against the digest it was checked with, then compiles from the copies; the entry's
manifest lists those digests under the signature.

The attack: in a group-shared, CI-signed cache, a member without the key swaps the runtime
once CI's build folder appears (it used to be checked before the compile and linked by path at
its end). The swap must not get into what CI signs; one before the copy stops the build naming
the input; a reader is told which input was tampered with. The member is a real account.
"""

from __future__ import annotations

import grp
import json
import os
import pwd
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from helpers.run_as import account_name

from pytest_tileconform.compile.cache import BuildCache, BuildSpec
from pytest_tileconform.compile.hostbuild import artifact_digest, build_once
from pytest_tileconform.compile.inputs import FILE, TREE, BuildInput, InputChanged, digest, read_tree
from pytest_tileconform.compile.trust import TrustPolicy

crypto = pytest.importorskip("cryptography.hazmat.primitives.asymmetric.ed25519")
serialization = pytest.importorskip("cryptography.hazmat.primitives.serialization")

#: links "the harness": the unit, the header it includes and the runtime it links, as read when
#: it runs; with WAIT_FOR set it first says it started (that file's name + ".started", as the
#: build folder's compiles do) and waits (up to 10 s) for that file to appear
COMPILER = """
import os, pathlib, sys, time
src, out, header, runtime = map(pathlib.Path, sys.argv[1:5])
if wait := os.environ.get("WAIT_FOR"):
    pathlib.Path(wait + ".started").touch()
    for _ in range(200):
        if os.path.exists(wait):
            break
        time.sleep(0.05)
out.write_text(src.read_text() + header.read_text() + runtime.read_text())
print("compiled", header)
"""
GENUINE, SWAPPED = "genuine runtime\n", "payload runtime\n"
MEMBER, TEAM = account_name("tctrust-m"), account_name("tctrust-team")


def keypair(directory: Path) -> tuple[Path, Path]:
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
    public.chmod(0o644)
    return private, public


class World:
    """A cache with a runtime built once (as ``build_once`` builds ``libvcudart.a``), sources
    with one header, and the unit's spec naming both as inputs."""

    def __init__(self, top: Path, trust: TrustPolicy) -> None:
        self.top, self.cache, self.trust = top, top / "cache", trust
        self.sources = top / "sources"
        self.sources.mkdir()
        (self.sources / "cutlass.h").write_text("// cutlass\n")
        (top / "cc.py").write_text(COMPILER)

        self.runtime = build_once(self.cache, "vcudart", (b"v",), "libvcudart.a", self.produce, trust)

    @staticmethod
    def produce(directory: Path) -> None:
        (directory / "libvcudart.a").write_text(GENUINE)

    def spec(self, trust: TrustPolicy | None = None) -> BuildSpec:
        relative = self.runtime.relative_to(self.cache).as_posix()
        inputs = (
            BuildInput(
                "sources", self.sources, ("cutlass.h",), digest(TREE, read_tree(self.sources, ["cutlass.h"]))
            ),
            BuildInput(
                "cache", self.cache, (relative,), artifact_digest(self.runtime, trust or self.trust), FILE
            ),
        )
        command = (
            sys.executable,
            str(self.top / "cc.py"),
            "{src}",
            "{out}",
            "{sources}/cutlass.h",
            f"{{cache}}/{relative}",
        )
        roots = (("sources", str(self.sources)), ("cache", str(self.cache)))
        return BuildSpec("unit\n", command, "salt", 1, "unit", roots=roots, inputs=inputs)


@pytest.fixture
def keys(tmp_path: Path) -> tuple[Path, Path]:
    return keypair(tmp_path)


def test_a_signed_build_compiles_from_checked_copies_and_lists_them(
    tmp_path: Path, keys: tuple[Path, Path]
) -> None:
    world = World(tmp_path, TrustPolicy(signing_key=keys[0]))
    spec = world.spec()
    built = BuildCache(world.cache, trust=world.trust).build([spec], jobs=1)[spec.key]
    assert built.artifact.read_text() == "unit\n// cutlass\n" + GENUINE
    meta = json.loads((built.path / "build.json").read_text())
    assert meta["inputs"] == {item.name: item.digest for item in spec.inputs}
    # the log names the inputs where they lie, as an unsigned build's would
    assert f"compiled {world.sources}/cutlass.h" in (built.path / "build.log").read_text()
    reader = BuildCache(world.cache, trust=TrustPolicy(verify_key=keys[1]))
    assert reader.lookup(world.spec(TrustPolicy(verify_key=keys[1]))) is not None


def test_a_swap_after_the_copy_does_not_get_in(
    tmp_path: Path, keys: tuple[Path, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The runtime is replaced while the compile runs: the build linked the copy it checked."""
    world = World(tmp_path, TrustPolicy(signing_key=keys[0]))
    spec = world.spec()
    marker = tmp_path / "swapped"
    monkeypatch.setenv("WAIT_FOR", str(marker))
    swapper = threading.Thread(target=swap_when_building, args=(world.runtime, marker))
    swapper.start()
    built = BuildCache(world.cache, trust=world.trust).build([spec], jobs=1)[spec.key]
    swapper.join()
    assert world.runtime.read_text() == SWAPPED
    assert built.artifact.read_text().endswith(GENUINE)


def swap_when_building(runtime: Path, marker: Path) -> None:
    """Once the compile runs (CI's build folder is there and its compiler started), replace the
    runtime in place and let the compiler go on."""
    started = Path(f"{marker}.started")
    for _ in range(400):
        if started.exists():
            break
        time.sleep(0.025)
    runtime.write_text(SWAPPED)
    marker.touch()


def test_a_swap_before_the_copy_stops_the_build_naming_the_input(
    tmp_path: Path, keys: tuple[Path, Path]
) -> None:
    world = World(tmp_path, TrustPolicy(signing_key=keys[0]))
    spec = world.spec()  # the runtime checked
    world.runtime.write_text(SWAPPED)  # ... and swapped before the build reads it
    cache = BuildCache(world.cache, trust=world.trust)
    with pytest.raises(InputChanged, match=f"{world.runtime} changed after it was checked"):
        cache.build([spec], jobs=1)
    assert cache.lookup(spec) is None and not list(world.cache.glob("*/*/build.json"))


def test_an_entry_built_from_other_inputs_is_refused_naming_the_input(
    tmp_path: Path, keys: tuple[Path, Path]
) -> None:
    """The manifest is compared with the reader's own inputs: sources or runtime not the ones
    the reader checked are named."""
    world = World(tmp_path, TrustPolicy(signing_key=keys[0]))
    BuildCache(world.cache, trust=world.trust).build([world.spec()], jobs=1)
    (world.sources / "cutlass.h").write_text("// cutlass, another release\n")
    messages: list[str] = []
    reader = BuildCache(world.cache, messages.append, trust=TrustPolicy(verify_key=keys[1]))
    assert reader.lookup(world.spec(TrustPolicy(verify_key=keys[1]))) is None
    assert (
        "was built from sources sha256:" in messages[0] and "not from the sources checked here" in messages[0]
    )


def test_a_signed_entry_must_list_its_inputs(tmp_path: Path, keys: tuple[Path, Path]) -> None:
    """An entry signed before manifests listed inputs says nothing of what it was built from."""
    world = World(tmp_path, TrustPolicy(signing_key=keys[0]))
    spec = world.spec()
    built = BuildCache(world.cache, trust=world.trust).build([spec], jobs=1)[spec.key]
    from pytest_tileconform.compile.trust import write_meta

    meta = json.loads((built.path / "build.json").read_text())
    del meta["inputs"]
    write_meta(built.path, meta, world.trust)  # signed by the key, without the list
    messages: list[str] = []
    reader = BuildCache(world.cache, messages.append, trust=TrustPolicy(verify_key=keys[1]))
    assert reader.lookup(world.spec(TrustPolicy(verify_key=keys[1]))) is None
    assert "does not list what the build read" in messages[0]


# -- the attack with a real second account ---------------------------------------------------

needs_accounts = pytest.mark.skipif(
    not hasattr(os, "geteuid") or os.geteuid() != 0 or shutil.which("useradd") is None,
    reason="needs root and useradd to create the second user",
)


def _run(*command: str) -> None:
    subprocess.run(command, check=True, capture_output=True)


@pytest.fixture
def member() -> Iterator[tuple[pwd.struct_passwd, int]]:
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
    _run("gpasswd", "-d", MEMBER, TEAM)
    if made_user:
        subprocess.run(["userdel", MEMBER], capture_output=True)
    if made_group:
        subprocess.run(["groupdel", TEAM], capture_output=True)


def as_member(user: pwd.struct_passwd, team: int, runtime: Path, marker: Path) -> dict[str, Any]:
    """``M`` (a forked child with ``M``'s ids) waits for CI's build folder, then rewrites the
    team-writable runtime in place."""
    readable, writable = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: never returns into pytest
        try:
            os.close(readable)
            os.setgroups([user.pw_gid, team])
            os.setgid(user.pw_gid)
            os.setuid(user.pw_uid)
            swap_when_building(runtime, marker)
            data = json.dumps({"swapped": runtime.read_text() == SWAPPED}).encode()
        except BaseException as exc:
            data = json.dumps({"crash": repr(exc)}).encode()
        with os.fdopen(writable, "wb") as out:
            out.write(data)
        os._exit(0)
    os.close(writable)
    with os.fdopen(readable, "rb") as stream:
        data = stream.read()
    os.waitpid(pid, 0)
    result: dict[str, Any] = json.loads(data)
    assert "crash" not in result, result["crash"]
    return result


@needs_accounts
def test_a_member_swaps_the_runtime_while_ci_builds(
    member: tuple[pwd.struct_passwd, int], monkeypatch: pytest.MonkeyPatch
) -> None:
    user, team = member
    top = Path(tempfile.mkdtemp(prefix="tileconform-inputs-"))
    try:
        top.chmod(0o755)
        private, public = keypair(top)
        (top / "cache").mkdir()
        os.chown(top / "cache", -1, team)
        (top / "cache").chmod(0o2775)
        old = os.umask(0o002)
        try:
            world = World(top, TrustPolicy("group", team, private))
            spec = world.spec()
            marker = top / "cache" / "swapped"  # where M can write
            monkeypatch.setenv("WAIT_FOR", str(marker))
            result: dict[str, Any] = {}
            swapper = threading.Thread(
                target=lambda: result.update(as_member(user, team, world.runtime, marker))
            )
            swapper.start()
            built = BuildCache(world.cache, trust=world.trust).build([spec], jobs=1)[spec.key]
            swapper.join()
        finally:
            os.umask(old)
        assert result == {"swapped": True} and world.runtime.stat().st_uid == 0  # rewritten in place, by M
        assert built.artifact.read_text().endswith(GENUINE)  # what CI signed holds the runtime it checked
        # a reader is told the runtime was tampered with, and still runs CI's genuine harness
        reader_trust = TrustPolicy("group", team, verify_key=public)
        refused: list[str] = []
        rebuilt = build_once(
            world.cache, "vcudart", (b"v",), "libvcudart.a", World.produce, reader_trust, refused.append
        )
        assert rebuilt.read_text() == GENUINE
        assert f"{world.runtime.parent}" in refused[0] and "signature" not in refused[0]
        assert "fails its checksums (libvcudart.a)" in refused[0]  # the tampered file, named
    finally:
        shutil.rmtree(top, ignore_errors=True)
