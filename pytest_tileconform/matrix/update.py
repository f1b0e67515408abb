"""``--tile-update``: rewrite the ``expectations`` of a matrix to what was observed.

Only the lines of the expectation entries that change are touched, so comments, key order
and formatting elsewhere stay byte for byte. Each entry is written as one flow mapping
line. The new text is parsed again before it replaces the file, and the replacement is
atomic (:func:`pytest_tileconform.files.write_atomic`).

Several runs may update one matrix at once (shards of one matrix, a hand edit in an editor), so
the read-modify-write holds a lock on the matrix and applies this run's changes to the file as
it is *then*, not as it was when the run started: every run's changes and every hand edit
survive. A change whose expectation was edited meanwhile to something else is refused, never
overwritten (:func:`update_matrix`).
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from filelock import FileLock, Timeout
from pydantic import ValidationError
from ruamel.yaml.comments import CommentedMap

from ..files import write_atomic
from ..reasons import shorten, stable_reason
from ..verdict import UNRUN, Stage, Verdict
from .kinds import CaseKind
from .load import MatrixError, MatrixInvalid, load_matrix, parse_document
from .schema import Expectation

#: How long an update waits for another run's update of the same matrix to finish.
LOCK_TIMEOUT_S = 120.0


@dataclass(frozen=True)
class Change:
    case_id: str
    before: str  # "pass" or a stage
    after: str
    line: str | None  # the new entry line, None when the entry is removed

    def describe(self) -> str:
        return f"{self.case_id}: {self.before} -> {self.after}"


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
    body = ", ".join(
        f"{k}: {v}" if isinstance(v, int) or k == "stage" else f"{k}: {json.dumps(v)}"
        for k, v in fields.items()
    )
    return f"{json.dumps(case_id) if ':' in case_id else case_id}: {{{body}}}"


def _entry_spans(lines: list[str], block: CommentedMap, ids: list[str]) -> dict[str, tuple[int, int]]:
    """0-based [start, end) line span of each entry: its key line and more-indented continuations."""
    spans = {}
    for case_id in ids:
        start, col = block.lc.key(case_id)
        end = start + 1
        while end < len(lines):
            text = lines[end]
            stripped = text.lstrip()
            if not stripped or stripped.startswith("#") or len(text) - len(stripped) <= col:
                break
            end += 1
        spans[case_id] = (start, end)
    return spans


def apply_changes(path: Path, text: str, changes: Mapping[str, Change]) -> str:
    """The matrix text with ``changes`` applied to its ``expectations`` block."""
    document = parse_document(path, text)
    newline = "\r\n" if "\r\n" in text else "\n"
    lines = text.splitlines(keepends=True)
    if lines and not lines[-1].endswith("\n"):
        lines[-1] += newline
    block = document.get("expectations")
    entries = block if isinstance(block, CommentedMap) else CommentedMap()
    additions = [c.line for c in changes.values() if c.line is not None and c.case_id not in entries]
    if not entries:
        if additions:
            new_block = [f"expectations:{newline}", *(f"  {line}{newline}" for line in additions)]
            if "expectations" in document:
                at, _ = document.lc.key("expectations")
                lines[at : at + 1] = new_block
            else:
                lines.extend(new_block)
        return "".join(lines)
    if entries.fa.flow_style():
        at, _ = document.lc.key("expectations")
        raise ValueError(
            f"{path}:{at + 1}:1: --tile-update needs 'expectations' in block style, one entry per line"
        )
    indent = " " * entries.lc.key(next(iter(entries)))[1]
    spans = _entry_spans(lines, entries, list(entries))
    block_end = max(end for _, end in spans.values())
    lines[block_end:block_end] = [f"{indent}{line}{newline}" for line in additions]
    # Edit bottom-up so the spans above an edit keep their line numbers.
    for case_id, (start, end) in sorted(spans.items(), key=lambda item: -item[1][0]):
        change = changes.get(case_id)
        if change is not None:
            lines[start:end] = [] if change.line is None else [f"{indent}{change.line}{newline}"]
    return "".join(lines)


class UpdateRefused(Exception):
    """The matrix as a whole cannot be updated now (gone, read-only, locked too long); the
    message says why and nothing was written."""


@dataclass
class UpdateOutcome:
    """What one matrix update did: changes written, changes the file already had (a hand edit
    or another run wrote the same), and changes refused with the reason."""

    written: dict[str, Change] = field(default_factory=dict)
    already: dict[str, Change] = field(default_factory=dict)
    refused: dict[str, tuple[Change, str]] = field(default_factory=dict)

    def lines(self, path: Path) -> list[str]:
        """What the update of ``path`` did, change by change: the summary ``--tile-update`` and
        ``tileconform report apply`` print."""
        lines = [f"{path}: {len(self.written)} expectation(s) updated"]
        lines.extend(f"  {c.describe()}" for c in self.written.values())
        if self.already:
            lines.append(f"{path}: {len(self.already)} already as observed (edited meanwhile)")
            lines.extend(f"  {c.describe()}" for c in self.already.values())
        if self.refused:
            lines.append(f"{path}: {len(self.refused)} expectation(s) NOT updated (conflict):")
            lines.extend(f"  {c.describe()}: {why}" for c, why in self.refused.values())
        return lines


def lock_path(path: Path) -> Path:
    """The lock file of the matrix at ``path``: beside it, since the atomic replace needs that
    folder writable anyway (a read-only folder is refused either way), and every process that
    can see the matrix, on this host or over a shared file system, sees the same lock."""
    return path.with_name(f".{path.name}.lock")


@contextmanager
def matrix_lock(path: Path, timeout: float) -> Iterator[None]:
    """Hold the matrix's lock; the lock file is removed before the lock is let go, so no
    ``.NAME.lock`` stays beside a matrix (filelock sees a lock file unlinked under it and takes
    the new one)."""
    lock = FileLock(lock_path(path), timeout=timeout)
    try:
        lock.acquire()
    except PermissionError as exc:
        raise UpdateRefused(
            f"cannot make its lock file {lock_path(path).name} ({exc.strerror}): the folder is "
            "read-only, and the update replaces the file in that folder; nothing written"
        ) from None
    except Timeout:
        raise UpdateRefused(
            f"another --tile-update has held {lock_path(path).name} for over {timeout:.0f} s; nothing written"
        ) from None
    try:
        yield
    finally:
        try:
            lock_path(path).unlink(missing_ok=True)
        finally:
            lock.release()


def remove_leftovers(path: Path) -> list[Path]:
    """Remove the temporary files a killed update left beside the matrix
    (``.NAME.*.tmp``, :func:`..files.write_atomic`'s names). Called with the lock held, so no
    live update of this matrix is writing one."""
    removed = []
    for leftover in path.parent.glob(f".{path.name}.*.tmp"):
        if leftover.is_file() and not leftover.is_symlink():
            leftover.unlink(missing_ok=True)
            removed.append(leftover)
    return removed


def _wanted(path: Path, change: Change) -> Expectation | str | None:
    """The expectation ``change`` writes (None: the entry removed; its line as text where it is
    not a valid expectation, which equals nothing the file has and fails the final load)."""
    if change.line is None:
        return None
    try:
        document = parse_document(path, change.line)
        return Expectation.model_validate(dict(document[change.case_id]))
    except (MatrixInvalid, ValidationError, KeyError, TypeError, ValueError):
        return change.line


def _show(expectation: Expectation | str | None) -> str:
    if expectation is None:
        return "pass (no entry)"
    if isinstance(expectation, str):
        return expectation
    return json.dumps(expectation.model_dump(exclude_none=True))


def _read(path: Path) -> str:
    if not path.exists():
        raise UpdateRefused("the matrix is gone (deleted or moved during the run); nothing written")
    if path.stat().st_mode & 0o222 == 0:
        raise UpdateRefused("the matrix is read-only; nothing written (make it writable and rerun)")
    with path.open(encoding="utf-8", newline="") as handle:  # keep CRLF files CRLF
        return handle.read()


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
    _read(path)  # refuse before making a lock file beside a matrix that cannot be updated
    outcome = UpdateOutcome()
    with matrix_lock(path, lock_timeout):
        remove_leftovers(path)
        text = _read(path)
        try:
            current = load_matrix(path, kinds, text=text, stale_ok=True)
        except MatrixInvalid as exc:
            note = "the matrix no longer loads (changed during the run?); nothing written"
            raise MatrixInvalid([MatrixError(path, 1, 1, note), *exc.errors]) from None
        ids = {case.id for case in current.cases}
        now = current.model.expectations or {}
        to_write: dict[str, Change] = {}
        for case_id, change in changes.items():
            if case_id not in ids and change.line is not None:  # removing an entry needs no case
                outcome.refused[case_id] = (change, "the case is no longer in the matrix")
                continue
            wanted = _wanted(path, change)
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
        if to_write:
            new_text = apply_changes(path, text, to_write)
            load_matrix(path, kinds, text=new_text)
            write_atomic(path, new_text)
        outcome.written = to_write
    return outcome
