"""Hostile cache entries: each test plants what an attacker or an accident could leave in a
build cache, and checks that it is refused (never returned, so never executed or judged),
said in the progress, and built again from the source.

A stand-in compiler copies the source to the artifact, so what a case "runs" is its source
text, and counts its calls, so a rebuild is visible.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from pytest_tileconform.compile.cache import BuildCache, BuildResult, BuildSpec
from pytest_tileconform.compile.trust import TrustPolicy

FAKE_COMPILER = """
import sys, pathlib
src, out, counter = map(pathlib.Path, sys.argv[1:4])
with counter.open("a") as f:
    f.write(src.read_text().splitlines()[0] + "\\n")
out.write_text(src.read_text())
"""
PLANTED = "#!/bin/sh\necho owned\n"
OTHER_GID = 54321
OTHER_UID = 54321


@pytest.fixture
def compiler(tmp_path: Path) -> tuple[Path, Path]:
    script = tmp_path / "fake_nvcc.py"
    script.write_text(FAKE_COMPILER)
    return script, tmp_path / "invocations.txt"


def make_spec(source: str, compiler: tuple[Path, Path]) -> BuildSpec:
    script, counter = compiler
    command = (sys.executable, str(script), "{src}", "{out}", str(counter))
    return BuildSpec(source, command, "nvcc 13.0", 1 << 20, source.splitlines()[0])


def calls(compiler: tuple[Path, Path]) -> list[str]:
    return compiler[1].read_text().splitlines() if compiler[1].exists() else []


def cache_at(root: Path, trust: TrustPolicy | None = None) -> tuple[BuildCache, list[str]]:
    messages: list[str] = []
    return BuildCache(root, messages.append, trust=trust or TrustPolicy()), messages


def built(root: Path, spec: BuildSpec, trust: TrustPolicy | None = None) -> BuildResult:
    return cache_at(root, trust)[0].build([spec], jobs=1)[spec.key]


def recompute_sums(entry: Path) -> None:
    """What an attacker who can write the entry does after planting a file."""
    meta = json.loads((entry / "build.json").read_text())
    meta["sha256"] = {
        p.name: hashlib.sha256(p.read_bytes()).hexdigest()
        for p in entry.iterdir()
        if p.is_file() and not p.name.startswith("build.json")
    }
    (entry / "build.json").write_text(json.dumps(meta))


def plant(entry: Path) -> None:
    (entry / "harness").write_text(PLANTED)
    recompute_sums(entry)


def write_pointer(cache: BuildCache, spec: BuildSpec, unit: str) -> Path:
    entry = cache.entry(spec)
    entry.mkdir(parents=True)
    (entry / "build.json").write_text(json.dumps({"unit": unit, "label": "x", "command": []}))
    return entry


def refused(messages: list[str]) -> str:
    found = [m for m in messages if "refused" in m or "fails its checksums" in m]
    assert found, messages
    return found[0]


# -- confinement: nothing outside the cache, nothing through a link ----------------------


def test_pointer_with_absolute_unit_is_refused(tmp_path: Path, compiler: tuple[Path, Path]) -> None:
    """A pointer naming ``/elsewhere/...`` once made ``root / unit`` that absolute path."""
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "harness").write_text(PLANTED)
    (outside / "build.json").write_text(json.dumps({"ok": True, "seconds": 0, "sha256": {}}))
    cache, messages = cache_at(tmp_path / "cache")
    case = make_spec("case\n", compiler)
    write_pointer(cache, case, str(outside))
    assert cache.lookup(case) is None
    assert "points outside the cache" in refused(messages)
    assert not cache.has(case)
    result = cache.build([case], jobs=1)[case.key]
    assert result.artifact.read_text() == "case\n" and calls(compiler) == ["case"]


def test_pointer_with_dotdot_unit_is_refused(tmp_path: Path, compiler: tuple[Path, Path]) -> None:
    """``../../victim`` would climb out of the cache's folder."""
    cache, messages = cache_at(tmp_path / "cache")
    case = make_spec("dotdot\n", compiler)
    write_pointer(cache, case, "../../outside")
    assert cache.lookup(case) is None
    assert "points outside the cache" in refused(messages)
    assert built(tmp_path / "cache", case).artifact.read_text() == "dotdot\n"


def test_pointer_to_another_caches_entry_is_refused(tmp_path: Path, compiler: tuple[Path, Path]) -> None:
    """A pointer may name only a key; a key that exists only in another cache is not found."""
    other = built(tmp_path / "other", make_spec("other unit\n", compiler))
    cache, messages = cache_at(tmp_path / "cache")
    case = make_spec("mine\n", compiler)
    write_pointer(cache, case, str(other.path))
    assert cache.lookup(case) is None
    refused(messages)
    # by key alone it names an entry this cache does not hold: a miss, nothing from "other"
    shutil.rmtree(cache.entry(case))
    write_pointer(cache, case, other.path.name)
    assert cache.lookup(case) is None
    assert built(tmp_path / "cache", case).artifact.read_text() == "mine\n"


