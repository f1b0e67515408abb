"""Small host programs the plugin compiles itself (the virtual runtime, the case runner).

Each is built once per content (its sources, the C++ compiler's identity, the headers it
reads) into a cache directory named by that content's hash, so anything keyed by its path
changes whenever it does. Safe from several processes at once: a file lock per build, and the
result published with one ``os.rename``.

Each is linked into or run for every case, so it is checked like a harness entry
(:mod:`.trust`): its folder holds a ``build.json`` with the SHA-256 of every file (signed when
a signing key is configured), verified with its folder's writers before the path is handed
out; one that fails (damaged, planted, from before these checks) is built again in place.
"""

from __future__ import annotations

import hashlib
import logging
import os
import shlex
import shutil
import subprocess
import tempfile
from collections.abc import Callable, Sequence
from functools import cache
from pathlib import Path

from filelock import FileLock

from .handles import CheckedFiles
from .trust import (
    TrustPolicy,
    Untrusted,
    check_files,
    check_folder,
    check_root,
    file_digests,
    lock_mode,
    read_meta,
    share_like_parent,
    write_meta,
)

log = logging.getLogger(__name__)


class HostBuildError(RuntimeError):
    """A host program could not be built."""


def cxx() -> str:
    """The C++ compiler: ``$CXX`` or ``g++``."""
    return os.environ.get("CXX") or "g++"


@cache
def compiler_id(compiler: str) -> str:
    try:
        return subprocess.run([compiler, "--version"], capture_output=True, text=True, check=True).stdout
    except (OSError, subprocess.CalledProcessError) as exc:
        raise HostBuildError(f"C++ compiler {compiler!r} is not usable: {exc}") from None


def run_tool(command: Sequence[str], what: str) -> None:
    proc = subprocess.run(list(command), capture_output=True, text=True)
    if proc.returncode != 0:
        raise HostBuildError(f"{what} failed ({shlex.join(command)}):\n{proc.stdout}{proc.stderr}")


def once_path(cache_dir: Path, name: str, inputs: Sequence[bytes], artifact: str) -> Path:
    """``cache_dir/NAME-HASH/ARTIFACT``, where HASH covers ``inputs``: where :func:`build_once`
    puts the artifact, known without building it (build keys that name it can be computed
    before anything is compiled)."""
    digest = hashlib.sha256()
    for part in inputs:
        digest.update(hashlib.sha256(part).digest())
    return cache_dir / f"{name}-{digest.hexdigest()[:16]}" / artifact


def build_once(
    cache_dir: Path,
    name: str,
    inputs: Sequence[bytes],
    artifact: str,
    produce: Callable[[Path], None],
    trust: TrustPolicy | None = None,
    progress: Callable[[str], None] | None = None,
) -> Path:
    """:func:`once_path`, checked (:func:`verified`); if it is missing or refused,
    ``produce(directory)`` writes ``ARTIFACT`` (and anything else) into a private directory
    that then becomes ``NAME-HASH``. A cache the user cannot write serves a good one and
    otherwise raises :class:`HostBuildError`."""
    trust = trust or TrustPolicy.from_env()
    say = progress or log.warning
    result = once_path(cache_dir, name, inputs, artifact)
    final = result.parent
    try:
        check_root(cache_dir, trust)
    except Untrusted as exc:  # nothing in it is used, nothing is built into it
        raise HostBuildError(f"the build cache is not trusted: {exc}") from None
    if (refused := verified(final, trust)) is None:
        return result
    if final.exists() or final.is_symlink():
        say(f"{name} in the build cache refused: {refused}: building it again")
    if not _writable(cache_dir):
        raise HostBuildError(f"{name} is not usable in the read-only build cache {cache_dir}: {refused}")
    cache_dir.mkdir(parents=True, exist_ok=True)
    with FileLock(str(final) + ".lock", mode=lock_mode(cache_dir)):
        if verified(final, trust) is None:
            return result
        tmp = Path(tempfile.mkdtemp(dir=cache_dir, prefix=f".{name}-"))
        try:
            share_like_parent(tmp)
            produce(tmp)
            if not (tmp / artifact).exists():
                raise HostBuildError(f"building {name} did not produce {artifact}")
            meta = {"key": final.name, "sha256": file_digests(tmp, trust)}
            write_meta(tmp, meta, trust)
            _replace(final, tmp)
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
    return result


def verified(final: Path, trust: TrustPolicy) -> str | None:
    """None when the host build in ``final`` passes every check; else why it does not."""
    try:
        check_folder(final.parent, trust, follow=True)
        check_files(final, read_meta(final, final.name, trust), trust)
    except Untrusted as exc:
        return str(exc)
    except OSError as exc:
        return f"{final} is unreadable: {exc}"
    return None


def artifact_digest(path: Path, trust: TrustPolicy | None = None) -> str:
    """The SHA-256 that ``path``'s checked (and, with a key, signed) ``build.json`` lists for it:
    what a build that reads it must read (:mod:`.inputs`). Raises :class:`HostBuildError`."""
    trust = trust or TrustPolicy.from_env()
    try:
        sums = read_meta(path.parent, path.parent.name, trust).get("sha256")
    except (Untrusted, OSError) as exc:
        raise HostBuildError(f"{path.parent} in the build cache refused: {exc}") from None
    if not isinstance(sums, dict) or not isinstance(found := sums.get(path.name), str):
        raise HostBuildError(f"{path.parent}/build.json lists no sum for {path.name}")
    return found


def runnable(path: Path, trust: TrustPolicy | None = None) -> Path:
    """The host build ``path`` (what :func:`build_once` returned) as ``/proc/PID/fd/N`` of the
    bytes its checked ``build.json`` lists, open for this process's life (:mod:`.handles`): what
    runs it must run those, whatever is swapped in under its name after. Raises
    :class:`HostBuildError` or :class:`.handles.EntryChanged`."""
    trust = trust or TrustPolicy.from_env()
    return CheckedFiles(path.parent, {path.name: artifact_digest(path, trust)}, trust).kept(path.name)


def _writable(path: Path) -> bool:
    while not path.exists() and path.parent != path:
        path = path.parent
    return os.access(path, os.W_OK | os.X_OK)


def _replace(final: Path, new: Path) -> None:
    """Publish ``new`` as ``final``, moving a refused one aside first (a process may still be
    running the old executable; it keeps its open file)."""
    if final.is_symlink() or final.is_file():
        final.unlink()
    elif final.exists():
        old = Path(tempfile.mkdtemp(dir=final.parent, prefix=f".old-{final.name}-"))
        os.rename(final, old / "entry")
        shutil.rmtree(old, ignore_errors=True)
    os.rename(new, final)
