"""The folders a cache or a key file is reached through, from ``/`` down: none may let someone
the user does not trust replace what lies below it.

Checking a cache's own folder and entries is not enough when a folder above them is someone
else's to change: they rename the checked cache away after the check and put theirs in its place,
or swap a link on the way, and every check made before is void. So, as ssh's StrictModes does
for its key files (``safe_path``), every folder from ``/`` down must belong to root or the user
and be writable by no one else (by mode or ACL, :mod:`.writers`; a trusted group may, for a cache
shared with it). A sticky folder others can write (``/tmp``) is fine: there only root, the
folder's owner and an item's owner may rename or remove the item, and every item passed through
must belong to root or the user. A link on the way (the user may name a cache through one) must
belong to them too, and is followed: the folders of its target are checked in turn.

A path is checked once per session, before anything under it is believed: with every folder
above it closed to others, what is checked stays where it was checked.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

from .writers import foreign, writers

#: links followed on one path at most (the kernel's own limit), so a loop of links ends
MAX_LINKS = 40


class Exposed(Exception):
    """A folder or link on the way lets someone untrusted replace what lies below it.
    ``folder``: which one; ``why``: who can (``is writable by every user (mode)``)."""

    def __init__(self, folder: Path, why: str) -> None:
        super().__init__(f"{folder} {why}")
        self.folder = folder
        self.why = why


def check_path(path: Path, trusted_gid: int | None = None) -> None:
    """Raise :class:`Exposed` for the first folder from ``/`` to ``path`` (not ``path`` itself,
    which its caller checks as a cache or a key) that someone other than the user, root and the
    group ``trusted_gid`` could change, or that belongs to someone else; links on the way are
    checked and followed. Where the path stops existing the check stops: the user makes the rest.
    """
    uid = os.geteuid()
    # ``..`` kept as a part: it is the kernel's (after a link), not a lexical one
    full = path if path.is_absolute() else Path(os.getcwd()) / path
    pending = list(reversed(full.parts[1:]))
    current = Path("/")
    _check(current, os.lstat(current), uid, trusted_gid)
    links = 0
    while pending:
        name = pending.pop()
        if name == "..":
            current = current.parent  # checked on the way down
            continue
        candidate = current / name
        try:
            info = os.lstat(candidate)
        except FileNotFoundError:
            return
        except OSError as exc:
            raise Exposed(candidate, f"cannot be checked ({exc.strerror})") from None
        if stat.S_ISLNK(info.st_mode):
            _owner(candidate, info, uid, trusted_gid, "is a link belonging")
            links += 1
            if links > MAX_LINKS:
                raise Exposed(candidate, f"leads through more than {MAX_LINKS} links")
            target = Path(os.readlink(candidate))
            if target.is_absolute():
                current = Path("/")
            pending.extend(reversed([part for part in target.parts if part not in ("/", ".")]))
            continue
        if not pending or not stat.S_ISDIR(info.st_mode):
            return  # ``path`` itself, or a file where a folder was expected: its caller's to refuse
        _check(candidate, info, uid, trusted_gid)
        current = candidate


def _owner(
    path: Path, info: os.stat_result, uid: int, trusted_gid: int | None, what: str = "belongs"
) -> None:
    if info.st_uid not in (0, uid) and not (trusted_gid is not None and info.st_gid == trusted_gid):
        raise Exposed(path, f"{what} to uid {info.st_uid}")


def _check(folder: Path, info: os.stat_result, uid: int, trusted_gid: int | None) -> None:
    """Refuse ``folder`` (stat ``info``) unless it is root's, the user's or the trusted group's,
    and no one else may write it (a sticky folder: no one else may rename what the user owns)."""
    _owner(folder, info, uid, trusted_gid)
    if info.st_mode & stat.S_ISVTX:
        return
    for writer in writers(info, str(folder)):
        if foreign(writer, uid, trusted_gid):
            raise Exposed(folder, f"is writable by {writer.describe()}")
