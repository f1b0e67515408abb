"""FlashInfer releases as kernel sources: fetch a wheel, unpack what the harness compiles, once.

A release is named by a version (``0.6.0``), a local wheel (``flashinfer_python-0.6.0-...whl``)
or an unpacked folder. A version is fetched with the user's own pip configuration
(``pip download --no-deps --only-binary=:all: flashinfer-python==V``: whatever index, proxy and
certificates pip is set up for); nothing is installed or imported.

Of a wheel only the files the installed backends read are unpacked: each backend declares its
own (``pytest_tileconform_flashinfer_release_members``, :mod:`.hooks`; this backend's are
:data:`MEMBERS`: TensorRT-LLM's ``csrc/nv_internal``, the CUTLASS, CCCL, FlashInfer and spdlog
headers, and the few Python files that say how FlashInfer builds its MoE module and which tiles it
generates), and a release is unpacked for all of them at once, into the cache::

    CACHE/flashinfer-releases/ab/<wheel sha256>/release.json
                                                /flashinfer/data/...   (like the installed package)
                                                /flashinfer/jit/...
    CACHE/flashinfer-releases/versions/<version>.json   -> {"sha256": ..., "wheel": ...}

An entry is unpacked into a temporary directory next to it and published with one rename, under
a file lock, so concurrent processes (xdist workers) unpack a wheel once and readers never see
half an entry. ``release.json`` records the members it was unpacked for: an entry lacking some
that are asked for now (a backend installed since, or an entry from before the record) is never
used as complete; it is unpacked again, for what it had and what is asked, and replaces the old
one (moved aside first, so the name never holds a partial entry); a cache the user cannot write
stops there, saying which members are missing. Entries are named by the wheel's SHA-256: a
verdict names the exact file it was judged against. A version seen before is not fetched again
(the version index maps it to the wheel's hash; package indexes do not replace a published file).

An entry is code every harness is compiled from, so it is checked as a build cache entry is
(:mod:`..compile.trust`) each time it is used: ``release.json`` lists the SHA-256 of every
unpacked file and is signed when a signing key is configured; the entry's folders and files
must pass the cache's trust policy (owner, mode, ACLs), its files their sums and, with a verify
key (or, for a signer, its own key), its signature. A refused entry is said so, naming the file
that failed, and unpacked again from the wheel; a cache the user cannot write stops there.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import stat
import subprocess
import sys
import tempfile
import zipfile
import zlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from filelock import FileLock

from ..compile.trust import (
    TrustPolicy,
    Untrusted,
    check_folder,
    check_root,
    check_tree,
    lock_mode,
    read_meta,
    read_nofollow,
    share_like_parent,
    tree_digests,
    write_meta,
)
from ..files import write_atomic
from .sources import DISTRIBUTION, LAUNCHER_INL, FlashInferSources
from .wheel import ReleaseError as ReleaseError  # what callers of this module catch
from .wheel import check_members, sha256_file, wheel_version

RELEASES_DIR = "flashinfer-releases"
ENTRY_FILE = "release.json"
#: /3: ``release.json`` lists every file's SHA-256 (``sums``, from /2 on) and the members the
#: entry was unpacked for (``members``). An entry of an older schema records no members, so it
#: cannot be known to hold what a backend reads: it is unpacked again.
ENTRY_SCHEMA = "tileconform.flashinfer.release/3"
#: what an entry holds besides its unpacked files
_ENTRY_FILES = frozenset({ENTRY_FILE, ENTRY_FILE + ".sig"})
WHEEL_SHA = re.compile(r"^[0-9a-f]{64}$")
Say = Callable[[str], None]

#: What the MoE backend reads of a wheel: prefixes inside it (a name ending in ``/`` is a folder,
#: another one file; a name with ``*`` an ``fnmatch`` pattern, see :func:`.wheel.wanted`). ``data/cccl``
#: exists from 0.6.10 on; older releases built against the CUDA toolkit's CCCL, and so does the
#: harness for them.
MEMBERS: tuple[str, ...] = (
    "flashinfer/data/csrc/nv_internal/",
    "flashinfer/data/cutlass/include/",
    "flashinfer/data/cutlass/tools/util/include/",
    "flashinfer/data/include/",
    "flashinfer/data/cccl/cub/",
    "flashinfer/data/cccl/libcudacxx/include/",
    "flashinfer/data/cccl/thrust/",
    "flashinfer/data/spdlog/include/",
    "flashinfer/jit/gemm/cutlass/",
    "flashinfer/jit/fused_moe.py",
    "flashinfer/jit/core.py",
    "flashinfer/jit/env.py",
    "flashinfer/compilation_context.py",
)
#: Files a wheel must contain to be judged at all (relative to ``flashinfer/data``).
REQUIRED = (f"csrc/nv_internal/{LAUNCHER_INL}", "cutlass/include/cutlass/cutlass.h")

# PEP 440 public versions as FlashInfer publishes them (0.6.0, 0.6.7.post3, 0.3.0rc1, ...)
VERSION_RE = re.compile(r"^\d+(\.\d+)*((a|b|rc)\d+)?(\.post\d+)?(\.dev\d+)?$")


@dataclass(frozen=True)
class Release:
    """One FlashInfer release's kernel sources, ready to compile against."""

    version: str
    data_dir: Path  # laid out like the installed package's ``flashinfer/data``
    sha256: str  # of the wheel; "" for a folder given by the user (see ``fingerprint``)
    origin: str  # where it came from, for people: "package index", "wheel /x.whl", "folder /x"

    @property
    def package(self) -> Path:
        """The ``flashinfer`` package directory (its ``jit/`` says how FlashInfer builds; it
        may be absent for a bare data folder)."""
        return self.data_dir.parent

    def sources(self) -> FlashInferSources:
        return FlashInferSources(root=self.data_dir, version=self.version)

    @property
    def ident(self) -> str:
        """What a verdict records: the version and the wheel's hash (or the sources' hash)."""
        if self.sha256:
            return f"flashinfer-python {self.version} (wheel sha256:{self.sha256})"
        return f"flashinfer-python {self.version} (folder {self.data_dir}, sources sha256:{self.fingerprint})"

    @property
    def fingerprint(self) -> str:
        return self.sources().fingerprint

    def as_dict(self) -> dict[str, Any]:
        return {
            "version": self.version,
            "sha256": self.sha256,
            "origin": self.origin,
            "data_dir": str(self.data_dir),
        }


