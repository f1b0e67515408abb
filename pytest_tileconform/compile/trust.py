"""Whether a cache entry may be believed: where it lies, who could have written it, its sums
and, when configured, its signature.

A compiled harness is executed and its output becomes a verdict, so an entry is code and
evidence at once. Three layers guard it, each against something else:

* **Confinement.** Entry and pointer names are 32 hex digits (the key), never a path; nothing
  inside the cache is reached through a symbolic link (entry folders and files are opened
  without following links). A pointer therefore leads only to an entry of the same cache.
* **Checksums.** ``build.json`` lists the SHA-256 of every file; a file that differs is
  refused. A sum stored beside the file only detects damage (a truncated copy, a disk error,
  a stale half-written entry): whoever can write the file can write the sum too.
* **Who could write it** (as ssh treats its key files) and, optionally, **signatures**. An
  entry, its files and the folders above it must not be writable by anyone but the user and
  root (by owner, mode or POSIX ACL; a group counts as the user's only when the account
  database says it is private: :mod:`.writers`), unless the user trusts a group
  (``TILECONFORM_CACHE_TRUST=group:NAME``: members of NAME share the cache) or everyone
  (``any``). A cache shared across machines can be signed: writers hold an Ed25519 private key
  (``TILECONFORM_CACHE_SIGNING_KEY``), readers configure the public key
  (``TILECONFORM_CACHE_VERIFY_KEY``) and then accept only entries whose ``build.json`` (its
  key, its files' sums) carries a valid signature; a planted file or a forged ``build.json``
  fails it whoever wrote it. A writer checks what it reads with its own key's public half, so
  it never uses (and vouches for) an entry it did not sign.

Checks happen when an entry is first used in a process. What is run is run through a
descriptor of the checked bytes (:mod:`.handles`), and the folders above the cache must not let
anyone else swap it (:mod:`.folders`), so nothing changed after the check is run.
"""

from __future__ import annotations

import grp
import hashlib
import json
import os
import re
import stat
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO

from ..verdict import UnusableEnvironment
from . import signing
from .folders import Exposed, check_path
from .writers import foreign, writers

ENTRY_FILE = "build.json"
SIGNATURE_FILE = "build.json.sig"
TRUST_ENV = "TILECONFORM_CACHE_TRUST"
SIGNING_KEY_ENV = "TILECONFORM_CACHE_SIGNING_KEY"
VERIFY_KEY_ENV = "TILECONFORM_CACHE_VERIFY_KEY"
#: what an entry or pointer target may be called: its key, nothing that could be a path
KEY_NAME = re.compile(r"^[0-9a-f]{32}$")
#: a file named in ``build.json``: one plain name inside the entry
FILE_NAME = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.+-]*$")
#: The most bytes of ``build.json`` or its signature (a key, sums, a command, one error line:
#: kilobytes) and of any other file of an entry (a unit's two programs: tens of megabytes). A
#: larger file is refused from its size alone, before a byte of it is read: a planted sparse
#: file of many gigabytes would otherwise be read, or hashed, whole.
MAX_META_BYTES = 1 << 22
MAX_FILE_BYTES = 1 << 30
#: how much of an entry's file is hashed at a time (memory stays this small whatever its size)
_CHUNK = 1 << 20


class Untrusted(Exception):
    """An entry that must not be used; the message says why."""


class TrustSettingError(UnusableEnvironment, ValueError):
    """``TILECONFORM_CACHE_TRUST`` says something else than owner, group:NAME or any."""


