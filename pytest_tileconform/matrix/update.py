"""``--tile-update``: rewrite the ``expectations`` of a matrix to what was observed.

Only the lines of the expectation entries that change are touched (:mod:`.rewrite`), so
comments, key order and formatting elsewhere stay byte for byte. Each entry is written as one
flow mapping line. The new text is parsed again before it is written, and the write is atomic
(:func:`pytest_tileconform.files.write_atomic`), or in place for a hard-linked matrix, whose
other names must see it too.

Several runs may update one matrix at once (shards of one matrix, a hand edit in an editor), so
the read-modify-write holds a lock on the matrix file (:func:`matrix_lock`) and applies this
run's changes to the file as it is *then*, not as it was when the run started: every run's
changes and every hand edit survive. A change whose expectation was edited meanwhile to
something else is refused, never overwritten (:func:`update_matrix`); a file changed between
the read and the write (an editor takes no lock) is not written at all (:class:`ChangedMeanwhile`).
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import stat
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from ..files import remove_stale_tmp, write_atomic, write_in_place
from ..reasons import MATRIX_REASON_LIMIT, shorten, stable_reason
from ..verdict import UNRUN, Stage, Verdict
from .bounds import MAX_BYTES
from .kinds import CaseKind
from .load import MatrixError, MatrixInvalid, load_matrix, parse_document
from .rewrite import Change, apply_changes, unrewritable
from .schema import Expectation

#: How long an update waits for another run's update of the same matrix to finish.
LOCK_TIMEOUT_S = 120.0


#: what ``--tile-update`` shows for the entry of an id that is no longer a case of its matrix
PRUNED = "removed: no longer a case of this matrix"


def prune_change(case_id: str, expectation: Expectation) -> Change:
    """The removal of the expectation of ``case_id``, which is no case of its matrix (its tile
    or an axis was deleted): ``--tile-update`` removes such entries, as a snapshot tool deletes
    the snapshots no test uses, and names each in its summary."""
    return Change(case_id, expectation.stage, PRUNED, None)


def expectation_change(case_id: str, expected: str, verdict: Verdict) -> Change | None:
    """The edit that makes ``expected`` agree with ``verdict``, or None if it already does.

    A verdict that could not judge the expected stage (a virtual device and an expected
    ``run`` failure) changes nothing. A pass whose kernel did not run removes the entry as a
    pass does, and is shown as what it is (:data:`~..verdict.UNRUN`), never as ``pass``.
    """
    observed = verdict.outcome
    if observed == expected:
        return None
    if observed == "pass":
        if Stage(expected).order > verdict.judged_through.order:
            return None
        shown = f"{UNRUN} (entry removed: expect a pass; the kernel did not run)" if verdict.unrun else "pass"
        return Change(case_id, expected, shown, None)
    return Change(case_id, expected, observed, entry_line(case_id, verdict))


def entry_line(case_id: str, verdict: Verdict) -> str:
    """The expectation entry of ``verdict`` as one flow-mapping line.

    Status and reason are the verdict's whole texts with stable names for temporary and
    installed places (:func:`..reasons.stable_reason`), so a rerun elsewhere reads the same; a
    reason of several lines stays on the entry's one line, its line breaks written as ``\\n``.
    Only a reason longer than a matrix line should be is cut (:func:`..reasons.shorten`).
    """
    fields: dict[str, str | int] = {"stage": verdict.outcome}
    if verdict.status:
        fields["status"] = stable_reason(verdict.status)
    if verdict.smem_requested is not None:
        fields["smem"] = verdict.smem_requested
    if verdict.smem_limit is not None:
        fields["limit"] = verdict.smem_limit
    fields["source"] = verdict.source
    reason = stable_reason(verdict.detail)
    if reason:
        fields["reason"] = shorten(reason)
    return render_entry(case_id, fields)


def render_entry(case_id: str, fields: Mapping[str, str | int]) -> str:
    """One expectation entry line of ``fields`` (stage first, then as given)."""
    body = ", ".join(
        f"{k}: {v}" if isinstance(v, int) or k == "stage" else f"{k}: {json.dumps(v)}"
        for k, v in fields.items()
    )
    return f"{json.dumps(case_id) if ':' in case_id else case_id}: {{{body}}}"


def _fitted(path: Path, text: str, changes: dict[str, Change], parsed: Mapping[str, Any]) -> tuple[str, str]:
    """The new text, and a note when the reasons it writes were cut to keep it within the
    matrix's byte bound (:data:`.bounds.MAX_BYTES`): the bound is for what a user writes, and an
    update of thousands of failures with long reasons (a compiler's log each) must still be
    written, and load again; the results file keeps every reason whole."""
    new_text = apply_changes(path, text, changes)
    limit = MATRIX_REASON_LIMIT
    while len(new_text) > MAX_BYTES and limit > 0:
        limit //= 4
        cut = {}
        for case_id, change in changes.items():
            entry = parsed.get(case_id)
            reason = entry.get("reason") if isinstance(entry, Mapping) else None
            if entry is None or change.line is None or not isinstance(reason, str) or len(reason) <= limit:
                cut[case_id] = change
                continue
            fields = {k: v for k, v in entry.items() if k != "reason"}
            if limit:
                fields["reason"] = shorten(reason, limit)
            cut[case_id] = replace(change, line=render_entry(case_id, fields))
        new_text = apply_changes(path, text, cut)
    if limit == MATRIX_REASON_LIMIT:
        return new_text, ""
    kept = f"cut to {limit} characters" if limit else "left out"
    return new_text, (
        f"the reasons of the entries written are {kept} to keep the matrix within its {MAX_BYTES:,}-"
        "byte bound (the results file keeps them whole)"
    )


class UpdateRefused(Exception):
    """The matrix as a whole cannot be updated now (gone, read-only, locked too long); the
    message says why and nothing was written."""


class ChangedMeanwhile(UpdateRefused):
    """The matrix changed between the update's read and its write (an editor does not take the
    lock): nothing written, the change kept. ``report apply`` exits 1 for it, as for an entry
    edited meanwhile."""


@dataclass
class UpdateOutcome:
    """What one matrix update did: changes written, changes the file already had (a hand edit
    or another run wrote the same), and changes refused with the reason."""

    written: dict[str, Change] = field(default_factory=dict)
    already: dict[str, Change] = field(default_factory=dict)
    refused: dict[str, tuple[Change, str]] = field(default_factory=dict)
    note: str = ""  # what the write changed of what was observed (reasons cut to fit the bound)

    def lines(self, path: Path) -> list[str]:
        """What the update of ``path`` did, change by change: the summary ``--tile-update`` and
        ``tileconform report apply`` print."""
        lines = [f"{path}: {len(self.written)} expectation(s) updated"]
        lines.extend(f"  {c.describe()}" for c in self.written.values())
        if self.note:
            lines.append(f"{path}: {self.note}")
        if self.already:
            lines.append(f"{path}: {len(self.already)} already as observed (edited meanwhile)")
            lines.extend(f"  {c.describe()}" for c in self.already.values())
        if self.refused:
            lines.append(f"{path}: {len(self.refused)} expectation(s) NOT updated (conflict):")
            lines.extend(f"  {c.describe()}: {why}" for c, why in self.refused.values())
        return lines


@dataclass(frozen=True)
class Seen:
    """The matrix file as the update read it: which file (device and inode) and its bytes."""

    device: int
    inode: int
    links: int
    digest: str


def _seen(fd: int, data: bytes) -> Seen:
    info = os.fstat(fd)
    return Seen(info.st_dev, info.st_ino, info.st_nlink, hashlib.sha256(data).hexdigest())


@contextmanager
def matrix_lock(path: Path, timeout: float) -> Iterator[int]:
    """Hold the lock of the matrix at ``path`` and give the open file's descriptor.

    The lock is on the matrix file itself (``flock``), not on a file beside it, so every name of
    it takes the same lock: a symlink, another relative path, and a hard link in another folder,
    whose update would otherwise run alongside this one and keep only one run's entries. An
    update replaces the file by a rename, so a waiter that gets the lock on the file the name no
    longer leads to takes the lock again on the file that is there now. Nothing is left beside
    the matrix, and a read-only folder needs no lock file."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            fd = os.open(path, os.O_RDWR | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC)
        except FileNotFoundError:
            raise UpdateRefused(GONE) from None
        except PermissionError:
            raise UpdateRefused(READ_ONLY) from None
        try:
            while True:
                try:
                    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                    break
                except BlockingIOError:
                    if time.monotonic() > deadline:
                        raise UpdateRefused(
                            f"another --tile-update has held the lock on {path.name} for over "
                            f"{timeout:.0f} s; nothing written"
                        ) from None
                    time.sleep(0.05)
            held, now = os.fstat(fd), _stat(path)
            if (held.st_dev, held.st_ino) == (now.st_dev, now.st_ino):
                break
        except BaseException:
            os.close(fd)
            raise
        os.close(fd)  # replaced while this waited: lock the file that is there now
    try:
        yield fd
    finally:
        os.close(fd)