def test_pointer_to_a_pointer_is_refused(tmp_path: Path, compiler: tuple[Path, Path]) -> None:
    """Chains (and loops: a pointer to itself) are never followed."""
    cache, messages = cache_at(tmp_path / "cache")
    case = make_spec("loop\n", compiler)
    write_pointer(cache, case, case.key)
    assert cache.lookup(case) is None
    assert "points at a pointer" in refused(messages)


def test_pointer_naming_a_non_key_is_refused(tmp_path: Path, compiler: tuple[Path, Path]) -> None:
    """Only 32 hex digits name an entry: ``aa/..`` or a key with a slash are not keys."""
    cache, messages = cache_at(tmp_path / "cache")
    case = make_spec("shape\n", compiler)
    write_pointer(cache, case, "0" * 31 + "/")
    assert cache.lookup(case) is None and not cache.has(case)
    refused(messages)


def test_symlinked_entry_dir_is_refused_and_replaced(tmp_path: Path, compiler: tuple[Path, Path]) -> None:
    """An entry folder replaced by a link to a folder elsewhere (with its own valid sums)."""
    case = make_spec("linked\n", compiler)
    decoy = built(tmp_path / "decoy", case)  # a complete, self-consistent entry elsewhere
    plant(decoy.path)
    cache, messages = cache_at(tmp_path / "cache")
    cache.entry(case).parent.mkdir(parents=True)
    cache.entry(case).symlink_to(decoy.path)
    assert cache.lookup(case) is None
    assert "symbolic link" in refused(messages)
    result = cache.build([case], jobs=1)[case.key]
    assert not result.path.is_symlink() and result.artifact.read_text() == "linked\n"
    assert (decoy.path / "harness").read_text() == PLANTED  # the rebuild wrote nothing there


def test_symlinked_prefix_folder_is_refused(tmp_path: Path, compiler: tuple[Path, Path]) -> None:
    """The two-letter folder above entries replaced by a link to another cache's folder."""
    case = make_spec("prefix\n", compiler)
    decoy = built(tmp_path / "decoy", case)
    cache, messages = cache_at(tmp_path / "cache")
    (tmp_path / "cache").mkdir()
    cache.entry(case).parent.symlink_to(decoy.path.parent)
    assert cache.lookup(case) is None
    assert "symbolic link" in refused(messages)
    result = cache.build([case], jobs=1)[case.key]
    assert not result.path.parent.is_symlink() and result.path.parent.parent == tmp_path / "cache"


def test_symlinked_artifact_is_refused(tmp_path: Path, compiler: tuple[Path, Path]) -> None:
    """The executable replaced by a link (sums recomputed over what the link points at)."""
    case = make_spec("file link\n", compiler)
    entry = built(tmp_path / "cache", case).path
    target = tmp_path / "planted"
    target.write_text(PLANTED)
    (entry / "harness").unlink()
    (entry / "harness").symlink_to(target)
    recompute_sums(entry)
    cache, messages = cache_at(tmp_path / "cache")
    assert cache.lookup(case) is None
    assert "symbolic link" in refused(messages)


def test_symlinked_build_json_is_refused(tmp_path: Path, compiler: tuple[Path, Path]) -> None:
    """``build.json`` a link to one the attacker controls elsewhere."""
    case = make_spec("meta link\n", compiler)
    entry = built(tmp_path / "cache", case).path
    elsewhere = tmp_path / "meta.json"
    elsewhere.write_text((entry / "build.json").read_text())
    (entry / "build.json").unlink()
    (entry / "build.json").symlink_to(elsewhere)
    cache, messages = cache_at(tmp_path / "cache")
    assert cache.lookup(case) is None
    assert "symbolic link" in refused(messages)


def test_checksum_names_with_paths_are_refused(tmp_path: Path, compiler: tuple[Path, Path]) -> None:
    """A sum listed for ``../x`` would make the check read outside the entry."""
    case = make_spec("names\n", compiler)
    entry = built(tmp_path / "cache", case).path
    meta = json.loads((entry / "build.json").read_text())
    meta["sha256"]["../x"] = "0" * 64
    (entry / "build.json").write_text(json.dumps(meta))
    cache, messages = cache_at(tmp_path / "cache")
    assert cache.lookup(case) is None
    assert "no valid checksums" in refused(messages)


# -- checksums: damage ---------------------------------------------------------------


