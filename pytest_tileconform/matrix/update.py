"""``--tile-update``: rewrite the ``expectations`` of a matrix to what was observed.

Only the lines of the expectation entries that change are touched, so comments, key order
and formatting elsewhere stay byte for byte. Each entry is written as one flow mapping
line. The new text is parsed again before it replaces the file, and the replacement is
atomic (:func:`pytest_tileconform.files.write_atomic`).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from ruamel.yaml.comments import CommentedMap

from ..files import write_atomic
from ..reasons import shorten, stable_reason
from ..verdict import Stage, Verdict
from .load import load_matrix, parse_document


@dataclass(frozen=True)
class Change:
    case_id: str
    before: str  # "pass" or a stage
    after: str
    line: str | None  # the new entry line, None when the entry is removed

    def describe(self) -> str:
        return f"{self.case_id}: {self.before} -> {self.after}"


def expectation_change(case_id: str, expected: str, verdict: Verdict) -> Change | None:
    """The edit that makes ``expected`` agree with ``verdict``, or None if it already does.

    A verdict that could not judge the expected stage (a virtual device and an expected
    ``run`` failure) changes nothing.
    """
    observed = verdict.outcome
    if observed == expected:
        return None
    if observed == "pass":
        if Stage(expected).order > verdict.judged_through.order:
            return None
        return Change(case_id, expected, "pass", None)
    return Change(case_id, expected, observed, entry_line(case_id, verdict))


def entry_line(case_id: str, verdict: Verdict) -> str:
    """The expectation entry of ``verdict`` as one flow-mapping line.

    Status and reason are the verdict's whole texts with stable names for temporary and
    installed places (:func:`.reasons.stable_reason`), so a rerun elsewhere reads the same; a
    reason of several lines stays on the entry's one line, its line breaks written as ``\\n``.
    Only a reason longer than a matrix line should be is cut (:func:`.reasons.shorten`).
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


def update_matrix(path: Path, changes: Mapping[str, Change]) -> None:
    """Apply ``changes`` to the matrix at ``path``; the result must load cleanly before it is written."""
    with path.open(encoding="utf-8", newline="") as handle:  # keep CRLF files CRLF
        text = handle.read()
    new_text = apply_changes(path, text, changes)
    load_matrix(path, text=new_text)
    write_atomic(path, new_text)
