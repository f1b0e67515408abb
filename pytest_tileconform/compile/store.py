"""The objects of a remote build cache, reached through fsspec (the ``remote`` extra): s3:// (s3fs),
http(s):// (read only: a mirror of the bucket), file:// and whatever other fsspec protocol is
installed (gs://, az://, ...).

Every call is bounded: the library's own timeouts where it has them, and a deadline on each
call besides (the call runs in a daemon thread the session does not wait for), so a remote that
hangs costs at most :data:`TIMEOUT_S` once. Whatever goes wrong is one :class:`RemoteDown` (or
:class:`RemoteForbidden` for a write the user may not make), never a library's traceback.

A write is never seen half done: an object is put under ``tmp/`` first and then moved to its
name (a rename on a file system, a server-side copy on S3: each makes the whole object appear
at once), so a writer killed mid-upload leaves at most an unreferenced ``tmp/`` object.
"""

from __future__ import annotations

import contextlib
import os
import threading
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, BinaryIO, TypeVar
from urllib.parse import urlsplit

T = TypeVar("T")

REMOTE_ENV = "TILECONFORM_CACHE_REMOTE"
TIMEOUT_ENV = "TILECONFORM_CACHE_REMOTE_TIMEOUT"
#: The most seconds one call to the remote may take (a request, one chunk of a download): past
#: it the remote counts as down for the rest of the session.
TIMEOUT_S = 20.0
#: Protocols served read only: a plain web server takes no uploads.
READ_ONLY = ("http", "https")
_CHUNK = 1 << 20


class RemoteDown(Exception):
    """The remote did not answer in time, or not as an object store does; the message says how."""


class RemoteForbidden(Exception):
    """The user may not write the remote."""


class RemoteSettingError(ValueError):
    """A remote URL or timeout that cannot be used; the message says why."""


def timeout_from_env() -> float:
    raw = os.environ.get(TIMEOUT_ENV, "").strip()
    if not raw:
        return TIMEOUT_S
    try:
        value = float(raw)
    except ValueError:
        value = float("nan")
    if not 0 < value <= 3600:
        raise RemoteSettingError(f"{TIMEOUT_ENV}={raw!r}: must be seconds above 0, at most 3600")
    return value


def check_url(url: str) -> str:
    """``url``'s protocol once fsspec and the package that implements it are importable;
    :class:`RemoteSettingError` says what to install or write instead."""
    scheme = urlsplit(url).scheme
    if not scheme or "://" not in url:
        raise RemoteSettingError(
            f"{url!r} is not a URL (s3://BUCKET/PREFIX, https://HOST/PATH, file:///PATH)"
        )
    try:
        import fsspec
    except ImportError:
        raise RemoteSettingError(
            f"{url}: a remote build cache needs fsspec: pip install 'pytest-tileconform[remote]'"
        ) from None
    try:
        fsspec.get_filesystem_class(scheme)
    except ValueError:
        raise RemoteSettingError(f"{url}: fsspec knows no protocol {scheme!r}") from None
    except ImportError as exc:
        raise RemoteSettingError(
            f"{url}: the {scheme}:// protocol needs a package that is not installed ({exc}); "
            "pip install 'pytest-tileconform[remote]' installs s3fs and aiohttp"
        ) from None
    return scheme


def _options(scheme: str, timeout_s: float) -> dict[str, Any]:
    """The filesystem's own timeouts, so a call the deadline gives up on ends by itself too."""
    if scheme in ("s3", "s3a"):
        return {
            "skip_instance_cache": True,
            "config_kwargs": {
                "connect_timeout": timeout_s,
                "read_timeout": timeout_s,
                "retries": {"max_attempts": 2},
            },
        }
    if scheme in READ_ONLY:
        import aiohttp

        return {
            "skip_instance_cache": True,
            "client_kwargs": {"timeout": aiohttp.ClientTimeout(total=timeout_s, connect=timeout_s)},
        }
    if scheme == "file":
        return {"auto_mkdir": True}
    return {"skip_instance_cache": True}