def test_plain_checksums_detect_damage_only(tmp_path: Path, compiler: tuple[Path, Path]) -> None:
    """Without signatures, a changed file with its old sum is caught (a disk error, a copy cut
    short); a planted file with *recomputed* sums, by someone the user trusts to write the
    cache (here: the user), passes. That is the limit of a sum stored beside its file, and why
    ownership and signatures exist."""
    case = make_spec("damage\n", compiler)
    entry = built(tmp_path / "cache", case).path
    (entry / "harness").write_text("damaged\n")
    cache, messages = cache_at(tmp_path / "cache")
    assert cache.lookup(case) is None and "fails its checksums" in refused(messages)
    entry = cache.build([case], jobs=1)[case.key].path
    plant(entry)
    found = cache_at(tmp_path / "cache")[0].lookup(case)
    assert found is not None and found.artifact.read_text() == PLANTED


def test_truncated_artifact_is_rebuilt(tmp_path: Path, compiler: tuple[Path, Path]) -> None:
    case = make_spec("truncate me\n", compiler)
    entry = built(tmp_path / "cache", case).path
    (entry / "harness").write_bytes(b"trun")
    assert built(tmp_path / "cache", case).artifact.read_text() == "truncate me\n"
    assert calls(compiler) == ["truncate me", "truncate me"]


def test_extra_file_in_entry_is_refused(tmp_path: Path, compiler: tuple[Path, Path]) -> None:
    """A library dropped beside the executable (``LD_LIBRARY_PATH=$ORIGIN`` style)."""
    case = make_spec("extra\n", compiler)
    entry = built(tmp_path / "cache", case).path
    (entry / "libcuda.so.1").write_text("planted")
    cache, messages = cache_at(tmp_path / "cache")
    assert cache.lookup(case) is None
    refused(messages)


def test_missing_file_is_refused(tmp_path: Path, compiler: tuple[Path, Path]) -> None:
    case = make_spec("missing\n", compiler)
    entry = built(tmp_path / "cache", case).path
    (entry / "harness").unlink()
    cache, messages = cache_at(tmp_path / "cache")
    assert cache.lookup(case) is None
    refused(messages)


def test_build_json_not_json_is_rebuilt(tmp_path: Path, compiler: tuple[Path, Path]) -> None:
    case = make_spec("garbled\n", compiler)
    entry = built(tmp_path / "cache", case).path
    (entry / "build.json").write_text("{not json")
    assert built(tmp_path / "cache", case).ok
    assert calls(compiler) == ["garbled", "garbled"]


def test_build_json_without_sums_is_refused(tmp_path: Path, compiler: tuple[Path, Path]) -> None:
    case = make_spec("no sums\n", compiler)
    entry = built(tmp_path / "cache", case).path
    meta = json.loads((entry / "build.json").read_text())
    del meta["sha256"]
    (entry / "build.json").write_text(json.dumps(meta))
    cache, messages = cache_at(tmp_path / "cache")
    assert cache.lookup(case) is None
    refused(messages)


def test_entry_copied_under_another_key_is_refused(tmp_path: Path, compiler: tuple[Path, Path]) -> None:
    """A valid entry (a passing case) copied to where a failing case's entry lies."""
    passing, failing = make_spec("passes\n", compiler), make_spec("fails\n", compiler)
    cache, messages = cache_at(tmp_path / "cache")
    good = cache.build([passing], jobs=1)[passing.key]
    cache.entry(failing).parent.mkdir(parents=True, exist_ok=True)
    shutil.copytree(good.path, cache.entry(failing))
    assert cache.lookup(failing) is None
    assert "names key" in refused(messages)


# -- who could have written it ---------------------------------------------------------


def test_planted_executable_refused_when_others_can_write(
    tmp_path: Path, compiler: tuple[Path, Path]
) -> None:
    """Sums recomputed by a member of a group that can write the entry: refused by default,
    since anyone in that group could have planted it."""
    case = make_spec("shared\n", compiler)
    entry = built(tmp_path / "cache", case).path
    plant(entry)
    os.chown(entry, -1, OTHER_GID)
    entry.chmod(0o775)
    cache, messages = cache_at(tmp_path / "cache")
    assert cache.lookup(case) is None
    assert "writable by group" in refused(messages)
    assert cache.build([case], jobs=1)[case.key].artifact.read_text() == "shared\n"


def test_group_writable_entry_accepted_when_group_trusted(
    tmp_path: Path, compiler: tuple[Path, Path]
) -> None:
    case = make_spec("team\n", compiler)
    entry = built(tmp_path / "cache", case).path
    os.chown(entry, -1, OTHER_GID)
    entry.chmod(0o775)
    assert cache_at(tmp_path / "cache")[0].lookup(case) is None
    trusted = TrustPolicy.parse(f"group:{OTHER_GID}")
    assert cache_at(tmp_path / "cache", trusted)[0].lookup(case) is not None


