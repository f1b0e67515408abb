"""Ed25519 signatures of cache entries, through the ``cryptography`` package.

Imported only when a signing or verify key is configured, so a cache without signatures needs
no extra package. Keys are PEM files as ``openssl genpkey -algorithm ed25519`` writes them
(private: PKCS#8, unencrypted; public: SubjectPublicKeyInfo, ``openssl pkey -pubout``).
"""

from __future__ import annotations

from functools import cache
from pathlib import Path
from typing import Any

from ..backend import UnusableEnvironment


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


@cache
def _private_key(path: Path) -> Any:
    serialization, ed25519 = _backend()
    try:
        key = serialization.load_pem_private_key(path.read_bytes(), password=None)
    except (OSError, ValueError, TypeError) as exc:
        raise SigningError(f"cache signing key {path}: {exc}") from None
    if not isinstance(key, ed25519.Ed25519PrivateKey):
        raise SigningError(f"cache signing key {path} is not an Ed25519 private key")
    return key


@cache
def _public_key(path: Path) -> Any:
    serialization, ed25519 = _backend()
    try:
        key = serialization.load_pem_public_key(path.read_bytes())
    except (OSError, ValueError) as exc:
        raise SigningError(f"cache verify key {path}: {exc}") from None
    if not isinstance(key, ed25519.Ed25519PublicKey):
        raise SigningError(f"cache verify key {path} is not an Ed25519 public key")
    return key


def sign(key: Path, data: bytes) -> bytes:
    """The signature of ``data`` with the private key in ``key``."""
    return bytes(_private_key(key).sign(data))


def verify(key: Path, data: bytes, signature: bytes) -> bool:
    """Whether ``signature`` is the public key ``key``'s signature of ``data``."""
    public = _public_key(key)
    from cryptography.exceptions import (  # type: ignore[import-not-found,unused-ignore]
        InvalidSignature,
    )

    try:
        public.verify(signature, data)
    except InvalidSignature:
        return False
    return True