def releases_root(cache_dir: Path) -> Path:
    return cache_dir / RELEASES_DIR


def entry_dir(cache_dir: Path, sha256: str) -> Path:
    return releases_root(cache_dir) / sha256[:2] / sha256


def _say(message: str) -> None:
    sys.stderr.write(f"tileconform: {message}\n")


def _read_entry(
    path: Path, trust: TrustPolicy, say: Say, members: Sequence[str] = MEMBERS
) -> tuple[dict[str, Any] | None, tuple[str, ...]]:
    """``release.json`` of the entry at ``path`` once the entry passes every check (module
    docstring) and holds every one of ``members``, and the members it was unpacked for. None
    (and no members) when there is none; None when it is refused (torn by a crash, from an older
    schema, a check failed) or lacks some of ``members``: told to ``say``, naming what failed or
    what is missing, and unpacked again, never compiled from."""
    if not path.exists() and not path.is_symlink():
        return None, ()
    try:
        check_root(path.parent.parent.parent, trust)  # the cache the user named, and above it
        check_folder(path.parent.parent, trust)
        check_folder(path.parent, trust)
        data = read_meta(path, path.name, trust, ENTRY_FILE)
        if data.get("schema") != ENTRY_SCHEMA:
            raise Untrusted(
                f"{path} was unpacked by an older tileconform ({data.get('schema')}), which records "
                "no list of the members it holds"
            )
        check_tree(path, data.get("sums"), trust, _ENTRY_FILES)
    except Untrusted as exc:
        say(f"FlashInfer release in the build cache refused: {exc}")
        return None, ()
    had = data.get("members")
    if not isinstance(had, list) or not all(isinstance(m, str) for m in had):
        say(f"FlashInfer release in the build cache refused: {path / ENTRY_FILE} has no list of members")
        return None, ()
    if missing := sorted(set(members) - set(had)):
        say(
            f"FlashInfer release in the build cache {path} is incomplete: it was unpacked without "
            f"{', '.join(missing)} (a backend installed since reads them)"
        )
        return None, tuple(had)
    return data, tuple(had)


