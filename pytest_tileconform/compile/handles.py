"""Running what was checked: a program or library of the cache is run through a descriptor of
the very bytes that were checked, never reopened by its name.

Checking a file by its name and then running that name leaves a window. Someone who may write
the entry without being trusted with its content (a member of a trusted group, or anyone under
``any``, when entries must also carry a signature they cannot make) replaces or rewrites the
file after its sum and signature passed, and their code runs. So a file to be run is opened
once (no link followed, never a FIFO or a device: :func:`.trust.open_nofollow`) and that
descriptor is what is checked and what is run: the process or the loader is handed
``/proc/PID/fd/N``, which names the open file itself whatever later happens to its name.

Its bytes must also stay what was checked while it is open. When no one but those trusted as
much as the user can write it (:func:`stable`), that holds by itself: it is the file
:func:`.trust.check_files` hashed if it is the same inode, unchanged since (so nothing is read
again on the warm path), and is hashed through the descriptor otherwise. When someone else can
write it, its bytes are copied, while being hashed, into a sealed memory file (``memfd``) that
no one can change, and the copy is run. A file whose bytes are not the sum its checked
``build.json`` lists stops the session (:class:`EntryChanged`): nothing of it is run.
"""

from __future__ import annotations

import fcntl
import hashlib
import os
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import BinaryIO

from ..verdict import UnusableEnvironment
from .trust import MAX_FILE_BYTES, TrustPolicy, Untrusted, open_nofollow
from .writers import foreign, writers

_CHUNK = 1 << 20
#: descriptors kept for this process's life by (path, sum), with how each was when opened: a
#: runner loads a unit once by the name it is given, so that name must keep naming those bytes
_KEPT: dict[tuple[str, str], tuple[int, os.stat_result]] = {}


class EntryChanged(UnusableEnvironment):
    """A file of the cache is not, when it is to be run, what was checked: someone who can write
    the cache changed it in between. Nothing of it is run; the session stops with one line."""


def stable(info: os.stat_result, fd: int, policy: TrustPolicy) -> bool:
    """Whether only those ``policy`` trusts as much as the user can change the open file ``fd``
    (stat ``info``, which passed :meth:`TrustPolicy.check_writers`). Without a key that is
    everyone the check let through; with one, only the user and root: a trusted group's members
    may write the cache, but what they write must carry a signature they cannot make."""
    if policy.verifier is None:
        return True
    uid = os.geteuid()
    return info.st_uid in (0, uid) and not any(foreign(w, uid) for w in writers(info, fd))


def _same(info: os.stat_result, seen: os.stat_result | None) -> bool:
    """Whether ``info`` is the inode ``seen`` was, unchanged since (its change time moves with
    every write, chmod or link)."""
    fields = ("st_dev", "st_ino", "st_size", "st_mtime_ns", "st_ctime_ns")
    return seen is not None and all(getattr(info, name) == getattr(seen, name) for name in fields)


def _chunks(f: BinaryIO, path: Path) -> Iterator[bytes]:
    read = 0
    while chunk := f.read(_CHUNK):
        read += len(chunk)
        if read > MAX_FILE_BYTES:
            raise EntryChanged(f"tileconform: {path} grew past {MAX_FILE_BYTES:,} bytes while it was read")
        yield chunk


def _refuse(path: Path, digest: str, found: str) -> EntryChanged:
    return EntryChanged(
        f"tileconform: {path} is not what was checked (its build.json lists sha256 {digest[:16]}..., "
        f"{found[:16]}... was read to run it): someone who can write the build cache changed it in "
        "between; nothing of it was run"
    )


def _sealed_copy(f: BinaryIO, path: Path, digest: str) -> int:
    """A read-only descriptor of a sealed memory file holding ``f``'s bytes, checked against
    ``digest`` as they are copied (the copy's write descriptor is closed: a file open for
    writing cannot be executed)."""
    copy = os.memfd_create(f"tileconform:{path.name}", os.MFD_CLOEXEC | os.MFD_ALLOW_SEALING)
    try:
        sha = hashlib.sha256()
        for chunk in _chunks(f, path):
            sha.update(chunk)
            view = memoryview(chunk)
            while view:
                view = view[os.write(copy, view) :]
        if (found := sha.hexdigest()) != digest:
            raise _refuse(path, digest, found)
        seals = fcntl.F_SEAL_SEAL | fcntl.F_SEAL_SHRINK | fcntl.F_SEAL_GROW | fcntl.F_SEAL_WRITE
        fcntl.fcntl(copy, fcntl.F_ADD_SEALS, seals)
        return os.open(f"/proc/self/fd/{copy}", os.O_RDONLY | os.O_CLOEXEC)
    finally:
        os.close(copy)


def open_checked(path: Path, digest: str, policy: TrustPolicy, seen: os.stat_result | None = None) -> int:
    """A descriptor (close-on-exec) of ``path``'s bytes that are ``digest`` and stay so while
    it is open (module docstring); ``seen``: the file as it was hashed when its entry was
    checked. Raises :class:`EntryChanged`."""
    try:
        f = open_nofollow(path, policy, MAX_FILE_BYTES)
    except Untrusted as exc:
        raise EntryChanged(f"tileconform: {exc}, when it was to be run: nothing of it was run") from None
    with f:
        info = os.fstat(f.fileno())
        if not stable(info, f.fileno(), policy):
            return _sealed_copy(f, path, digest)
        if not _same(info, seen):
            sha = hashlib.sha256()
            for chunk in _chunks(f, path):
                sha.update(chunk)
            if (found := sha.hexdigest()) != digest:
                raise _refuse(path, digest, found)
        return os.dup(f.fileno())


def fd_path(fd: int) -> Path:
    """The name of this process's descriptor ``fd`` that another process (a runner, a tool) can
    open, load or execute too."""
    return Path(f"/proc/{os.getpid()}/fd/{fd}")


@dataclass(frozen=True)
class CheckedFiles:
    """The files of one entry as they were checked: ``sums`` from its checked ``build.json``,
    ``seen`` how :func:`.trust.check_files` found each, ``policy`` the trust it was checked under."""

    directory: Path
    sums: Mapping[str, object]
    policy: TrustPolicy
    seen: Mapping[str, os.stat_result] = field(default_factory=dict)

    def _open(self, name: str) -> int:
        digest = self.sums.get(name)
        if not isinstance(digest, str):
            raise EntryChanged(f"tileconform: {self.directory / name} is not a checked file of its entry")
        return open_checked(self.directory / name, digest, self.policy, self.seen.get(name))

    def kept(self, name: str) -> Path:
        """File ``name``'s checked bytes as ``/proc/PID/fd/N``, open for this process's life."""
        key = (str(self.directory / name), str(self.sums.get(name)))
        kept = _KEPT.get(key)
        if kept is None or not _same(os.fstat(kept[0]), kept[1]):
            # changed in place since (by the user or root: no one else could write it): opened
            # again. The old descriptor stays open, so its number never names other bytes
            fd = self._open(name)
            kept = _KEPT[key] = (fd, os.fstat(fd))
        return fd_path(kept[0])

    @contextmanager
    def opened(self, name: str) -> Iterator[Path]:
        """File ``name``'s checked bytes as ``/proc/PID/fd/N`` while the block runs."""
        fd = self._open(name)
        try:
            yield fd_path(fd)
        finally:
            os.close(fd)
