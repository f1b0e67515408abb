"""Why a compile failed: the kernel's source, or the run's environment.

A failed compile becomes a cached verdict (``compile``) only when the compiler said what is
wrong with the source it was given: an ``error`` located in a file of the kernel's source (the
generated unit, and the folders its build names as source: the backend's library, its harness),
or ptxas refusing one of its kernels. Anything else says nothing about the kernel and a rerun
with the cause removed may well compile, so it is the run's: a compiler ended by a signal (the
out-of-memory killer), out of memory (nvcc under ``ulimit -v`` prints ``catastrophic error: out
of memory``, located in whatever header it was reading, and may exit 0 or 1 through a wrapper),
out of disk space, a tool or file the compile needs that is missing or cannot run, or a failure
with no diagnostic of the source at all. Those are never cached; the backend ends the session
with one line naming the cause and what to change.

What the compiler printed decides, before its exit status: the environment's causes are looked
for first in the whole output, since nvcc places an out-of-memory error in the file it was
reading, which may well be one of the release's.
"""

from __future__ import annotations

import enum
import os
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from .ninja import EXIT_MARK
from .nvcc_pipeline import NOTICE

#: how much of a compiler's line a verdict or a message keeps
LINE_CHARS = 500


class Cause(enum.Enum):
    """What a failed compile says (each reads after "the compile"): ``SOURCE`` is the kernel's;
    every other is the run's."""

    SOURCE = "failed in the kernel's source"
    SIGNAL = "was killed by a signal"
    MEMORY = "ran out of memory"
    SPACE = "ran out of disk space"
    TOOL = "could not run a tool or read a file it needs"
    UNKNOWN = "failed without a diagnostic of the kernel's source"


@dataclass(frozen=True)
class Failure:
    """A failed compile: its cause, the compiler's line that decided it, and the signal for
    :attr:`Cause.SIGNAL` (None where only the compiler's words say it was killed)."""

    cause: Cause
    line: str
    signal: int | None = None

    @property
    def environment(self) -> bool:
        """Whether the run, not the kernel, is to blame: never cached, never a verdict."""
        return self.cause is not Cause.SOURCE


#: the causes the compiler's own words name (a signal, memory, disk space, a tool): a rerun with
#: the cause removed may well pass, so not even a tool's limitation may be concluded from them
HOST_CAUSES = frozenset({Cause.SIGNAL, Cause.MEMORY, Cause.SPACE, Cause.TOOL})

_MEMORY = re.compile(
    r"out of memory|cannot allocate memory|virtual memory exhausted|std::bad_alloc|"
    r"memory allocation failure|failed to map segment from shared object|"
    r"insufficient memory|unable to allocate",
    re.IGNORECASE,
)
_SPACE = re.compile(r"no space left on device|disk quota exceeded", re.IGNORECASE)
_TOOL = re.compile(
    r"^(?:/bin/)?sh: (?:\d+: )?.*: (?:not found|Permission denied)$|command not found|"
    r"cannot execute|error while loading shared libraries|^nvcc fatal\b|"
    r"cannot open source file|No such file or directory$",
    re.IGNORECASE | re.MULTILINE,
)
#: gcc reports a compiler it ran that was killed (cc1plus and the OOM killer) as its own error
_GCC_KILLED = re.compile(r"Killed signal terminated program|internal compiler error: Killed")
_NVCC_DIED = re.compile(r"died due to signal (\d+)")
#: ``FILE(LINE): error: ...`` (nvcc's front end) or ``FILE:LINE[:COL]: error: ...`` (gcc)
_LOCATED = re.compile(r"^(?P<file>.+?)(?:\((?P<line>\d+)\)|:(?P<gline>\d+)(?::\d+)?): (?:fatal )?error\b")
#: ptxas refusing a kernel it was given (its resources): the kernel's code, not the host's
_PTXAS_KERNEL = re.compile(r"^ptxas error\s*: Entry function ")
_ANY_ERROR = re.compile(r"(error|static assertion failed|static_assert)", re.IGNORECASE)
#: exit statuses a shell gives a command it could not find (127) or run (126)
_NOT_RUN = (126, 127)


def exit_status(log: str) -> int | None:
    """The exit status a failed compile's log ends with (:data:`EXIT_MARK`), or None."""
    statuses = re.findall(rf"^{re.escape(EXIT_MARK)}(\d+)$", log, re.MULTILINE)
    return int(statuses[-1]) if statuses else None


def killed_by(log: str) -> int | None:
    """The signal that ended a failed build, from the exit status its log ends with (a shell
    reports death by signal N as 128 + N; nvcc as "died due to signal N"), or None."""
    if found := _NVCC_DIED.search(log):
        return int(found.group(1))
    status = exit_status(log)
    if status is not None and 128 < status <= 128 + 64:  # not 255, which compilers also use
        return status - 128
    return None


def first_error_line(log: str) -> str:
    """The first line that reads like an error (a summary of any failed compile), else the
    compiler's last; the lines this project's own tools add are not the compiler's."""
    lines = [line for line in log.splitlines() if not line.startswith((EXIT_MARK, NOTICE))]
    for line in lines:
        if _ANY_ERROR.search(line) and "warning" not in line.lower():
            return line.strip()[:LINE_CHARS]
    tail = [line for line in lines if line.strip()]
    return tail[-1].strip()[:LINE_CHARS] if tail else "compiler failed without output"


def _first(pattern: re.Pattern[str], log: str) -> str | None:
    for line in log.splitlines():
        if pattern.search(line):
            return line.strip()[:LINE_CHARS]
    return None


def _within(file: str, cwd: Path, sources: Sequence[Path]) -> bool:
    """Whether ``file`` (as the compiler named it, relative to ``cwd``) is one of ``sources``
    or lies under one of them."""
    path = os.path.normpath(os.path.join(cwd, file))
    candidates = {path, os.path.realpath(path)}
    for source in sources:
        for root in {os.path.normpath(source), os.path.realpath(source)}:
            if any(c == root or c.startswith(root.rstrip(os.sep) + os.sep) for c in candidates):
                return True
    return False


def source_diagnostic(log: str, cwd: Path, sources: Sequence[Path]) -> str | None:
    """The first line of ``log`` that is a diagnostic of the kernel's source, or None."""
    for raw in log.splitlines():
        line = raw.strip()
        if _PTXAS_KERNEL.match(line):
            return line[:LINE_CHARS]
        found = _LOCATED.match(line)
        if (
            found is not None
            and "catastrophic error" not in line
            and _within(found.group("file"), cwd, sources)
        ):
            return line[:LINE_CHARS]
    return None


def classify(log: str, cwd: Path, sources: Sequence[Path]) -> Failure:
    """What the output ``log`` of a compile that made nothing says, its files named relative
    to ``cwd``; ``sources`` are the files and folders whose diagnostics are the kernel's."""
    if (signum := killed_by(log)) is not None:
        return Failure(Cause.SIGNAL, first_error_line(log), signum)
    if (line := _first(_GCC_KILLED, log)) is not None:
        return Failure(Cause.SIGNAL, line, 9)
    if (line := _first(_MEMORY, log)) is not None:
        return Failure(Cause.MEMORY, line)
    if (line := _first(_SPACE, log)) is not None:
        return Failure(Cause.SPACE, line)
    if (line := _first(_TOOL, log)) is not None or exit_status(log) in _NOT_RUN:
        return Failure(Cause.TOOL, line or first_error_line(log))
    if (line := source_diagnostic(log, cwd, sources)) is not None:
        return Failure(Cause.SOURCE, line)
    return Failure(Cause.UNKNOWN, first_error_line(log))