def _refused_read_only(final: Path, refusals: list[str]) -> None:
    """A cache the user cannot write keeps its refused (or missing) entry: stop, saying why."""
    where = final.parent
    while not where.exists() and where.parent != where:
        where = where.parent
    if not os.access(where, os.W_OK | os.X_OK):
        why = "; ".join(refusals) or f"the release entry {final} is missing"
        raise ReleaseError(
            f"{why}, and the build cache is read-only for you: point --tile-cache-dir at a cache you "
            "can write, or have its owner unpack the release again"
        )


def unpack_wheel(
    wheel: Path,
    cache_dir: Path,
    origin: str | None = None,
    trust: TrustPolicy | None = None,
    say: Say = _say,
    members: Sequence[str] = MEMBERS,
) -> Release:
    """Unpack the kernel sources of ``wheel`` into the cache (once) and return the release.
    ``trust`` (default :meth:`TrustPolicy.from_env`) checks an entry found and signs one made;
    ``members`` is what the caller's backends read (:func:`release_members`): an entry without
    some of them is unpacked again, for them and the members it had."""
    trust = trust or TrustPolicy.from_env()
    try:
        wheel = wheel.expanduser().resolve()
        kind = wheel.stat().st_mode
    except FileNotFoundError:
        raise ReleaseError(f"wheel {wheel} does not exist") from None
    except (OSError, RuntimeError) as exc:  # a symlink loop
        raise ReleaseError(f"wheel {wheel}: {getattr(exc, 'strerror', None) or exc}") from None
    if not stat.S_ISREG(kind):
        raise ReleaseError(f"wheel {wheel} is not a regular file")
    sha = sha256_file(wheel)
    final = entry_dir(cache_dir, sha)
    origin = origin or f"wheel {wheel}"
    refusals: list[str] = []
    entry, _had = _read_entry(final, trust, refusals.append, members)
    if entry is not None:
        return Release(entry["version"], final / "flashinfer" / "data", sha, origin)
    _refused_read_only(final, refusals)
    for refusal in refusals:
        say(f"{refusal}: unpacking it again from {wheel.name}")
    final.parent.mkdir(parents=True, exist_ok=True)
    with FileLock(str(final) + ".lock", mode=lock_mode(cache_dir)):
        entry, had = _read_entry(final, trust, lambda _message: None, members)
        if entry is not None:  # another process unpacked it while we waited
            return Release(entry["version"], final / "flashinfer" / "data", sha, origin)
        try:
            zf = zipfile.ZipFile(wheel)
        except (zipfile.BadZipFile, OSError) as exc:
            raise ReleaseError(f"{wheel}: not a readable wheel (zip): {exc}") from None
        with zf:
            version = wheel_version(zf, wheel)
            unpacked = tuple(sorted({*members, *had}))
            chosen = check_members(zf, wheel, unpacked)
            names = set(zf.namelist())
            missing = [r for r in REQUIRED if f"flashinfer/data/{r}" not in names]
            if missing:
                raise ReleaseError(
                    f"{wheel} (flashinfer-python {version}) does not ship the MoE GEMM sources: "
                    f"missing {', '.join('flashinfer/data/' + m for m in missing)}"
                )
            tmp = Path(tempfile.mkdtemp(dir=final.parent, prefix=f".unpack-{sha[:12]}-"))
            try:
                share_like_parent(tmp)  # readable by the team of a group-shared cache
                count = size = 0
                for info, member in chosen:
                    target = tmp.joinpath(*member.parts)
                    target.parent.mkdir(parents=True, exist_ok=True)
                    try:
                        with zf.open(info) as src, target.open("xb") as dst:
                            shutil.copyfileobj(src, dst)
                    except (
                        zipfile.BadZipFile,
                        zlib.error,
                        EOFError,
                        NotImplementedError,
                        FileExistsError,
                        RuntimeError,  # encrypted after all: the local header says so, not the central
                    ) as e:
                        raise ReleaseError(
                            f"{wheel}: member {info.filename!r} cannot be unpacked: {e}"
                        ) from None
                    count += 1
                    size += info.file_size
                # find_sources() on the data directory reads the version from here
                (tmp / "flashinfer" / "data" / "VERSION").write_text(version + "\n")
                meta = {
                    "schema": ENTRY_SCHEMA,
                    "key": sha,
                    "version": version,
                    "sha256": sha,
                    "wheel": wheel.name,
                    "files": count,
                    "bytes": size,
                    "members": list(unpacked),
                    "sums": tree_digests(tmp, trust),
                }
                write_meta(tmp, meta, trust, ENTRY_FILE)
                _publish(tmp, final)
            except OSError as exc:  # a full disk or quota: nothing of the partial unpack is kept
                shutil.rmtree(tmp, ignore_errors=True)
                raise ReleaseError(
                    f"{wheel}: cannot unpack into {final.parent}: {exc.strerror or exc}; nothing was kept "
                    "(free space there, or give another --tile-cache-dir)"
                ) from None
            except BaseException:
                shutil.rmtree(tmp, ignore_errors=True)
                raise
    return Release(version, final / "flashinfer" / "data", sha, origin)


