"""A release unpacked into the cache (``flashinfer-releases/<wheel sha256>/``) is what every
harness is compiled from, so it is checked as a cache entry is: ``release.json`` lists every
file's SHA-256 and is signed by a writer with a key; its files pass the trust policy.

The attack: a member of a group-shared, CI-signed cache, without the key, adds a constructor to
a CUTLASS header of a release entry (before CI unpacks it, or after). CI must not compile from
it and sign the result; a reader must not compile from it; each says which file was tampered
with and unpacks the release again from the wheel (a reader that cannot write stops there).
The member and the reader are real accounts (``useradd``), CI is root with the signing key.
"""

from __future__ import annotations

import grp
import json
import os
import pwd
import shutil
import subprocess
import tempfile
import zipfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from helpers.run_as import account_name, as_account

from pytest_tileconform.compile.trust import TrustPolicy, tree_digests
from pytest_tileconform.flashinfer.releases import (
    ENTRY_FILE,
    ENTRY_SCHEMA,
    ReleaseError,
    entry_dir,
    unpack_wheel,
)
from pytest_tileconform.flashinfer.sources import LAUNCHER_INL

crypto = pytest.importorskip("cryptography.hazmat.primitives.asymmetric.ed25519")
serialization = pytest.importorskip("cryptography.hazmat.primitives.serialization")

HEADER = "flashinfer/data/cutlass/include/cutlass/cutlass.h"
GENUINE = "// cutlass\n"
POISON = GENUINE + '__attribute__((constructor)) static void owned() { system("touch /tmp/owned"); }\n'
FILES = {
    f"flashinfer/data/csrc/nv_internal/{LAUNCHER_INL}": "// launcher\n",
    HEADER: GENUINE,
    "flashinfer/jit/fused_moe.py": "# flags\n",
}
MEMBER, READER, TEAM = (account_name(name) for name in ("tctrust-m", "tctrust-r", "tctrust-team"))


def make_wheel(directory: Path, files: dict[str, str] = FILES) -> Path:
    wheel = directory / "flashinfer_python-0.6.0-py3-none-any.whl"
    with zipfile.ZipFile(wheel, "w") as zf:
        for member, text in files.items():
            zf.writestr(member, text)
        zf.writestr(
            "flashinfer_python-0.6.0.dist-info/METADATA", "Name: flashinfer-python\nVersion: 0.6.0\n\n"
        )
    wheel.chmod(0o644)
    return wheel


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


def resolve(wheel: Path, cache: Path, trust: TrustPolicy) -> tuple[str, list[str]]:
    """Unpack (or find) ``wheel``'s release: its header as it will be compiled, what was said."""
    said: list[str] = []
    release = unpack_wheel(wheel, cache, trust=trust, say=said.append)
    return (release.data_dir / "cutlass/include/cutlass/cutlass.h").read_text(), said


def plant(entry: Path, header: str = POISON, resum: bool = True) -> None:
    """What a writer of the cache without the key can do: change the header and, if ``resum``,
    write the sums again as the unpacker would (it cannot sign them)."""
    (entry / "flashinfer/data/cutlass/include/cutlass/cutlass.h").write_text(header)
    if resum:
        meta = json.loads((entry / ENTRY_FILE).read_text())
        meta["sums"] = tree_digests(entry, TrustPolicy("any"), frozenset({ENTRY_FILE, ENTRY_FILE + ".sig"}))
        (entry / ENTRY_FILE).write_text(json.dumps(meta, indent=1))


def test_an_entry_lists_and_signs_every_file(tmp_path: Path) -> None:
    wheel, (private, public) = make_wheel(tmp_path), keypair(tmp_path)
    assert resolve(wheel, tmp_path / "cache", TrustPolicy(signing_key=private)) == (GENUINE, [])
    entry = entry_dir(tmp_path / "cache", _sha(wheel))
    meta = json.loads((entry / ENTRY_FILE).read_text())
    assert set(meta["sums"]) == {*FILES, "flashinfer/data/VERSION"} and meta["key"] == entry.name
    assert (entry / (ENTRY_FILE + ".sig")).stat().st_size == 64
    assert resolve(wheel, tmp_path / "cache", TrustPolicy(verify_key=public)) == (GENUINE, [])


def test_a_changed_header_is_named_and_unpacked_again(tmp_path: Path) -> None:
    """No key: the sums catch a header changed in place (damage, or a writer the policy trusts
    that forgot the sums)."""
    wheel = make_wheel(tmp_path)
    resolve(wheel, tmp_path / "cache", TrustPolicy())
    entry = entry_dir(tmp_path / "cache", _sha(wheel))
    plant(entry, resum=False)
    header, said = resolve(wheel, tmp_path / "cache", TrustPolicy())
    assert header == GENUINE
    assert f"{entry}/{HEADER} fails its checksum" in said[0] and "unpacking it again" in said[0]


