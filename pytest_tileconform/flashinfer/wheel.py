"""A FlashInfer wheel read without trusting it: its name and version from METADATA, and the members
to unpack, checked as a whole listing before anything is written (:func:`check_members`: no
symlinks, no paths out of the target, no name twice or a file and a folder at once, no zip bomb).
:mod:`.releases` unpacks what this lets through into the release cache.
"""

from __future__ import annotations

import fnmatch
import hashlib
import re
import zipfile
from collections.abc import Sequence
from pathlib import Path, PurePosixPath

from .sources import DISTRIBUTION


class ReleaseError(RuntimeError):
    """A release could not be fetched, read or unpacked; the message says which and why."""


#: The largest member unpacked, and all unpacked members together, by the sizes the zip's
#: headers declare (``zipfile`` never reads past them). FlashInfer 0.7.4's largest header is
#: under 2 MB and what is unpacked about 150 MB; a member or a total past these is a zip bomb
#: or not FlashInfer, refused before anything is written.
MAX_MEMBER_BYTES = 64 * 1024 * 1024
MAX_UNPACKED_BYTES = 2 * 1024 * 1024 * 1024
#: The most members a wheel may have, and the largest METADATA read.
MAX_MEMBERS = 200_000
MAX_METADATA_BYTES = 4 * 1024 * 1024


def sha256_file(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def wheel_version(zf: zipfile.ZipFile, wheel: Path) -> str:
    """``Version:`` of the wheel's METADATA; also checks that it is flashinfer-python."""
    metas = [n for n in zf.namelist() if re.fullmatch(r"[^/]+\.dist-info/METADATA", n)]
    if len(metas) != 1:
        raise ReleaseError(f"{wheel}: not a wheel (expected one *.dist-info/METADATA, found {len(metas)})")
    if zf.getinfo(metas[0]).file_size > MAX_METADATA_BYTES:
        raise ReleaseError(f"{wheel}: {metas[0]} is larger than {MAX_METADATA_BYTES:,} bytes: not a wheel's")
    name = version = None
    for line in zf.read(metas[0]).decode("utf-8", "replace").splitlines():
        if not line.strip():
            break  # end of the headers
        key, _, value = line.partition(":")
        if key == "Name":
            name = value.strip()
        elif key == "Version":
            version = value.strip()
    if name is None or re.sub(r"[-_.]+", "-", name).lower() != DISTRIBUTION:
        raise ReleaseError(f"{wheel}: {metas[0]} names distribution {name!r}, not {DISTRIBUTION}")
    if not version:
        raise ReleaseError(f"{wheel}: {metas[0]} has no Version")
    return version


#: The longest member name unpacked, and the longest part of one: Linux's NAME_MAX and far less
#: than its PATH_MAX (the cache's own path comes before it); FlashInfer's longest is under 200.
MAX_PART_BYTES = 255
MAX_NAME_BYTES = 1024


def wanted(name: str, members: Sequence[str]) -> bool:
    """Whether the wheel's member ``name`` is one of ``members``: the name itself, under a folder
    (``.../``), or matched by a pattern with ``*`` (which also matches ``/``)."""
    return any(
        name == m or (m.endswith("/") and name.startswith(m)) or ("*" in m and fnmatch.fnmatchcase(name, m))
        for m in members
    )


def _safe_member(name: str, members: Sequence[str]) -> PurePosixPath | None:
    """The member's path if it is one of ``members`` and stays inside the target."""
    if not wanted(name, members):
        return None
    path = PurePosixPath(name)
    if path.is_absolute() or ".." in path.parts or name.endswith("/"):
        return None
    return path


def _is_symlink(info: zipfile.ZipInfo) -> bool:
    return info.create_system == 3 and (info.external_attr >> 16) & 0o170000 == 0o120000


def check_members(
    zf: zipfile.ZipFile, wheel: Path, members: Sequence[str]
) -> list[tuple[zipfile.ZipInfo, PurePosixPath]]:
    """The members to unpack, after checking the whole listing, before anything is written.

    Refused (:class:`ReleaseError`, naming the member): a symlink member anywhere in the wheel;
    among the members to unpack, two names that are one file on a case-insensitive file system
    or the same name twice, a name that is a file and a folder at once, a member larger than
    :data:`MAX_MEMBER_BYTES`, or more than :data:`MAX_UNPACKED_BYTES` in all. A member with an
    absolute or ``..`` path is never unpacked (:func:`_safe_member`). ``members``: what to unpack."""
    infos = zf.infolist()
    if len(infos) > MAX_MEMBERS:
        raise ReleaseError(f"{wheel}: {len(infos):,} members, more than a wheel of FlashInfer has")
    chosen: list[tuple[zipfile.ZipInfo, PurePosixPath]] = []
    seen: dict[str, str] = {}
    folders: dict[str, str] = {}
    total = 0
    for info in infos:
        if _is_symlink(info):
            raise ReleaseError(f"{wheel}: member {info.filename!r} is a symlink; a wheel has none, refused")
        if info.filename.endswith("/") and _safe_member(info.filename.rstrip("/"), members) is not None:
            folders.setdefault(str(PurePosixPath(info.filename)).lower(), info.filename)
            continue
        member = _safe_member(info.filename, members)
        if member is None:
            continue
        key = str(member).lower()
        if key in seen:
            raise ReleaseError(
                f"{wheel}: members {seen[key]!r} and {info.filename!r} name one file "
                "(on a case-insensitive file system, or twice), refused"
            )
        seen[key] = info.filename
        for parent in member.parents:
            if str(parent) != ".":
                folders.setdefault(str(parent).lower(), info.filename)
        if info.flag_bits & 0x1:
            raise ReleaseError(f"{wheel}: member {info.filename!r} is encrypted; a wheel's are not, refused")
        if len(info.filename.encode()) > MAX_NAME_BYTES or any(
            len(part.encode()) > MAX_PART_BYTES for part in member.parts
        ):
            raise ReleaseError(
                f"{wheel}: member {info.filename[:80]!r}... has a name longer than a file system takes "
                f"({MAX_PART_BYTES} bytes a part, {MAX_NAME_BYTES} in all), refused before unpacking"
            )
        if info.file_size > MAX_MEMBER_BYTES:
            raise ReleaseError(
                f"{wheel}: member {info.filename!r} unpacks to {info.file_size:,} bytes, more than the "
                f"{MAX_MEMBER_BYTES:,} a source file may have (a zip bomb?), refused before unpacking"
            )
        total += info.file_size
        if total > MAX_UNPACKED_BYTES:
            raise ReleaseError(
                f"{wheel}: the sources unpack to more than {MAX_UNPACKED_BYTES:,} bytes (a zip bomb?), "
                "refused before unpacking"
            )
        chosen.append((info, member))
    for key, name in seen.items():
        if key in folders:
            raise ReleaseError(
                f"{wheel}: {name!r} is a file and also the folder of {folders[key]!r}, refused"
            )
    return chosen