@dataclass(frozen=True)
class TrustPolicy:
    """Who may have written what the cache holds, and the keys entries are signed and checked
    with. ``mode``: ``owner`` (the user or root only), ``group`` (also members of ``gid``)
    or ``any`` (no ownership check: a cache the user vouches for)."""

    mode: str = "owner"
    gid: int | None = None
    signing_key: Path | None = None
    verify_key: Path | None = None

    @classmethod
    def parse(
        cls, text: str | None, signing_key: str | None = None, verify_key: str | None = None
    ) -> TrustPolicy:
        """``owner`` (default), ``group:NAME`` (a group name or number) or ``any``."""
        text = (text or "owner").strip()
        gid = None
        if text.startswith("group:"):
            name = text.partition(":")[2]
            try:
                gid = int(name) if name.isdigit() else grp.getgrnam(name).gr_gid
            except KeyError:
                raise TrustSettingError(f"{TRUST_ENV}: no group {name!r}") from None
            text = "group"
        elif text not in ("owner", "any"):
            raise TrustSettingError(f"{TRUST_ENV} is owner, group:NAME or any, not {text!r}")
        return cls(
            text,
            gid,
            Path(signing_key) if signing_key else None,
            Path(verify_key) if verify_key else None,
        )

    @property
    def verifier(self) -> tuple[Path, bool] | None:
        """The key entries are checked with, and whether it is a private key (whose public half
        is meant): the verify key, else the signing key. A signer accepts only what it could
        have signed itself: it vouches for what it reads, so an entry another writer of the
        cache planted is built again rather than used and signed over."""
        if self.verify_key is not None:
            return self.verify_key, False
        if self.signing_key is not None:
            return self.signing_key, True
        return None

    @classmethod
    def from_env(cls) -> TrustPolicy:
        return cls.parse(
            os.environ.get(TRUST_ENV), os.environ.get(SIGNING_KEY_ENV), os.environ.get(VERIFY_KEY_ENV)
        )

    def check_writers(
        self, info: os.stat_result, path: Path, target: int | str | None = None, follow: bool = False
    ) -> None:
        """Refuse ``path`` (stat ``info``; ``target``: an open descriptor of it, else its path)
        when someone this policy does not trust can write it: by its owner, its mode or its
        ACLs (:mod:`.writers`)."""
        if stat.S_ISLNK(info.st_mode):
            raise Untrusted(f"{path} is a symbolic link")
        if self.mode == "any":
            return
        uid = os.geteuid()
        trusted = self.gid if self.mode == "group" else None
        if info.st_uid not in (0, uid) and not (self.mode == "group" and info.st_gid == self.gid):
            raise Untrusted(f"{path} belongs to uid {info.st_uid}, not to you ({TRUST_ENV} trusts others)")
        for writer in writers(info, str(path) if target is None else target, follow):
            if writer.kind == "other" and writer.how == "mode":
                raise Untrusted(f"{path} is writable by every user")
            if foreign(writer, uid, trusted):
                hint = f" ({TRUST_ENV}=group:NAME trusts it)" if writer.kind == "group" else ""
                raise Untrusted(f"{path} is writable by {writer.describe()}{hint}")


def _kind(mode: int) -> str:
    """What a file that is not a regular one is, for a message."""
    for test, name in (
        (stat.S_ISLNK, "a symbolic link"),
        (stat.S_ISFIFO, "a FIFO"),
        (stat.S_ISSOCK, "a socket"),
        (stat.S_ISCHR, "a character device"),
        (stat.S_ISBLK, "a block device"),
        (stat.S_ISDIR, "a folder"),
    ):
        if test(mode):
            return name
    return "not a file"


def open_nofollow(path: Path, policy: TrustPolicy, most: int) -> BinaryIO:
    """``path`` open for reading: a regular file reached without following a link, written by
    no one ``policy`` distrusts and of at most ``most`` bytes (checked before anything is read).
    Anything else where a file is expected (a FIFO, a device, a socket) is refused from its
    ``lstat`` without being opened, and opened without blocking if it is swapped in after: a
    FIFO would otherwise wait for a writer forever."""
    try:
        if not stat.S_ISREG((seen := os.lstat(path)).st_mode):  # a FIFO, a device: never opened
            raise Untrusted(f"{path} is {_kind(seen.st_mode)}, not a regular file")
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError as exc:
        raise Untrusted(f"{path} cannot be read: {exc.strerror}") from None
    f = os.fdopen(fd, "rb")
    try:
        info = os.fstat(f.fileno())
        if not stat.S_ISREG(info.st_mode):  # swapped in after the look: opened, never read
            raise Untrusted(f"{path} is {_kind(info.st_mode)}, not a regular file")
        policy.check_writers(info, path, f.fileno())
        if info.st_size > most:
            raise Untrusted(f"{path} is {info.st_size:,} bytes, more than the {most:,} a cache file may have")
    except BaseException:
        f.close()
        raise
    return f


def read_nofollow(path: Path, policy: TrustPolicy, most: int = MAX_META_BYTES) -> bytes:
    """The bytes of ``path`` (:func:`open_nofollow`), read to at most ``most``: a file that
    grows while it is read is refused too."""
    with open_nofollow(path, policy, most) as f:
        data = f.read(most + 1)
    if len(data) > most:
        raise Untrusted(f"{path} grew past the {most:,} bytes a cache file may have while it was read")
    return data