def test_a_resummed_header_fails_the_signature(tmp_path: Path) -> None:
    wheel, (private, public) = make_wheel(tmp_path), keypair(tmp_path)
    resolve(wheel, tmp_path / "cache", TrustPolicy(signing_key=private))
    entry = entry_dir(tmp_path / "cache", _sha(wheel))
    plant(entry)
    header, said = resolve(wheel, tmp_path / "cache", TrustPolicy(verify_key=public))
    assert header == GENUINE and "its signature does not match" in said[0]


def test_an_entry_planted_before_the_signer_unpacks_is_not_signed_over(tmp_path: Path) -> None:
    """The signer accepts only entries signed with its own key: a planted entry with correct
    sums is unpacked again before anything is compiled from it."""
    wheel, (private, _) = make_wheel(tmp_path), keypair(tmp_path)
    resolve(wheel, tmp_path / "cache", TrustPolicy())  # an unsigned entry, as a member would leave
    entry = entry_dir(tmp_path / "cache", _sha(wheel))
    plant(entry)
    header, said = resolve(wheel, tmp_path / "cache", TrustPolicy(signing_key=private))
    assert header == GENUINE and "is not signed" in said[0]
    assert (entry / (ENTRY_FILE + ".sig")).exists()


@pytest.mark.parametrize("schema", ["tileconform.flashinfer.release/1", "tileconform.flashinfer.release/2"])
def test_an_entry_of_an_older_schema_is_unpacked_again(tmp_path: Path, schema: str) -> None:
    """An older entry records no members: it cannot be known to hold what the backends read, so
    it is never compiled from as it is, whatever its sums (a /1 entry has none)."""
    wheel = make_wheel(tmp_path)
    resolve(wheel, tmp_path / "cache", TrustPolicy())
    entry = entry_dir(tmp_path / "cache", _sha(wheel))
    meta = json.loads((entry / ENTRY_FILE).read_text())
    meta["schema"] = schema
    del meta["members"]
    (entry / ENTRY_FILE).write_text(json.dumps(meta))
    header, said = resolve(wheel, tmp_path / "cache", TrustPolicy())
    assert header == GENUINE
    assert f"unpacked by an older tileconform ({schema})" in said[0] and "unpacking it again" in said[0]
    assert json.loads((entry / ENTRY_FILE).read_text())["schema"] == ENTRY_SCHEMA


# -- the attack with real accounts ----------------------------------------------------------

needs_accounts = pytest.mark.skipif(
    not hasattr(os, "geteuid") or os.geteuid() != 0 or shutil.which("useradd") is None,
    reason="needs root and useradd to create the second users",
)


def _run(*command: str) -> None:
    subprocess.run(command, check=True, capture_output=True)


@pytest.fixture(scope="module")
def team() -> Iterator[dict[str, Any]]:
    """``M`` and ``R`` (own groups), both in the team group; removed after if made here."""
    made_group = False
    try:
        grp.getgrnam(TEAM)
    except KeyError:
        _run("groupadd", TEAM)
        made_group = True
    made = []
    for name in (MEMBER, READER):
        try:
            pwd.getpwnam(name)
        except KeyError:
            _run("useradd", "-U", "-M", "-s", "/usr/sbin/nologin", name)
            made.append(name)
        _run("usermod", "-aG", TEAM, name)
    yield {"gid": grp.getgrnam(TEAM).gr_gid, MEMBER: pwd.getpwnam(MEMBER), READER: pwd.getpwnam(READER)}
    for name in (MEMBER, READER):
        _run("gpasswd", "-d", name, TEAM)
    for name in made:
        subprocess.run(["userdel", name], capture_output=True)
    if made_group:
        subprocess.run(["groupdel", TEAM], capture_output=True)


@pytest.fixture
def shared(team: dict[str, Any]) -> Iterator[dict[str, Any]]:
    """A team cache (setgid, group-writable), the public wheel and CI's keys."""
    top = Path(tempfile.mkdtemp(prefix="tileconform-release-"))
    top.chmod(0o755)
    cache = top / "cache"
    cache.mkdir()
    os.chown(cache, -1, team["gid"])
    cache.chmod(0o2775)
    wheel = make_wheel(top)
    private, public = keypair(top)
    yield {"cache": cache, "wheel": wheel, "private": private, "public": public, **team}
    shutil.rmtree(top, ignore_errors=True)


def as_ci(shared: dict[str, Any]) -> tuple[str, list[str]]:
    old = os.umask(0o002)
    try:
        return resolve(
            shared["wheel"], shared["cache"], TrustPolicy("group", shared["gid"], shared["private"])
        )
    finally:
        os.umask(old)


