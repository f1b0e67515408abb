"""Ed25519 signatures of cache entries, through the ``cryptography`` package.

Imported only when a signing or verify key is configured, so a cache without signatures needs
no extra package. Keys are PEM files as ``openssl genpkey -algorithm ed25519`` writes them
(private: PKCS#8, unencrypted; public: SubjectPublicKeyInfo, ``openssl pkey -pubout``).

A key is only as good as who can change it: whoever can replace the verify key (or the signing
key) decides which entries are accepted. A key is checked as ssh checks its key files (owner,
mode, ACLs: :mod:`.writers`; every folder above it: :mod:`.folders`) on the descriptor it is then
read from: a key someone else can write or replace is refused whatever the cache's trust setting
says (the signature exists to not trust the cache's other writers), and so is a signing key
others can read (they could sign too).
"""

from __future__ import annotations

import os
import stat
from functools import cache
from pathlib import Path
from typing import Any

from ..verdict import UnusableEnvironment
from .folders import Exposed, check_path
from .writers import foreign, writers


class SigningError(UnusableEnvironment):
    """A configured key cannot be used: the session stops with one line, as it must not
    quietly judge with unsigned or unverified entries."""


def _backend() -> Any:
    try:
        from cryptography.hazmat.primitives import (  # type: ignore[import-not-found,unused-ignore]
            serialization,
        )
        from cryptography.hazmat.primitives.asymmetric import (  # type: ignore[import-not-found,unused-ignore]
            ed25519,
        )
    except ImportError:
        raise SigningError(
            "signed cache entries need the cryptography package (pip install cryptography)"
        ) from None
    return serialization, ed25519


#: The most bytes of a key file: an Ed25519 PEM key is about a hundred; a larger file (a sparse
#: file of gigabytes) is refused before it is read.
MAX_KEY_BYTES = 1 << 16


def check_key_file(path: Path, what: str, secret: bool) -> bytes:
    """The bytes of the key file ``path``, read from the one descriptor that was checked: refused
    (:class:`SigningError`) unless it is a regular file of a key's size (never a FIFO or a device,
    which is not opened to wait on), that belongs to the user or root, that no one else can
    write, nor replace through a folder from ``/`` down or a link on the way (:mod:`.folders`:
    a sticky folder such as /tmp is fine), and, for a ``secret`` key, that no one else can read
    (they could sign entries: as ssh refuses such a private key)."""
    uid = os.geteuid()
    try:
        check_path(path)
    except Exposed as exc:
        raise SigningError(
            f"{what} {path} lies below {exc.folder}, which {exc.why}: the key could be replaced; "
            f"refused (chmod go-w {exc.folder}, or keep the key elsewhere)"
        ) from None
    not_a_key = f"{what} {path} is not a key file (a regular file of at most {MAX_KEY_BYTES:,} bytes)"
    try:
        if not stat.S_ISREG(os.stat(path).st_mode):
            raise SigningError(not_a_key)  # not even opened: a device may act on an open
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError as exc:
        raise SigningError(f"{what} {path}: {exc.strerror or exc}") from None
    with os.fdopen(fd, "rb") as f:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode) or info.st_size > MAX_KEY_BYTES:
            raise SigningError(not_a_key)
        if info.st_uid not in (0, uid):
            raise SigningError(f"{what} {path} belongs to uid {info.st_uid}, not to you or root: refused")
        if found := [w for w in writers(info, fd) if foreign(w, uid)]:
            raise SigningError(
                f"{what} {path} is writable by {found[0].describe()}: refused (chmod go-w {path})"
            )
        if secret and (found := [w for w in writers(info, fd, read=True) if foreign(w, uid)]):
            raise SigningError(
                f"{what} {path} is readable by {found[0].describe()}, who could then sign cache "
                f"entries: refused (chmod 600 {path})"
            )
        try:
            return f.read(MAX_KEY_BYTES)
        except OSError as exc:
            raise SigningError(f"{what} {path}: {exc.strerror or exc}") from None


@cache
def _private_key(path: Path) -> Any:
    raw = check_key_file(path, "cache signing key", secret=True)
    serialization, ed25519 = _backend()
    try:
        key = serialization.load_pem_private_key(raw, password=None)
    except (OSError, ValueError, TypeError) as exc:
        raise SigningError(f"cache signing key {path}: {exc}") from None
    if not isinstance(key, ed25519.Ed25519PrivateKey):
        raise SigningError(f"cache signing key {path} is not an Ed25519 private key")
    return key


@cache
def _public_key(path: Path) -> Any:
    raw = check_key_file(path, "cache verify key", secret=False)
    serialization, ed25519 = _backend()
    try:
        key = serialization.load_pem_public_key(raw)
    except (OSError, ValueError) as exc:
        raise SigningError(f"cache verify key {path}: {exc}") from None
    if not isinstance(key, ed25519.Ed25519PublicKey):
        raise SigningError(f"cache verify key {path} is not an Ed25519 public key")
    return key


def sign(key: Path, data: bytes) -> bytes:
    """The signature of ``data`` with the private key in ``key``."""
    return bytes(_private_key(key).sign(data))


def verify(key: Path, data: bytes, signature: bytes, own: bool = False) -> bool:
    """Whether ``signature`` is the public key ``key``'s signature of ``data`` (with ``own``:
    ``key`` is a private key, and its own public key is meant)."""
    public = _private_key(key).public_key() if own else _public_key(key)
    from cryptography.exceptions import (  # type: ignore[import-not-found,unused-ignore]
        InvalidSignature,
    )

    try:
        public.verify(signature, data)
    except InvalidSignature:
        return False
    return True


def ready(key: Path, own: bool = False) -> None:
    """Load ``key`` (checked, :func:`check_key_file`) now: a key that cannot be used stops the
    session, whether or not an entry has a signature to check."""
    _private_key(key) if own else _public_key(key)
