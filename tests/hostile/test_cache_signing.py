"""Signed cache entries for caches shared across machines: a writer signs each entry's
``build.json`` (key, files and their sums) with its Ed25519 private key; a reader that
configures the public key accepts nothing else. Each test forges what an attacker with write
access to the cache (but not the private key) could, and checks it is refused and rebuilt.
"""

from __future__ import annotations

import hashlib
import json
import sys
from pathlib import Path

import pytest

from pytest_tileconform.compile.cache import BuildCache, BuildSpec
from pytest_tileconform.compile.signing import SigningError
from pytest_tileconform.compile.trust import TrustPolicy

crypto = pytest.importorskip("cryptography.hazmat.primitives.asymmetric.ed25519")
serialization = pytest.importorskip("cryptography.hazmat.primitives.serialization")

FAKE_COMPILER = """
import sys, pathlib
src, out, counter = map(pathlib.Path, sys.argv[1:4])
with counter.open("a") as f:
    f.write(src.read_text().splitlines()[0] + "\\n")
out.write_text(src.read_text())
"""


def keypair(directory: Path, name: str) -> tuple[Path, Path]:
    key = crypto.Ed25519PrivateKey.generate()
    private, public = directory / f"{name}.pem", directory / f"{name}.pub.pem"
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
    return private, public


@pytest.fixture
def keys(tmp_path: Path) -> tuple[Path, Path]:
    return keypair(tmp_path, "writer")


@pytest.fixture
def compiler(tmp_path: Path) -> tuple[Path, Path]:
    script = tmp_path / "fake_nvcc.py"
    script.write_text(FAKE_COMPILER)
    return script, tmp_path / "invocations.txt"


def make_spec(source: str, compiler: tuple[Path, Path]) -> BuildSpec:
    command = (sys.executable, str(compiler[0]), "{src}", "{out}", str(compiler[1]))
    return BuildSpec(source, command, "nvcc 13.0", 1 << 20, source.splitlines()[0])


def calls(compiler: tuple[Path, Path]) -> list[str]:
    return compiler[1].read_text().splitlines() if compiler[1].exists() else []


def writer(root: Path, keys: tuple[Path, Path]) -> BuildCache:
    return BuildCache(root, trust=TrustPolicy(signing_key=keys[0]))


def reader(root: Path, public: Path) -> tuple[BuildCache, list[str]]:
    messages: list[str] = []
    return BuildCache(root, messages.append, trust=TrustPolicy(verify_key=public)), messages


def test_signed_entries_are_verified_with_the_configured_key(
    tmp_path: Path, keys: tuple[Path, Path], compiler: tuple[Path, Path]
) -> None:
    case = make_spec("signed\n", compiler)
    entry = writer(tmp_path / "cache", keys).build([case], jobs=1)[case.key].path
    assert (entry / "build.json.sig").stat().st_size == 64
    cache, messages = reader(tmp_path / "cache", keys[1])
    assert cache.build([case], jobs=1)[case.key].artifact.read_text() == "signed\n"
    assert calls(compiler) == ["signed"] and not messages


def test_signed_pointer_leads_to_its_signed_unit(
    tmp_path: Path, keys: tuple[Path, Path], compiler: tuple[Path, Path]
) -> None:
    shared, case = make_spec("unit of a and b\n", compiler), make_spec("a\n", compiler)
    cache = writer(tmp_path / "cache", keys)
    cache.link(case, cache.build([shared], jobs=1)[shared.key])
    found = reader(tmp_path / "cache", keys[1])[0].lookup(case)
    assert found is not None and found.artifact.read_text() == "unit of a and b\n"


def test_wrong_key_is_refused(tmp_path: Path, keys: tuple[Path, Path], compiler: tuple[Path, Path]) -> None:
    """Entries signed by someone else (another team's key) are not this reader's."""
    case = make_spec("theirs\n", compiler)
    writer(tmp_path / "cache", keys).build([case], jobs=1)
    _, other_public = keypair(tmp_path, "other")
    cache, messages = reader(tmp_path / "cache", other_public)
    assert cache.lookup(case) is None
    assert "signature does not match" in messages[0]


def test_unsigned_entry_is_refused_when_verification_is_required(
    tmp_path: Path, keys: tuple[Path, Path], compiler: tuple[Path, Path]
) -> None:
    case = make_spec("unsigned\n", compiler)
    BuildCache(tmp_path / "cache", trust=TrustPolicy()).build([case], jobs=1)
    cache, messages = reader(tmp_path / "cache", keys[1])
    assert cache.lookup(case) is None
    assert "is not signed" in messages[0]