def digest_nofollow(
    path: Path, policy: TrustPolicy, most: int = MAX_FILE_BYTES, seen: dict[str, os.stat_result] | None = None
) -> str:
    """The SHA-256 of ``path`` (:func:`open_nofollow`), read a chunk at a time; the file as it
    was hashed (its ``fstat``) goes into ``seen`` under its name (:mod:`.handles`)."""
    digest = hashlib.sha256()
    read = 0
    with open_nofollow(path, policy, most) as f:
        if seen is not None:
            seen[path.name] = os.fstat(f.fileno())
        while chunk := f.read(_CHUNK):
            read += len(chunk)
            if read > most:
                raise Untrusted(
                    f"{path} grew past the {most:,} bytes a cache file may have while it was read"
                )
            digest.update(chunk)
    return digest.hexdigest()


def check_root(root: Path, policy: TrustPolicy) -> None:
    """Refuse the cache folder ``root`` (a link to it is fine: the user named it) as
    :func:`check_folder` does (once it exists), and when a folder above it, or a link on the
    way, lets someone the policy does not trust swap it (:mod:`.folders`): a check of what lies
    below such a folder holds only until they rename it."""
    if policy.mode != "any":
        try:
            check_path(root, policy.gid if policy.mode == "group" else None)
        except Exposed as exc:
            raise Untrusted(
                f"{root} lies below {exc.folder}, which {exc.why}: the cache could be swapped after "
                "it is checked; move it below folders only you and root can change "
                f"(--tile-cache-dir), or make {exc.folder} so (chmod go-w, or chmod +t as /tmp is)"
            ) from None
    if os.path.lexists(root):
        check_folder(root, policy, follow=True)


def check_folder(path: Path, policy: TrustPolicy, follow: bool = False) -> None:
    """Refuse a folder of the cache that is a link (unless ``follow``: the cache's own folder,
    which the user named) or writable by someone distrusted."""
    try:
        info = os.stat(path) if follow else os.lstat(path)
    except OSError as exc:
        raise Untrusted(f"{path} cannot be read: {exc.strerror}") from None
    policy.check_writers(info, path, follow=follow)
    if not stat.S_ISDIR(info.st_mode):
        raise Untrusted(f"{path} is not a folder")


def read_meta(
    directory: Path, name: str, policy: TrustPolicy, entry_file: str = ENTRY_FILE
) -> dict[str, Any]:
    """``directory``'s ``build.json`` (or ``entry_file``) once the folder, the file and, when
    a key is configured (:attr:`TrustPolicy.verifier`), its signature pass; ``name`` is what
    the entry is filed under, which a ``key`` in it must match (signed entries must have one,
    so a valid entry cannot be copied under another key)."""
    check_folder(directory, policy)
    if (verifier := policy.verifier) is not None:
        signing.ready(*verifier)
    raw = read_nofollow(directory / entry_file, policy)
    if verifier is not None:
        try:
            signature = read_nofollow(directory / (entry_file + ".sig"), policy)
        except Untrusted as exc:
            raise Untrusted(f"{directory} is not signed ({exc})") from None
        if not signing.verify(verifier[0], raw, signature, own=verifier[1]):
            raise Untrusted(f"{directory}: its signature does not match {verifier[0]}")
    try:
        meta = json.loads(raw)
    except ValueError:
        raise Untrusted(f"{directory / entry_file} is not JSON") from None
    if not isinstance(meta, dict):
        raise Untrusted(f"{directory / entry_file} is not an object")
    if meta.get("key", name if verifier is None else None) != name:
        raise Untrusted(f"{directory / entry_file} names key {meta.get('key')!r}, not {name}")
    return meta


def file_digests(
    directory: Path, policy: TrustPolicy, seen: dict[str, os.stat_result] | None = None
) -> dict[str, str]:
    """The SHA-256 of every file of ``directory`` but ``build.json`` and its signature, each
    read without following links (and, into ``seen``, how each was found); a link or a
    distrusted file anywhere refuses the entry."""
    found = {}
    for item in sorted(os.scandir(directory), key=lambda e: e.name):
        if item.name in (ENTRY_FILE, SIGNATURE_FILE):
            continue
        if item.is_dir(follow_symlinks=False):
            continue
        # a link, a FIFO, a device: refused, naming what it is (:func:`open_nofollow`)
        found[item.name] = digest_nofollow(directory / item.name, policy, seen=seen)
    return found


