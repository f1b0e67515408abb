"""What a build reads besides its own unit, and how a signing build reads exactly that.

A unit's command names folders by placeholder (the backend's roots, ``{cache}``:
:func:`.cache.portable`). Each :class:`BuildInput` says which files under such a root the build
may read and the digest they were checked with (a library's sources by their fingerprint, the
virtual runtime by the sum its signed entry lists). A build that will be signed does not read
them where they lie, where another writer of a shared cache could swap one between the check and
the compiler's read: :func:`stage` copies them into the build's private folder, hashing the bytes
it writes, and the command is filled with the copies. A copy whose digest is not the expected
one stops the build (:class:`InputChanged`) naming the input, so what is signed is what was
compiled from; the digests go into the entry's manifest, under the signature.
"""

from __future__ import annotations

import errno
import hashlib
import os
import stat
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from ..verdict import UnusableEnvironment

#: the folder of a build's private folder that :func:`stage` copies inputs into, one folder per
#: input by its name (messages of a signed build name ``.../.build-XXXXXXXX/.inputs/NAME/...``)
STAGED = ".inputs"
#: what the digest of an input is taken over
TREE = "tree"  # each file's relative path, length and bytes, in order (a source tree's fingerprint)
FILE = "file"  # the SHA-256 of its one file's bytes (what build.json lists)


@dataclass(frozen=True)
class BuildInput:
    """Files under ``root`` that a build reads, named ``{name}`` in its command."""

    name: str
    root: Path
    files: tuple[str, ...]  # relative to root, "/"-separated, in digest order
    digest: str
    kind: str = TREE

    def describe(self) -> str:
        return (
            str(self.root / self.files[0]) if self.kind == FILE else f"{self.root} ({len(self.files)} files)"
        )


class InputChanged(UnusableEnvironment):
    """An input read for a signed build is not what it was checked as: someone changed it in
    between (or it is damaged). Nothing is built or signed from it."""


class _Digest:
    def __init__(self, kind: str) -> None:
        self.kind = kind
        self.sha = hashlib.sha256()

    def add(self, relative: str, data: bytes) -> None:
        if self.kind == TREE:
            self.sha.update(relative.encode())
            self.sha.update(len(data).to_bytes(8, "little"))
        self.sha.update(data)


def digest(kind: str, items: Iterable[tuple[str, bytes]]) -> str:
    """The digest of ``(relative path, bytes)`` pairs, as :class:`BuildInput` takes it."""
    found = _Digest(kind)
    for relative, data in items:
        found.add(relative, data)
    return found.sha.hexdigest()


def read_tree(root: Path, files: Sequence[str]) -> Iterable[tuple[str, bytes]]:
    for relative in files:
        yield relative, (root / relative).read_bytes()


def _read_regular(path: Path) -> bytes:
    """The bytes of ``path``, a regular file reached without a link (``OSError`` otherwise)."""
    if not stat.S_ISREG(os.lstat(path).st_mode):
        raise OSError(errno.EINVAL, "not a regular file")
    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    with os.fdopen(fd, "rb") as source:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise OSError(errno.EINVAL, "not a regular file")
        return source.read()


def stage(inputs: Iterable[BuildInput], into: Path) -> dict[str, str]:
    """Copy each input's files under ``into`` (the build's private folder), checking the bytes
    written against its digest; the copies' roots by name. Raises :class:`InputChanged`."""
    roots: dict[str, str] = {}
    for item in dict.fromkeys(inputs):
        copy = into / item.name
        found = _Digest(item.kind)
        for relative in item.files:
            target = copy / relative
            target.parent.mkdir(parents=True, exist_ok=True)
            try:  # a FIFO or a device is refused, never opened to wait on
                data = _read_regular(item.root / relative)
            except OSError as exc:
                raise InputChanged(
                    f"tileconform: {item.root / relative}, an input of the build, cannot be read as it was "
                    f"checked ({exc.strerror}): nothing built or signed from it"
                ) from None
            target.write_bytes(data)
            found.add(relative, data)
        if found.sha.hexdigest() != item.digest:
            raise InputChanged(
                f"tileconform: {item.describe()} changed after it was checked (sha256 {item.digest[:16]}... "
                f"expected, {found.sha.hexdigest()[:16]}... read): nothing built or signed from it; "
                "find out who can write it"
            )
        roots[item.name] = str(copy)
    return roots


def unstage(text: str, staged: dict[str, str], inputs: Iterable[BuildInput]) -> str:
    """``text`` (a build log) with the staged copies' paths written as the inputs' own: compile
    errors are recorded as verdicts and must read the same whether or not a build was signed."""
    originals = {item.name: str(item.root) for item in inputs}
    for name, copy in sorted(staged.items(), key=lambda pair: -len(pair[1])):
        if name in originals:
            text = text.replace(copy, originals[name])
    return text