def member_plants(shared: dict[str, Any], resum: bool = True) -> dict[str, Any]:
    """``M`` poisons the release entry (made by ``M`` first when there is none: an unsigned
    entry with correct sums, as an older tileconform or ``M`` itself would unpack it)."""

    def job() -> dict[str, Any]:
        team = TrustPolicy("group", shared["gid"])
        entry = entry_dir(shared["cache"], _sha(shared["wheel"]))
        if not entry.exists():
            unpack_wheel(shared["wheel"], shared["cache"], trust=team, say=lambda _m: None)
        plant(entry, resum=resum)
        return {"entry": str(entry)}

    return as_account(shared[MEMBER], job)


def reader_resolves(shared: dict[str, Any]) -> dict[str, Any]:
    def job() -> dict[str, Any]:
        trust = TrustPolicy("group", shared["gid"], verify_key=shared["public"])
        try:
            header, said = resolve(shared["wheel"], shared["cache"], trust)
        except ReleaseError as exc:
            return {"error": str(exc)}
        return {"header": header, "said": said}

    return as_account(shared[READER], job)


def _sha(wheel: Path) -> str:
    import hashlib

    return hashlib.sha256(wheel.read_bytes()).hexdigest()


@needs_accounts
def test_a_member_poisons_the_release_before_ci_unpacks_it(shared: dict[str, Any]) -> None:
    entry = Path(member_plants(shared)["entry"])
    assert (entry / HEADER).read_text() == POISON and entry.stat().st_uid == shared[MEMBER].pw_uid
    header, said = as_ci(shared)
    assert header == GENUINE
    assert "FlashInfer release in the build cache refused" in said[0] and "is not signed" in said[0]
    out = reader_resolves(shared)
    assert out == {"header": GENUINE, "said": []}


@needs_accounts
def test_a_member_poisons_the_release_after_ci_signed_it(shared: dict[str, Any]) -> None:
    as_ci(shared)
    entry = Path(member_plants(shared, resum=False)["entry"])
    assert (entry / HEADER).read_text() == POISON
    out = reader_resolves(shared)
    assert out["header"] == GENUINE
    assert f"{entry}/{HEADER} fails its checksum" in out["said"][0]


@needs_accounts
def test_a_reader_that_cannot_repair_the_release_stops_naming_the_file(shared: dict[str, Any]) -> None:
    as_ci(shared)
    entry = Path(member_plants(shared, resum=False)["entry"])
    _run("chmod", "-R", "g-w", str(shared["cache"]))  # the team's CI-only cache, read-only to R
    out = reader_resolves(shared)
    assert f"{entry}/{HEADER} fails its checksum" in out["error"]
    assert "read-only for you" in out["error"]


def test_the_plugin_says_which_file_of_the_release_was_tampered_with(pytester: pytest.Pytester) -> None:
    """Through pytest, as a user runs it: ``--tile-flashinfer WHEEL`` over a cache whose entry
    for that wheel has a constructor added to a CUTLASS header. The run names the file, unpacks
    the wheel again and goes on with the genuine header."""
    from pytest_tileconform.flashinfer.compat import HARNESS_MACRO_PARAMS, MACRO

    macro = f"#define {MACRO}({', '.join(HARNESS_MACRO_PARAMS)})"
    nested = "namespace tensorrt_llm {\nnamespace kernels {\nnamespace cutlass_kernels_oss {\n"
    launcher = {f"flashinfer/data/csrc/nv_internal/{LAUNCHER_INL}": f"{nested}{macro}\n}}\n}}\n}}\n"}
    wheel = make_wheel(pytester.path, {**FILES, **launcher})
    cache = pytester.path / "cache"
    resolve(wheel, cache, TrustPolicy())
    entry = entry_dir(cache, _sha(wheel))
    plant(entry, resum=False)
    (pytester.path / "m.yaml").write_text(
        "version: 1\nbackend: flashinfer-cutlass-moe\nsuites:\n  - arch: sm90\n    dtype: bf16\n"
        "    tile: [128x128x64]\n    problems: {experts: 2, rows: 8, n: 64, k: 64}\n"
    )
    result = pytester.runpytest(
        "--tile-matrix",
        "m.yaml",
        "--tile-flashinfer",
        str(wheel),
        "--tile-cache-dir",
        str(cache),
        "--collect-only",
        "-q",
        "-p",
        "no:cacheprovider",
    )
    assert result.ret == pytest.ExitCode.OK, result.stdout.str() + result.stderr.str()
    said = [line for line in result.errlines if "FlashInfer release in the build cache refused" in line]
    assert (
        len(said) == 1
        and f"{entry}/{HEADER} fails its checksum" in said[0]
        and "unpacking it again" in said[0]
    )
    assert (entry / HEADER).read_text() == GENUINE