def test_planted_executable_with_recomputed_sums_fails_the_signature(
    tmp_path: Path, keys: tuple[Path, Path], compiler: tuple[Path, Path]
) -> None:
    """The attack plain sums cannot see: new file, new sums, old signature."""
    case = make_spec("victim\n", compiler)
    entry = writer(tmp_path / "cache", keys).build([case], jobs=1)[case.key].path
    (entry / "harness").write_text("#!/bin/sh\necho owned\n")
    meta = json.loads((entry / "build.json").read_text())
    meta["sha256"]["harness"] = hashlib.sha256((entry / "harness").read_bytes()).hexdigest()
    (entry / "build.json").write_text(json.dumps(meta, indent=1))
    cache, messages = reader(tmp_path / "cache", keys[1])
    assert cache.lookup(case) is None
    assert "signature does not match" in messages[0]
    # the reader rebuilds it (unsigned: it holds no private key) and uses its own build
    assert cache.build([case], jobs=1)[case.key].artifact.read_text() == "victim\n"


def test_forged_build_json_verdict_fails_the_signature(
    tmp_path: Path, keys: tuple[Path, Path], compiler: tuple[Path, Path]
) -> None:
    """A failed compile's entry rewritten as passing (or the reverse) forges a verdict."""
    case = make_spec("verdict\n", compiler)
    entry = writer(tmp_path / "cache", keys).build([case], jobs=1)[case.key].path
    meta = json.loads((entry / "build.json").read_text())
    meta.update(ok=False, first_error="error: forged")
    (entry / "build.json").write_text(json.dumps(meta, indent=1))
    cache, messages = reader(tmp_path / "cache", keys[1])
    assert cache.lookup(case) is None
    assert "signature does not match" in messages[0]


def test_forged_pointer_fails_the_signature(
    tmp_path: Path, keys: tuple[Path, Path], compiler: tuple[Path, Path]
) -> None:
    """A pointer redirected to another (validly signed) unit of the same cache."""
    shared, other, case = (make_spec(t, compiler) for t in ("unit\n", "other unit\n", "case\n"))
    cache = writer(tmp_path / "cache", keys)
    built = cache.build([shared, other], jobs=1)
    cache.link(case, built[shared.key])
    pointer = cache.entry(case) / "build.json"
    meta = json.loads(pointer.read_text())
    meta["unit"] = built[other.key].path.name
    pointer.write_text(json.dumps(meta, indent=1))
    found, messages = reader(tmp_path / "cache", keys[1])
    assert found.lookup(case) is None
    assert "signature does not match" in messages[0]


def test_signed_entry_moved_under_another_key_is_refused(
    tmp_path: Path, keys: tuple[Path, Path], compiler: tuple[Path, Path]
) -> None:
    """The signature covers the key, so a valid signed entry cannot stand in for another."""
    good, bad = make_spec("good\n", compiler), make_spec("bad\n", compiler)
    cache = writer(tmp_path / "cache", keys)
    entry = cache.build([good], jobs=1)[good.key].path
    cache.entry(bad).parent.mkdir(parents=True, exist_ok=True)
    entry.rename(cache.entry(bad))
    found, messages = reader(tmp_path / "cache", keys[1])
    assert found.lookup(bad) is None
    assert "names key" in messages[0]


def test_signature_file_swapped_between_entries_is_refused(
    tmp_path: Path, keys: tuple[Path, Path], compiler: tuple[Path, Path]
) -> None:
    one, two = make_spec("one\n", compiler), make_spec("two\n", compiler)
    built = writer(tmp_path / "cache", keys).build([one, two], jobs=1)
    (built[one.key].path / "build.json.sig").write_bytes(
        (built[two.key].path / "build.json.sig").read_bytes()
    )
    assert reader(tmp_path / "cache", keys[1])[0].lookup(one) is None


def test_unusable_signing_key_says_so(tmp_path: Path, compiler: tuple[Path, Path]) -> None:
    """A key file that is not an Ed25519 PEM: a clear error, not a traceback from deep down."""
    bad = tmp_path / "not-a-key.pem"
    bad.write_text("hello")
    bad.chmod(0o600)
    case = make_spec("x\n", compiler)
    with pytest.raises(SigningError, match="cache signing key"):
        BuildCache(tmp_path / "cache", trust=TrustPolicy(signing_key=bad)).build([case], jobs=1)


def test_a_huge_sparse_key_file_is_refused_by_its_size(
    tmp_path: Path, keys: tuple[Path, Path], compiler: tuple[Path, Path]
) -> None:
    """A 6 GB sparse file as the verify key: refused from its size, not read whole."""
    huge = tmp_path / "huge.pub.pem"
    with huge.open("wb") as f:
        f.truncate(6_000_000_000)
    huge.chmod(0o600)
    case = make_spec("x\n", compiler)
    BuildCache(tmp_path / "cache", trust=TrustPolicy()).build([case], jobs=1)
    with pytest.raises(SigningError, match="is not a key file \\(a regular file of at most 65,536 bytes\\)"):
        BuildCache(tmp_path / "cache", trust=TrustPolicy(verify_key=huge)).lookup(case)