class RemoteStore:
    """The objects under one URL, named by ``/``-separated paths relative to it."""

    def __init__(self, url: str, timeout_s: float | None = None) -> None:
        from fsspec.core import url_to_fs

        self.url = url.rstrip("/")
        self.scheme = check_url(url)
        self.timeout_s = timeout_from_env() if timeout_s is None else timeout_s
        self.writable = self.scheme not in READ_ONLY
        try:
            self.fs, base = self._bounded(
                "connecting", lambda: url_to_fs(self.url, **_options(self.scheme, self.timeout_s))
            )
        except RemoteForbidden as exc:
            raise RemoteDown(str(exc)) from None
        self.base = str(base).rstrip("/")

    def _path(self, name: str) -> str:
        return f"{self.base}/{name}"

    def _bounded(self, what: str, call: Callable[[], T]) -> T:
        """``call()`` within :attr:`timeout_s`, its failure as :class:`RemoteDown` (a missing
        object as FileNotFoundError, a refused write as :class:`RemoteForbidden`)."""
        box: dict[str, Any] = {}
        done = threading.Event()

        def run() -> None:
            try:
                box["value"] = call()
            except BaseException as exc:
                box["error"] = exc
            finally:
                done.set()

        threading.Thread(target=run, daemon=True, name="tileconform-remote").start()
        if not done.wait(self.timeout_s):
            raise RemoteDown(f"{what} took more than {self.timeout_s:g} s")
        if "error" not in box:
            return box["value"]  # type: ignore[no-any-return]
        error = box["error"]
        if isinstance(error, FileNotFoundError):
            raise error
        if isinstance(error, PermissionError):
            raise RemoteForbidden(f"{what}: {_first_line(error)}") from None
        if isinstance(error, Exception):
            raise RemoteDown(f"{what}: {type(error).__name__}: {_first_line(error)}") from None
        raise error

    def read(self, name: str, most: int) -> bytes | None:
        """Object ``name`` whole, None when there is none; one larger than ``most`` is refused
        by :class:`ValueError` before it is read whole."""
        try:
            with self._open(name) as f:
                data = b"".join(self._chunks(f, name, most))
        except FileNotFoundError:
            return None
        return data

    def download(self, name: str, target: Path, most: int, check: Callable[[bytes], None]) -> None:
        """Object ``name`` into ``target``, a chunk at a time, each chunk handed to ``check``
        first (a running checksum refuses a bad object before all of it is written); a missing
        object is FileNotFoundError, a larger one than ``most`` ValueError."""
        with self._open(name) as f, target.open("wb") as out:
            for chunk in self._chunks(f, name, most):
                check(chunk)
                out.write(chunk)

    def _open(self, name: str) -> BinaryIO:
        path = self._path(name)
        return self._bounded(f"opening {name}", lambda: self.fs.open(path, "rb"))  # type: ignore[no-any-return]

    def _chunks(self, f: BinaryIO, name: str, most: int) -> Iterator[bytes]:
        read = 0
        while chunk := self._bounded(f"reading {name}", lambda: f.read(_CHUNK)):
            read += len(chunk)
            if read > most:
                raise ValueError(f"{self.url}/{name} is larger than the {most:,} bytes it may have")
            yield chunk

    def exists(self, name: str) -> bool:
        path = self._path(name)
        return self._bounded(f"looking for {name}", lambda: bool(self.fs.exists(path)))

    def publish(self, source: Path | bytes, name: str) -> None:
        """Put ``source`` (a file, or bytes) at ``name`` so that it appears whole or not at all:
        under ``tmp/`` first, then moved (whoever moves last wins; each version is whole)."""
        if not self.writable:
            raise RemoteForbidden(f"{self.scheme}:// is read only")
        staged = self._path(f"tmp/{uuid.uuid4().hex}")
        final = self._path(name)
        if isinstance(source, bytes):
            self._bounded(f"uploading {name}", lambda: self.fs.pipe_file(staged, source))
        else:
            self._bounded(f"uploading {name}", lambda: self.fs.put_file(str(source), staged))
        try:
            self._bounded(f"publishing {name}", lambda: self.fs.mv(staged, final))
        except BaseException:
            with contextlib.suppress(FileNotFoundError, RemoteDown, RemoteForbidden):
                # an unreferenced object is harmless, but needs no keeping
                self._bounded("removing a staged upload", lambda: self.fs.rm_file(staged))
            raise


def _first_line(error: BaseException) -> str:
    text = str(error).strip() or repr(error)
    return text.splitlines()[0][:300]