def _publish(tmp: Path, final: Path) -> None:
    """Put the unpacked ``tmp`` at ``final``. An entry there (torn, refused, or complete for fewer
    members, which other processes may be compiling from) is first renamed aside, then removed:
    ``final`` holds a whole entry or none, never a partial one."""
    if final.is_symlink() or final.is_file():
        final.unlink()
    elif final.exists():
        aside = Path(tempfile.mkdtemp(dir=final.parent, prefix=f".replaced-{final.name[:12]}-"))
        os.rename(final, aside / final.name)
        os.rename(tmp, final)
        shutil.rmtree(aside, ignore_errors=True)
        return
    os.rename(tmp, final)


PipRunner = Callable[[Sequence[str]], "subprocess.CompletedProcess[str]"]


def _run_pip(args: Sequence[str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "pip", *args], capture_output=True, text=True)


def download_wheel(version: str, dest: Path, pip: PipRunner = _run_pip) -> Path:
    """``pip download`` the release's wheel into ``dest`` with the user's pip configuration."""
    args = ["download", "--no-deps", "--only-binary=:all:", "--disable-pip-version-check", "-d", str(dest)]
    proc = pip([*args, f"{DISTRIBUTION}=={version}"])
    wheels = sorted(dest.glob("*.whl"))
    if proc.returncode != 0 or len(wheels) != 1:
        lines = [line for line in (proc.stderr or proc.stdout or "").splitlines() if line.strip()]
        lines = [line for line in lines if not line.startswith("WARNING: Location")]
        tail = " | ".join(lines[-3:]) or f"pip exited with status {proc.returncode}"
        raise ReleaseError(
            f"cannot fetch {DISTRIBUTION}=={version} with pip download ({tail}); for an air-gapped "
            "runner pass a local wheel or an unpacked folder instead of a version"
        )
    return wheels[0]


def _version_index(cache_dir: Path, version: str) -> Path:
    return releases_root(cache_dir) / "versions" / f"{version}.json"


def _known(index: Path, version: str, trust: TrustPolicy) -> dict[str, str] | None:
    """The version index's wheel for ``version``, read as the cache's files are (its owner);
    None when there is none or it is refused. What it names is checked as an entry is."""
    try:
        known = json.loads(read_nofollow(index, trust))
    except (Untrusted, ValueError):
        return None
    if not isinstance(known, dict) or not WHEEL_SHA.match(str(known.get("sha256"))):
        return None
    return {"sha256": str(known["sha256"]), "wheel": str(known.get("wheel", ""))}


def fetch_release(
    version: str,
    cache_dir: Path,
    pip: PipRunner = _run_pip,
    trust: TrustPolicy | None = None,
    say: Say = _say,
    members: Sequence[str] = MEMBERS,
) -> Release:
    """The release ``version`` of flashinfer-python: from the cache if its entry holds
    ``members``, else from the package index."""
    if not VERSION_RE.fullmatch(version):
        raise ReleaseError(f"{version!r} is not a release version like 0.6.0 or 0.6.7.post3")
    trust = trust or TrustPolicy.from_env()
    index = _version_index(cache_dir, version)
    index.parent.mkdir(parents=True, exist_ok=True)
    with FileLock(str(index) + ".lock", mode=lock_mode(cache_dir)):
        if (known := _known(index, version, trust)) is not None:
            entry, _had = _read_entry(entry_dir(cache_dir, known["sha256"]), trust, say, members)
            if entry is not None and _normalize(str(entry.get("version"))) == _normalize(version):
                path = entry_dir(cache_dir, known["sha256"]) / "flashinfer" / "data"
                return Release(entry["version"], path, known["sha256"], f"package index ({known['wheel']})")
        with tempfile.TemporaryDirectory(dir=index.parent, prefix=".download-") as tmp:
            wheel = download_wheel(version, Path(tmp), pip)
            release = unpack_wheel(wheel, cache_dir, f"package index ({wheel.name})", trust, say, members)
            if _normalize(release.version) != _normalize(version):
                raise ReleaseError(
                    f"pip download {DISTRIBUTION}=={version} gave {wheel.name} ({release.version})"
                )
            write_atomic(index, json.dumps({"sha256": release.sha256, "wheel": wheel.name}, indent=1) + "\n")
    return release