def _stat(path: Path) -> os.stat_result:
    try:
        return path.stat()
    except FileNotFoundError:
        raise UpdateRefused(GONE) from None


def remove_leftovers(path: Path) -> list[Path]:
    """Remove the temporary files a killed update left beside the matrix: only this tool's, and
    only with proof that no writer has them (:func:`..files.remove_stale_tmp`)."""
    return remove_stale_tmp(path.resolve().parent, path.resolve().name)


def _wanted(path: Path, change: Change, parsed: Mapping[str, Any]) -> Expectation | str | None:
    """The expectation ``change`` writes (None: the entry removed; its line as text where it is
    not a valid expectation, which equals nothing the file has and fails the final load).
    ``parsed``: every change's line parsed at once (:func:`_parse_lines`), or empty."""
    if change.line is None:
        return None
    try:
        entry = parsed[change.case_id] if change.case_id in parsed else parse_document(path, change.line)
        if change.case_id not in parsed:
            entry = entry[change.case_id]
        return Expectation.model_validate(dict(entry))
    except (MatrixInvalid, ValidationError, KeyError, TypeError, ValueError):
        return change.line


def _parse_lines(path: Path, changes: Mapping[str, Change]) -> dict[str, Any]:
    """The lines of ``changes`` parsed as a few documents of up to half the byte bound each (not
    one parse per line: an update of thousands of entries); a part that fails to parse is left
    out, and :func:`_wanted` then parses each of its lines alone."""
    parsed: dict[str, Any] = {}
    lines = [f"  {c.line}\n" for c in changes.values() if c.line is not None]
    while lines:
        size, n = 0, 0
        while n < len(lines) and (n == 0 or size + len(lines[n]) < MAX_BYTES // 2):
            size += len(lines[n])
            n += 1
        part, lines = lines[:n], lines[n:]
        try:  # under `expectations`, where the node bound counts entries (:mod:`.bounds`)
            document = parse_document(path, "expectations:\n" + "".join(part))
        except MatrixInvalid:
            continue
        entries = document.get("expectations") if isinstance(document, Mapping) else None
        if isinstance(entries, Mapping):
            parsed.update(entries)
    return parsed


def _show(expectation: Expectation | str | None) -> str:
    if expectation is None:
        return "pass (no entry)"
    if isinstance(expectation, str):
        return expectation
    return json.dumps(expectation.model_dump(exclude_none=True))


GONE = "the matrix is gone (deleted or moved during the run); nothing written"
READ_ONLY = "the matrix is read-only; nothing written (make it writable and rerun)"
CHANGED = (
    "the matrix was changed while this update wrote it (a hand edit saved meanwhile?): nothing "
    "written, the change kept; rerun the update"
)


def _read(path: Path) -> None:
    """Refuse a matrix that cannot be updated, before anything else is done."""
    if _stat(path).st_mode & 0o222 == 0:
        raise UpdateRefused(READ_ONLY)


def _read_locked(fd: int) -> tuple[str, Seen]:
    """The text of the locked matrix and what was read (:class:`Seen`)."""
    info = os.fstat(fd)
    if not stat.S_ISREG(info.st_mode):  # swapped for a FIFO or a device during the run
        raise UpdateRefused("the matrix is no longer a regular file; nothing written")
    data = os.pread(fd, info.st_size + 1, 0)
    return data.decode("utf-8"), _seen(fd, data)  # CRLF files stay CRLF


def _unchanged_since(path: Path, seen: Seen) -> Callable[[], None]:
    """A check, run just before the write, that ``path`` is still the file and bytes the update
    read: an editor does not take the lock, and a hand edit saved in place after the read would
    otherwise be overwritten. It raises :class:`ChangedMeanwhile`."""

    def check() -> None:
        try:
            with path.open("rb") as handle:
                now = _seen(handle.fileno(), handle.read())
        except FileNotFoundError:
            raise ChangedMeanwhile(GONE) from None
        if now != seen:  # another file, other bytes, or a hard link made meanwhile (a rename would split it)
            raise ChangedMeanwhile(CHANGED)

    return check


def _write(path: Path, text: str, seen: Seen) -> None:
    """Write the new text: a hard-linked matrix in place, so that every name of it sees it (as
    an editor writes a hard-linked file; the lock on the file keeps updates through its names
    apart), any other by an atomic rename."""
    check = _unchanged_since(path, seen)
    try:
        if seen.links > 1:
            write_in_place(path, text, before_write=check)
        else:
            write_atomic(path, text, before_replace=check)
    except PermissionError as exc:
        raise UpdateRefused(
            f"cannot write beside it ({exc.strerror}): the folder is read-only, and the update "
            "replaces the file in that folder; nothing written"
        ) from None


def update_matrix(
    path: Path,
    kinds: Mapping[str, CaseKind],
    changes: Mapping[str, Change],
    started: Mapping[str, Expectation | None] | None = None,
    *,
    lock_timeout: float = LOCK_TIMEOUT_S,
) -> UpdateOutcome:
    """Apply ``changes`` to the matrix at ``path`` as it is now; the result must load cleanly
    before it is written.

    ``started`` is each changed case's expectation as the run loaded it. Under the lock the file
    is read again; a change is written where the file still has what the run started with,
    counted as already done where the file has what it would write, and refused where the
    expectation was edited meanwhile to a third thing, or the case left the matrix. Without
    ``started`` nothing counts as edited meanwhile. Raises :class:`UpdateRefused` for a matrix
    that is gone, read-only or locked too long, and MatrixInvalid for one that no longer loads;
    both write nothing.
    """
    _read(path)  # refuse a matrix that cannot be updated before taking its lock
    outcome = UpdateOutcome()
    with matrix_lock(path, lock_timeout) as fd:
        remove_leftovers(path)
        _read(path)
        text, seen = _read_locked(fd)
        try:
            current = load_matrix(path, kinds, text=text, stale_ok=True)
        except MatrixInvalid as exc:
            note = "the matrix no longer loads (changed during the run?); nothing written"
            raise MatrixInvalid([MatrixError(path, 1, 1, note), *exc.errors]) from None
        ids = {case.id for case in current.cases}
        now = current.model.expectations or {}
        to_write: dict[str, Change] = {}
        parsed = _parse_lines(path, changes)
        for case_id, change in changes.items():
            if case_id not in ids and change.line is not None:  # removing an entry needs no case
                outcome.refused[case_id] = (change, "the case is no longer in the matrix")
                continue
            wanted = _wanted(path, change, parsed)
            there = now.get(case_id)
            if there == wanted:
                outcome.already[case_id] = change
            elif started is None or there == started.get(case_id):
                to_write[case_id] = change
            else:
                outcome.refused[case_id] = (
                    change,
                    f"its expectation was edited during the run (started {_show(started.get(case_id))}, "
                    f"now {_show(there)}); kept, not overwritten with {_show(wanted)}",
                )
        for case_id, why in unrewritable(text, to_write).items():
            outcome.refused[case_id] = (to_write.pop(case_id), why)
        if to_write:
            new_text, outcome.note = _fitted(path, text, to_write, parsed)
            load_matrix(path, kinds, text=new_text)
            _write(path, new_text, seen)
        outcome.written = to_write
    return outcome
