"""Reading input files that may be anything a user can name, and writing files that other
processes may read at any moment."""

from __future__ import annotations

import contextlib
import errno
import fcntl
import os
import re
import stat
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

#: The mark in the name of every temporary file :func:`write_atomic` makes
#: (``.NAME.tileconform-XXXXXXXX.tmp``): the cleanup removes only files so named, never a user's
#: own ``.NAME.*.tmp``.
TMP_MARK = "tileconform-"
#: A marked temporary file is stale (its writer was killed: ``kill -9``, power loss) when its
#: writer's lock on it is gone and it is older than this: the lock is taken a moment after the
#: file is made, and this covers that moment on a loaded host.
STALE_TMP_SECONDS = 60.0

#: The kernel's names of files that are already open (``/dev/stdout``, ``/proc/self/fd/1``):
#: such a name is written into, never replaced.
_OPEN_FILE_NAME = re.compile(r"/dev/(stdout|stderr|fd/\d+)|/proc/(self|\d+)/fd/\d+")


class FileRefused(OSError):
    """A path that is not (or does not lead to) what the caller may read or write; the message
    says why, for the user."""


def _kind(mode: int) -> str:
    if stat.S_ISDIR(mode):
        return "a directory"
    if stat.S_ISFIFO(mode):
        return "a FIFO"
    if stat.S_ISCHR(mode):
        return "a character device"
    if stat.S_ISBLK(mode):
        return "a block device"
    if stat.S_ISSOCK(mode):
        return "a socket"
    return "not a regular file"


def read_regular(path: Path, limit: int, what: str = "file") -> bytes:
    """The bytes of ``path``, which must be a regular file of at most ``limit`` bytes.

    The file is opened without blocking (a FIFO without a writer would wait forever) and checked
    on the open descriptor, so a directory, a device (``/dev/zero`` never ends), a FIFO or a
    socket is refused with :class:`FileRefused` before anything is read; a symlink is followed
    (a loop is refused by the kernel: ``ELOOP``). At most ``limit + 1`` bytes are ever read, so
    a file that grows while it is read is refused too. Other failures are plain :class:`OSError`.
    """
    flags = os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY | getattr(os, "O_CLOEXEC", 0)
    fd = os.open(path, flags)
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise FileRefused(errno.EINVAL, f"is {_kind(info.st_mode)}, not a regular {what}")
        if info.st_size > limit:
            raise FileRefused(
                errno.EFBIG, f"is {info.st_size:,} bytes, more than the {limit:,} a {what} may have"
            )
        chunks: list[bytes] = []
        size = 0
        while chunk := os.read(fd, min(1 << 20, limit + 1 - size) or 1):
            chunks.append(chunk)
            size += len(chunk)
            if size > limit:
                raise FileRefused(errno.EFBIG, f"grew past the {limit:,} bytes a {what} may have")
        return b"".join(chunks)
    finally:
        os.close(fd)


def tmp_glob(name: str) -> str:
    """The glob of the temporary files :func:`write_atomic` makes for a target named ``name``."""
    return f".{name}.{TMP_MARK}*.tmp"


def remove_stale_tmp(folder: Path, name: str) -> list[Path]:
    """Remove the temporary files of target ``name`` that a killed writer left, and say which.

    A file is removed only with proof that it is such a leftover: its name has :data:`TMP_MARK`,
    it is a regular file (not a link) of this user, it is older than :data:`STALE_TMP_SECONDS`,
    and its writer's lock on it (held from just after the file is made until it is renamed
    into place) can be taken, so no live writer has it: the kernel drops a lock when its
    process dies. Anything else, a user's ``.NAME.x.tmp`` included, stays.
    """
    cutoff = time.time() - STALE_TMP_SECONDS
    removed: list[Path] = []
    with contextlib.suppress(OSError):
        for leftover in folder.glob(tmp_glob(name)):
            with contextlib.suppress(OSError):
                info = leftover.lstat()
                if not stat.S_ISREG(info.st_mode) or info.st_uid != os.geteuid() or info.st_mtime >= cutoff:
                    continue
                fd = os.open(leftover, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
                try:
                    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)  # BlockingIOError: a live writer's
                    same = os.fstat(fd)
                    if (same.st_dev, same.st_ino) == (info.st_dev, info.st_ino):
                        leftover.unlink()
                        removed.append(leftover)
                finally:
                    os.close(fd)
    return removed


def _write_into(path: Path, text: str) -> None:
    """Write into an existing device or FIFO (``/dev/null``, a terminal, a pipe) in place."""
    try:
        fd = os.open(path, os.O_WRONLY | os.O_NONBLOCK | os.O_NOCTTY | getattr(os, "O_CLOEXEC", 0))
    except OSError as exc:
        if exc.errno == errno.ENXIO:  # a FIFO nobody reads: opening it blocking would hang
            raise FileRefused(errno.ENXIO, "is a FIFO that no process reads") from None
        raise
    with contextlib.suppress(OSError):
        fcntl.fcntl(fd, fcntl.F_SETFL, fcntl.fcntl(fd, fcntl.F_GETFL) & ~os.O_NONBLOCK)
    with os.fdopen(fd, "w", encoding="utf-8", newline="") as handle:
        handle.write(text)
        handle.flush()