def test_world_writable_file_refused_unless_cache_is_trusted(
    tmp_path: Path, compiler: tuple[Path, Path]
) -> None:
    """Writable by every user: refused even for a trusted group; ``any`` vouches for it."""
    case = make_spec("world\n", compiler)
    entry = built(tmp_path / "cache", case).path
    (entry / "harness").chmod(0o777)
    group = TrustPolicy.parse(f"group:{OTHER_GID}")
    cache, messages = cache_at(tmp_path / "cache", group)
    assert cache.lookup(case) is None
    assert "writable by every user" in refused(messages)
    assert cache_at(tmp_path / "cache", TrustPolicy.parse("any"))[0].lookup(case) is not None


def test_entry_owned_by_another_user_is_refused(tmp_path: Path, compiler: tuple[Path, Path]) -> None:
    """Its owner can rewrite it whatever its mode."""
    if os.geteuid() != 0:
        pytest.skip("needs root to give a file to another user")
    case = make_spec("theirs\n", compiler)
    entry = built(tmp_path / "cache", case).path
    os.chown(entry / "harness", OTHER_UID, OTHER_GID)
    cache, messages = cache_at(tmp_path / "cache")
    assert cache.lookup(case) is None
    assert f"belongs to uid {OTHER_UID}" in refused(messages)


def test_group_writable_cache_folder_is_refused(tmp_path: Path, compiler: tuple[Path, Path]) -> None:
    """The cache's own folder writable by others: nothing in it is used, nothing is built
    into it; the session stops with one line."""
    from pytest_tileconform.compile.cache import CacheUnusable

    case = make_spec("root\n", compiler)
    built(tmp_path / "cache", case)
    os.chown(tmp_path / "cache", -1, OTHER_GID)
    (tmp_path / "cache").chmod(0o775)
    cache, messages = cache_at(tmp_path / "cache")
    assert cache.lookup(case) is None
    assert messages[0].startswith("build cache refused")
    with pytest.raises(CacheUnusable, match="not trusted"):
        cache.build([case], jobs=1)


@pytest.mark.parametrize("text", ["everyone", "group:", "group:no-such-group-xyz"])
def test_trust_setting_is_checked(text: str) -> None:
    with pytest.raises(ValueError, match="TILECONFORM_CACHE_TRUST"):
        TrustPolicy.parse(text)


def test_trust_comes_from_the_environment(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("TILECONFORM_CACHE_TRUST", f"group:{OTHER_GID}")
    monkeypatch.setenv("TILECONFORM_CACHE_VERIFY_KEY", str(tmp_path / "pub.pem"))
    policy = BuildCache(tmp_path).trust
    assert (policy.mode, policy.gid, policy.verify_key) == ("group", OTHER_GID, tmp_path / "pub.pem")


# -- sizes ------------------------------------------------------------------------------

# Reads an entry in a process of its own and prints what came of it and the process's peak
# memory: a file read (or hashed) whole would show in the peak. The peak is VmHWM, this
# program's own: ru_maxrss keeps the high-water mark of the process before its exec (Linux's
# exec_mmap), which is the forking xdist worker's, a GB once torch is in it.
LOOKUP_IN_A_PROCESS = """
import json, sys
from pathlib import Path
from pytest_tileconform.compile.cache import BuildCache, BuildSpec
from pytest_tileconform.compile.trust import TrustPolicy
spec = BuildSpec(**json.loads(sys.argv[2]))
messages = []
found = BuildCache(Path(sys.argv[1]), messages.append, trust=TrustPolicy()).lookup(spec)
status = Path('/proc/self/status').read_text().splitlines()
peak = next(int(line.split()[1]) for line in status if line.startswith('VmHWM:')) * 1024
print(json.dumps({"found": found is not None, "messages": messages, "peak": peak}))
"""


@pytest.mark.parametrize("planted", ["harness", "build.json"])
def test_a_huge_sparse_file_is_refused_by_its_size(
    tmp_path: Path, compiler: tuple[Path, Path], planted: str
) -> None:
    """A 6 GB sparse file (no disk used) in place of the program or of ``build.json``: refused
    from its size before a byte is read, in a process that stays small."""
    case = make_spec("huge\n", compiler)
    entry = built(tmp_path / "cache", case).path
    with (entry / planted).open("r+b") as f:
        f.truncate(6_000_000_000)
    fields = {
        "source": case.source,
        "command": list(case.command),
        "salt": case.salt,
        "ram_bytes": 1,
        "label": "x",
    }
    proc = subprocess.run(
        [sys.executable, "-c", LOOKUP_IN_A_PROCESS, str(tmp_path / "cache"), json.dumps(fields)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 0, proc.stderr
    outcome = json.loads(proc.stdout)
    assert not outcome["found"]
    assert f"{entry / planted} is 6,000,000,000 bytes, more than the " in refused(outcome["messages"])
    assert outcome["peak"] < 1 << 30