def _normalize(version: str) -> str:
    return re.sub(r"(\.0+)+$", "", version.lower())


def _folder_version(data_dir: Path) -> str:
    for candidate in (data_dir / "VERSION", data_dir / "version.txt"):
        if candidate.is_file() and candidate.read_text().strip():
            return candidate.read_text().strip().splitlines()[0]
    version_py = data_dir.parent / "version.py"
    if version_py.is_file():
        found = re.search(r"""__version__\s*=\s*["']([^"']+)["']""", version_py.read_text())
        if found:
            return found.group(1)
    pattern = f"{DISTRIBUTION.replace('-', '_')}-*.dist-info/METADATA"
    for meta in sorted(data_dir.parent.parent.glob(pattern)):
        found = re.search(r"^Version:\s*(\S+)", meta.read_text(errors="replace"), re.MULTILINE)
        if found:
            return found.group(1)
    return "unknown"


def release_from_folder(folder: Path) -> Release:
    """An unpacked release used in place: a folder holding ``flashinfer/data`` (an unpacked wheel
    or site-packages), the ``flashinfer`` package itself, or its ``data`` directory."""
    folder = folder.expanduser().resolve()
    for data_dir in (folder / "flashinfer" / "data", folder / "data", folder):
        if (data_dir / "csrc").is_dir():
            break
    else:
        raise ReleaseError(
            f"{folder} is not laid out like a FlashInfer release: expected flashinfer/data/csrc, "
            "data/csrc or csrc inside it"
        )
    release = Release(_folder_version(data_dir), data_dir, "", f"folder {folder}")
    missing = [r for r in REQUIRED if not (data_dir / r).is_file()]
    if missing:
        raise ReleaseError(f"{data_dir}: FlashInfer sources are incomplete, missing {', '.join(missing)}")
    return release


def resolve_release(
    spec: str,
    cache_dir: Path,
    pip: PipRunner = _run_pip,
    trust: TrustPolicy | None = None,
    say: Say = _say,
    members: Sequence[str] | None = None,
) -> Release:
    """``--tile-flashinfer`` VALUE: a local wheel, an unpacked folder, or a version to fetch;
    a release in the cache is checked with ``trust`` (refusals told to ``say``) and holds
    ``members`` (default: what every installed backend reads, :func:`installed_members`)."""
    path = Path(spec).expanduser()
    members = installed_members() if members is None else members
    if path.suffix == ".whl" or path.exists():
        if path.is_dir():
            return release_from_folder(path)
        if path.is_file() and path.suffix == ".whl":
            return unpack_wheel(path, cache_dir, None, trust, say, members)
        if not path.exists():
            raise ReleaseError(f"wheel {path} does not exist")
        raise ReleaseError(f"{path} is neither a .whl file nor a folder with FlashInfer's sources")
    if VERSION_RE.fullmatch(spec):
        return fetch_release(spec, cache_dir, pip, trust, say, members)
    raise ReleaseError(f"{spec!r} is neither a release version (like 0.6.0) nor an existing wheel or folder")


def release_members(hook: Any) -> tuple[str, ...]:
    """Every member the backends of ``hook`` (a plugin manager's ``hook``) read of a wheel: the
    union of their ``pytest_tileconform_flashinfer_release_members`` (:mod:`.hooks`)."""
    declared = hook.pytest_tileconform_flashinfer_release_members()
    return tuple(sorted({member for members in declared for member in members}))


def installed_members() -> tuple[str, ...]:
    """:func:`release_members` of the installed backends, found as the ``tileconform`` command
    line finds them (a pytest run asks its own plugins: they may differ by ``-p``)."""
    from ..commands.plugins import command_plugins
    from . import hooks

    manager = command_plugins()
    manager.add_hookspecs(hooks)
    return release_members(manager.hook)