def write_atomic(path: Path, text: str, before_replace: Callable[[], None] | None = None) -> None:
    """Write ``text`` (UTF-8, newlines as given) to ``path``: readers see the old file or the
    new one, never a torn one.

    What ``path`` is decides how:

    - missing or a regular file: the text goes to a temporary file ``.NAME.tileconform-XXXX.tmp``
      in the same folder (created with its parents if missing), locked while it is written, is
      flushed to disk and renamed over ``path``; ``before_replace`` (a last check that may
      raise) runs just before the rename. The file keeps its mode; a new one gets 0644. A
      regular file without any write permission bit is refused (even for root: it was made
      read-only on purpose).
    - a symlink to a regular file (or to nothing yet) in the symlink's own folder: the target is
      replaced as above and the symlink stays. A symlink that leads into another folder is
      refused: the user named a place in this folder, and replacing a file elsewhere (a shared
      config, a system file) is not what they asked for.
    - a character device or a FIFO (``/dev/null``, a terminal, a pipe that a process reads): the
      text is written into it; it is never replaced, so ``/dev/null`` stays a device. A FIFO that
      no process reads is refused instead of waiting for a reader.
    - ``/dev/stdout``, ``/dev/stderr``, ``/dev/fd/N`` and ``/proc/PID/fd/N`` are the kernel's
      names of files that are already open: they are written into in place (appended to, when
      they lead to a regular file), whatever they lead to.
    - a directory, a block device, a socket, a symlink loop: refused.

    Refusals are :class:`FileRefused` (an :class:`OSError`) with a message for the user. On any
    failure a temporary file is removed and ``path`` is left as it was. The temporary files of
    the same target that a writer killed with ``kill -9`` left are removed at the next write
    (:func:`remove_stale_tmp`: only this tool's, and only with proof that no writer has them).
    """
    if _OPEN_FILE_NAME.fullmatch(str(path)) and path.exists():
        if path.is_dir():
            raise FileRefused(errno.EISDIR, "is a directory")
        if path.is_file():  # redirected to a file: append, as the shell's descriptor would
            with open(path, "a", encoding="utf-8", newline="") as handle:
                handle.write(text)
            return
        _write_into(path, text)
        return
    target = path
    try:
        link = path.lstat()
    except FileNotFoundError:
        link = None
    if link is not None and stat.S_ISLNK(link.st_mode):
        try:
            resolved = path.resolve(strict=False)
        except (RuntimeError, OSError):
            raise FileRefused(errno.ELOOP, "is a symlink loop") from None
        if resolved.parent != path.parent.resolve():
            raise FileRefused(
                errno.EPERM,
                f"is a symlink to {resolved}, outside its own folder: name that file itself to write it",
            )
        target = resolved
    try:
        info = target.stat()
    except FileNotFoundError:
        info = None
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise FileRefused(errno.ELOOP, "is a symlink loop") from None
        raise
    if info is not None and not stat.S_ISREG(info.st_mode):
        if stat.S_ISCHR(info.st_mode) or stat.S_ISFIFO(info.st_mode):
            _write_into(target, text)
            return
        raise FileRefused(errno.EINVAL, f"is {_kind(info.st_mode)}, not a file to write")
    if info is not None and not info.st_mode & 0o222:
        raise FileRefused(
            errno.EACCES, "is read-only (no write permission): make it writable or write elsewhere"
        )
    target.parent.mkdir(parents=True, exist_ok=True)
    remove_stale_tmp(target.parent, target.name)
    mode = info.st_mode & 0o7777 if info is not None else 0o644
    fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.{TMP_MARK}", suffix=".tmp")
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)  # a new file nobody else holds: proof of life for the cleanup
        data = text.encode("utf-8")
        written = 0
        while written < len(data):
            written += os.write(fd, data[written:])
        os.fsync(fd)
        os.fchmod(fd, mode)
        if before_replace is not None:
            before_replace()
        os.replace(tmp, target)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    finally:
        os.close(fd)


def write_in_place(path: Path, text: str, before_write: Callable[[], None] | None = None) -> None:
    """Write ``text`` into the regular file ``path`` itself, keeping its inode: every hard link
    of it sees the new text (as an editor writes a hard-linked file). Not atomic: a reader at
    that moment may see part of it; the caller keeps writers apart. ``before_write`` runs just
    before the first byte is written (a last check that may raise)."""
    fd = os.open(path, os.O_WRONLY | os.O_CLOEXEC)
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise FileRefused(errno.EINVAL, "is not a regular file to write in place")
        if before_write is not None:
            before_write()
        data = text.encode("utf-8")
        written = 0
        while written < len(data):
            written += os.pwrite(fd, data[written:], written)
        os.ftruncate(fd, len(data))
        os.fsync(fd)
    finally:
        os.close(fd)
