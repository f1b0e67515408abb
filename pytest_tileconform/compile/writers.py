"""Who besides the user can change a file, as the system decides it: its owner, its mode bits,
its POSIX ACLs, and whether a group that may write it is the user's own.

Mode bits alone miss two things. A group named like the user is not necessarily private: it is
private only when the account database says it is the user's primary group and no other user
belongs to it (as primary or as supplementary group). And an ACL can grant write to a named
user or group whatever the mode says (``setfacl -m u:mallory:rw``, or a folder's default ACL
that every new file inherits). ACLs are read from the file's extended attributes
(``system.posix_acl_access`` and, for a folder, ``system.posix_acl_default``), so no ``getfacl``
is needed; a file system without ACLs has neither attribute.
"""

from __future__ import annotations

import errno
import grp
import os
import pwd
import stat
import struct
from dataclasses import dataclass
from functools import cache

ACL_ACCESS = "system.posix_acl_access"
ACL_DEFAULT = "system.posix_acl_default"
#: the on-disk ACL format (linux/posix_acl_xattr.h): a version word, then (tag, perm, id) entries
_ACL_VERSION = 2
_ACL_ENTRY = struct.Struct("<HHI")
_USER, _GROUP_OBJ, _GROUP, _MASK = 0x02, 0x04, 0x08, 0x10
_READ, _WRITE = 0x04, 0x02


@dataclass(frozen=True)
class Writer:
    """Someone other than the file's owner who may write it: ``kind`` is ``user``, ``group`` or
    ``other``; ``how`` says what grants it (``mode``, ``ACL`` or ``default ACL``)."""

    kind: str
    ident: int
    how: str

    def describe(self) -> str:
        if self.kind == "other":
            return f"every user ({self.how})"
        name = _name(self.kind, self.ident)
        return f"{self.kind} {name} ({self.how})"


def _name(kind: str, ident: int) -> str:
    try:
        found = pwd.getpwuid(ident).pw_name if kind == "user" else grp.getgrgid(ident).gr_name
    except KeyError:
        return str(ident)
    return f"{found} ({ident})"


@cache
def private_group(gid: int, uid: int) -> bool:
    """Whether ``gid`` is ``uid``'s private group by the account database: the user's primary
    group, no other user's primary group, and no other user listed as a member."""
    try:
        user = pwd.getpwuid(uid)
        group = grp.getgrgid(gid)
    except KeyError:
        return False
    if user.pw_gid != gid or set(group.gr_mem) - {user.pw_name}:
        return False
    return not any(entry.pw_gid == gid and entry.pw_uid != uid for entry in pwd.getpwall())


def _acl(target: int | str, name: str, follow: bool) -> bytes:
    try:
        if isinstance(target, int):  # a descriptor is the file itself, never a link
            return os.getxattr(target, name)
        return os.getxattr(target, name, follow_symlinks=follow)
    except OSError as exc:
        if exc.errno in (errno.ENODATA, errno.ENOTSUP, errno.EOPNOTSUPP, errno.ENOENT):
            return b""
        raise


def acl_writers(raw: bytes, how: str, perm_bit: int = _WRITE) -> list[Writer]:
    """Named users and groups (the owning group too) that an ACL in the kernel's xattr format
    lets write (or, with ``perm_bit`` 4, read), past its mask. Its entry for others is the
    mode's, which the caller reads."""
    if len(raw) < 4 or struct.unpack_from("<I", raw)[0] != _ACL_VERSION:
        return []
    size = _ACL_ENTRY.size
    entries = [_ACL_ENTRY.unpack_from(raw, at) for at in range(4, len(raw) - size + 1, size)]
    mask = next((perm for tag, perm, _ in entries if tag == _MASK), perm_bit)
    found = []
    for tag, perm, ident in entries:
        if not perm & perm_bit:
            continue
        if tag == _USER and mask & perm_bit:
            found.append(Writer("user", ident, how))
        elif tag == _GROUP and mask & perm_bit:
            found.append(Writer("group", ident, how))
        elif tag == _GROUP_OBJ and mask & perm_bit:
            found.append(Writer("group", -1, how))  # the file's own group: the caller fills it in
    return found


def writers(
    info: os.stat_result, target: int | str, follow: bool = False, read: bool = False
) -> list[Writer]:
    """Everyone but the owner who may write (with ``read``: read) the file ``target`` (a path
    or an open descriptor) whose stat is ``info``: by its mode, its ACL and, for a folder, its
    default ACL."""
    perm_bit, group_bit, other_bit = (
        (_READ, stat.S_IRGRP, stat.S_IROTH) if read else (_WRITE, stat.S_IWGRP, stat.S_IWOTH)
    )
    found = []
    access = _acl(target, ACL_ACCESS, follow)
    if access:  # with an ACL the group bits are its mask: the entries say who may write
        listed = acl_writers(access, "ACL", perm_bit)
    else:
        listed = []
        if info.st_mode & group_bit:
            listed.append(Writer("group", -1, "mode"))
    if info.st_mode & other_bit:
        listed.append(Writer("other", -1, "mode"))
    if stat.S_ISDIR(info.st_mode):
        listed += acl_writers(_acl(target, ACL_DEFAULT, follow), "default ACL", perm_bit)
    for writer in listed:
        if writer.kind == "group" and writer.ident == -1:
            writer = Writer("group", info.st_gid, writer.how)
        if writer not in found:
            found.append(writer)
    return found


def foreign(writer: Writer, uid: int, trusted_gid: int | None = None) -> bool:
    """Whether ``writer`` is someone other than ``uid`` and root, and not the trusted group."""
    if writer.kind == "user":
        return writer.ident not in (0, uid)
    if writer.kind == "group":
        return writer.ident != trusted_gid and not private_group(writer.ident, uid)
    return True