def tree_digests(directory: Path, policy: TrustPolicy, skip: frozenset[str] = frozenset()) -> dict[str, str]:
    """The SHA-256 of every file under ``directory`` by its path relative to it (``/``-separated),
    but the top-level names in ``skip``; each folder and file checked as an entry's are
    (:func:`check_folder`, :func:`digest_nofollow`), no link followed: a link anywhere refuses
    the tree."""
    found: dict[str, str] = {}
    for parent, folders, files in os.walk(directory, followlinks=False):
        here = Path(parent)
        check_folder(here, policy)
        for name in sorted(folders + files):
            path = here / name
            relative = path.relative_to(directory).as_posix()
            if path.is_symlink():
                raise Untrusted(f"{path} is a symbolic link")
            if name in files and relative not in skip:
                found[relative] = digest_nofollow(path, policy)
    return found


def check_tree(directory: Path, expected: object, policy: TrustPolicy, skip: frozenset[str]) -> None:
    """Refuse ``directory`` unless its files (:func:`tree_digests`) are exactly ``expected``
    (relative path -> SHA-256), naming the first file that differs, is missing or is extra."""
    if not isinstance(expected, dict):
        raise Untrusted(f"{directory} lists no checksums")
    found = tree_digests(directory, policy, skip)
    for relative in sorted(set(found) | set(expected)):
        if relative not in expected:
            raise Untrusted(f"{directory / relative} is not one of the entry's files")
        if relative not in found:
            raise Untrusted(f"{directory / relative} is missing")
        if found[relative] != expected[relative]:
            raise Untrusted(f"{directory / relative} fails its checksum")


def check_files(directory: Path, meta: dict[str, Any], policy: TrustPolicy) -> dict[str, os.stat_result]:
    """Refuse ``directory`` unless its files are exactly those ``meta`` lists, with their sums;
    how each file was found when it was hashed (:mod:`.handles` runs that file unread)."""
    expected = meta.get("sha256")
    if not isinstance(expected, dict) or not all(FILE_NAME.match(str(n)) for n in expected):
        raise Untrusted(f"{directory / ENTRY_FILE} lists no valid checksums")
    seen: dict[str, os.stat_result] = {}
    found = file_digests(directory, policy, seen)
    if found != expected:
        differ = sorted(n for n in set(found) | set(expected) if found.get(n) != expected.get(n))
        raise Untrusted(f"cache entry {directory} fails its checksums ({', '.join(differ[:3])})")
    return seen


def check_inputs(
    directory: Path, meta: dict[str, Any], expected: dict[str, str], policy: TrustPolicy
) -> None:
    """Refuse an entry whose manifest (``inputs``: what the build read, by digest) differs from
    ``expected`` (an empty digest: not known here, not compared). Without a key an entry from
    before manifests named inputs is taken, as it was; a signed one must name them."""
    recorded = meta.get("inputs")
    if recorded is None and policy.verifier is None:
        return
    if not isinstance(recorded, dict):
        raise Untrusted(f"{directory / ENTRY_FILE} does not list what the build read")
    for name, digest in expected.items():
        if digest and recorded.get(name) != digest:
            raise Untrusted(
                f"{directory} was built from {name} sha256:{str(recorded.get(name))[:16]}..., not from the "
                f"{name} checked here (sha256:{digest[:16]}...)"
            )


def write_meta(
    directory: Path, meta: dict[str, Any], policy: TrustPolicy, entry_file: str = ENTRY_FILE
) -> None:
    """Write ``build.json`` (or ``entry_file``) into ``directory`` (not yet published) and sign
    it, into ``entry_file.sig``, when a signing key is configured."""
    raw = json.dumps(meta, indent=1).encode()
    (directory / entry_file).write_bytes(raw)
    if policy.signing_key is not None:
        (directory / (entry_file + ".sig")).write_bytes(signing.sign(policy.signing_key, raw))


def umask() -> int:
    """This process's umask, read without changing it (another thread may be creating files)."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("Umask:"):
                return int(line.split()[1], 8)
    except (OSError, ValueError):
        pass
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def share_like_parent(directory: Path) -> None:
    """Give a folder made private by ``mkdtemp`` the mode any new folder would get (umask),
    keeping the parent's setgid bit: other users of a group-shared cache can read it."""
    mode = 0o777 & ~umask()
    if os.stat(directory.parent).st_mode & stat.S_ISGID:
        mode |= stat.S_ISGID
    os.chmod(directory, mode)


def lock_mode(root: Path) -> int:
    """Mode for lock files: group members of a setgid (group-shared) cache must open them too."""
    mode = 0o666 & ~umask()
    try:
        if os.stat(root).st_mode & stat.S_ISGID:
            mode |= 0o060
    except OSError:
        pass
    return mode
