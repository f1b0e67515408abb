"""What every ``tileconform`` command shares: its exit statuses, its errors, and where data and
messages go (data to stdout or a file, messages to stderr)."""

from __future__ import annotations

import os
import sys
from pathlib import Path

EXIT_OK = 0
EXIT_FLAGGED = 1
EXIT_USAGE = 2
EXIT_ENVIRONMENT = 3


class CommandError(Exception):
    """A failure to report on stderr as ``tileconform: message``, with an exit status."""

    def __init__(self, message: str, status: int = EXIT_USAGE) -> None:
        super().__init__(message)
        self.status = status


def emit(text: str, output: Path | None) -> None:
    """Write data to ``output`` (by :func:`~pytest_tileconform.files.write_atomic`'s rules: a
    device such as /dev/null is written into, never replaced), or to stdout. A place that cannot
    be written, or a stdout that is closed or full, is a :class:`CommandError` (exit 2); a stdout
    whose reader left (``| head``) raises BrokenPipeError, which ends the command quietly."""
    if output is None:
        if sys.stdout is None:
            raise CommandError("cannot write to stdout: it is closed (give -o FILE)")
        try:
            sys.stdout.write(text if text.endswith("\n") else text + "\n")
            sys.stdout.flush()
        except BrokenPipeError:
            raise  # the reader left (``| head``): the command ends quietly
        except OSError as exc:  # /dev/full, a closed descriptor
            quiet_stdout()
            raise CommandError(f"cannot write to stdout: {exc.strerror or exc}") from None
        return
    from ..files import write_atomic

    try:
        output.parent.mkdir(parents=True, exist_ok=True)
        write_atomic(output, text if text.endswith("\n") else text + "\n")
    except OSError as exc:
        raise CommandError(f"cannot write {output}: {exc.strerror or exc}") from None
    message(f"wrote {output}")


def message(text: str) -> None:
    """``tileconform: text`` on stderr, each line of it so prefixed."""
    print(
        "\n".join(f"tileconform: {line}" for line in text.splitlines() or [""]), file=sys.stderr, flush=True
    )


def quiet_stdout() -> None:
    """Point stdout at /dev/null once it cannot be written (its reader left, as with ``| head``,
    or its device is full), so that the flush at exit does not print "Exception ignored"."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
    except (OSError, ValueError, AttributeError):
        pass
