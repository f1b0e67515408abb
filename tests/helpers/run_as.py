"""Running a piece of a test as another real account: forked rather than exec'd, because the
interpreter of this venv may not be reachable by another user, and the job's answer comes back as
JSON through a pipe (an exception in the child is reported as ``crash`` and fails the test)."""

from __future__ import annotations

import grp
import json
import os
import pwd
from collections.abc import Callable, Mapping, Sequence
from typing import Any


def account_name(base: str) -> str:
    """``base`` made this xdist worker's own: workers run side by side, and one worker's
    ``usermod`` or ``userdel`` must not change an account another worker's test is using."""
    return base + os.environ.get("PYTEST_XDIST_WORKER", "")


def account_groups(user: pwd.struct_passwd) -> list[int]:
    """``user``'s primary and supplementary groups, read from the account database now."""
    return sorted({user.pw_gid, *(g.gr_gid for g in grp.getgrall() if user.pw_name in g.gr_mem)})


def run_as(
    uid: int,
    gid: int,
    groups: Sequence[int],
    job: Callable[[], dict[str, Any]],
    *,
    umask: int = 0o002,
    env: Mapping[str, str] | None = None,
    clear_cache_env: bool = False,
) -> dict[str, Any]:
    """``job()`` in a forked child that drops to ``uid``/``gid`` with ``groups`` and ``umask``,
    as ``preexec_fn`` would before an exec. ``clear_cache_env`` removes this process's
    ``TILECONFORM_CACHE*`` settings (the suite's own cache among them) before ``env`` is set."""
    readable, writable = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: never returns into pytest
        try:
            os.close(readable)
            os.setgroups(list(groups))
            os.setgid(gid)
            os.setuid(uid)
            os.umask(umask)
            if clear_cache_env:
                for name in [name for name in os.environ if name.startswith("TILECONFORM_CACHE")]:
                    del os.environ[name]
            os.environ.update(env or {})
            data = json.dumps(job()).encode()
        except BaseException as exc:  # reported to the parent
            data = json.dumps({"crash": repr(exc)}).encode()
        with os.fdopen(writable, "wb") as out:
            out.write(data)
        os._exit(0)
    os.close(writable)
    with os.fdopen(readable, "rb") as stream:
        data = stream.read()
    os.waitpid(pid, 0)
    result: dict[str, Any] = json.loads(data)
    assert "crash" not in result, result["crash"]
    return result


def as_account(
    user: pwd.struct_passwd, job: Callable[[], dict[str, Any]], *, clear_cache_env: bool = False
) -> dict[str, Any]:
    """``job()`` as ``user``, with the groups the account database gives it, umask 002."""
    return run_as(user.pw_uid, user.pw_gid, account_groups(user), job, clear_cache_env=clear_cache_env)
