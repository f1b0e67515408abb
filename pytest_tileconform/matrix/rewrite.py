"""The text edit of ``--tile-update`` and ``report apply``: the matrix text with some expectation
entries written, rewritten or removed, and every other byte as it was.

The user's file is the record, so the edit works on its lines, never by dumping a parsed
document: comments, blank lines, key order and quoting elsewhere stay byte for byte. Where an
entry is and where it ends comes from the composed YAML nodes (their start and end marks), so
an entry written in any block form the loader accepts (one flow line, a block mapping with
comments or blank lines inside, a ``? key`` entry, an indented root, a ``...`` document end)
is found whole. The comments of a rewritten entry stay with it (its trailing comment on the new
line, the others on lines above), ``expectations:``'s own comment stays on its line, and a
removed entry goes whole, with the comments inside it (those on lines between entries stay).
A form that cannot be edited as lines (``expectations`` or the root as one flow mapping, an
explicit ``? expectations`` key with no entries) is refused with :class:`Unrewritable`, and
an entry whose anchor another entry uses (``&x`` ... ``*x``) is not rewritten
(:func:`unrewritable`): rewriting it would change the other.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ruamel.yaml import YAML
from ruamel.yaml.nodes import MappingNode, Node, ScalarNode, SequenceNode

from .bounds import MAX_DEPTH, BoundedComposer


@dataclass(frozen=True)
class Change:
    """One expectation entry's edit: what an update writes and its summary shows."""

    case_id: str
    before: str  # "pass" or a stage
    after: str
    line: str | None  # the new entry line, None when the entry is removed

    def describe(self) -> str:
        return f"{self.case_id}: {self.before} -> {self.after}"


#: A ``...`` document end marker line.
_DOCUMENT_END = re.compile(r"\.\.\.(\s|$)")


class Unrewritable(ValueError):
    """The matrix is written in a YAML form whose expectations cannot be edited line by line;
    the message names the form, where it is and what to write instead."""


@dataclass(frozen=True)
class Entry:
    """One expectation entry of the text: 0-based lines [start, end), its indentation and the
    comments its lines hold."""

    start: int
    end: int
    indent: str
    trailing: list[str]  # end-of-line comments, in order, each from its '#'
    whole: list[str]  # lines that are only a comment, stripped


def _compose(text: str) -> Any:
    yaml = YAML(typ="rt")
    yaml.allow_duplicate_keys = False
    yaml.max_depth = MAX_DEPTH
    yaml.Composer = BoundedComposer
    return yaml.compose(text)


def _nodes(node: Node, start: Any, seen: set[int]) -> Iterator[Node]:
    """``node`` and the nodes under it that are written here (an alias's node, written at its
    anchor before ``start``, is not)."""
    if id(node) in seen or (node.start_mark.line, node.start_mark.column) < start:
        return
    seen.add(id(node))
    yield node
    if isinstance(node, MappingNode):
        for key, value in node.value:
            yield from _nodes(key, start, seen)
            yield from _nodes(value, start, seen)
    elif isinstance(node, SequenceNode):
        for item in node.value:
            yield from _nodes(item, start, seen)


def _comment(rest: str) -> str | None:
    """The comment in ``rest``, the text of a line after its last node: from the first ``#``
    that follows a blank (a ``#`` inside an anchor or tag name is no comment)."""
    for i, char in enumerate(rest):
        if char == "#" and (i == 0 or rest[i - 1] in " \t"):
            return rest[i:].rstrip("\r\n")
    return None


def _indent(line: str) -> str:
    return line[: len(line) - len(line.lstrip(" "))]


def _content(line: str) -> bool:
    stripped = line.strip()
    return bool(stripped) and not stripped.startswith("#")


def _entry(lines: list[str], key: Node, value: Node) -> Entry:
    """Where the entry ``key: value`` is and the comments it holds."""
    start = key.start_mark.line
    col = len(_indent(lines[start]))
    nodes = list(_nodes(key, (start, 0), set())) + list(_nodes(value, (start, 0), set()))
    ends: dict[int, int] = {}  # line -> the column where the last node on it ends
    inside: set[int] = set()  # lines a multi-line scalar goes on to: a '#' there is text
    last = start
    for node in nodes:
        line, column = node.end_mark.line, node.end_mark.column
        if isinstance(node, ScalarNode) and column == 0 and line > node.start_mark.line:
            line, column = line - 1, len(lines[line - 1])  # a block scalar ends at the next line
        if isinstance(node, ScalarNode):
            inside.update(range(node.start_mark.line + 1, line + 1))
        if isinstance(node, ScalarNode) or getattr(node, "flow_style", False):
            ends[line] = max(ends.get(line, 0), column)
            last = max(last, line)
    # a node written elsewhere (an alias) ends on a line of its own: more-indented lines follow
    for i in range(last + 1, len(lines)):
        if _content(lines[i]):
            if len(_indent(lines[i])) <= col:
                break
            last = i
    trailing, whole = [], []
    for i in range(start, last + 1):
        line = lines[i]
        if i not in inside and line.strip().startswith("#"):
            whole.append(line.strip())
        elif line.strip():
            after = ends.get(i)
            comment = _comment(line[len(_indent(line)) if after is None else after :])
            if comment is not None and (after is not None or i not in inside):
                trailing.append(comment)
    return Entry(start, last + 1, _indent(lines[start]), trailing, whole)


def _anchored(value: Node, start: int, uses: dict[int, int]) -> list[str]:
    """The anchors in entry ``value`` that another node uses (``*name``)."""
    return sorted(
        {
            str(node.anchor)
            for node in _nodes(value, (start, 0), set())
            if getattr(node, "anchor", None) and uses.get(id(node), 0) > 1
        }
    )


def _uses(node: Node, counts: dict[int, int]) -> None:
    """How often each node is reached from ``node``: more than once is an anchor and its aliases."""
    counts[id(node)] = counts.get(id(node), 0) + 1
    if counts[id(node)] > 1:
        return
    children = (
        [n for pair in node.value for n in pair]
        if isinstance(node, MappingNode)
        else node.value
        if isinstance(node, SequenceNode)
        else []
    )
    for child in children:
        _uses(child, counts)


def _expectations(root: Any) -> tuple[Node | None, Node | None]:
    if not isinstance(root, MappingNode):
        return None, None
    for key, value in root.value:
        if isinstance(key, ScalarNode) and key.value == "expectations":
            return key, value
    return None, None


def unrewritable(text: str, changes: Mapping[str, Change]) -> dict[str, str]:
    """Why each of ``changes`` whose entry cannot be edited alone cannot: an anchor in it that
    another node uses (rewriting the entry would change that one too)."""
    root = _compose(text)
    _, block = _expectations(root)
    if not isinstance(block, MappingNode):
        return {}
    counts: dict[int, int] = {}
    _uses(root, counts)
    refused = {}
    for key, value in block.value:
        if isinstance(key, ScalarNode) and key.value in changes:
            anchors = _anchored(value, key.start_mark.line, counts)
            if anchors:
                names = ", ".join(f"&{a}" for a in anchors)
                refused[key.value] = (
                    f"its entry (line {key.start_mark.line + 1}) holds the anchor {names} that another "
                    f"entry uses (*{anchors[0]}); kept, since rewriting it would change that entry too: "
                    "write the entries out without the alias to let the update change them"
                )
    return refused


def _cut(line: str, start: int, end: int) -> str:
    """``line`` without columns [start, end) (an empty ``{}`` or ``~`` value), comment kept."""
    head, tail = line[:start].rstrip(" \t"), line[end:]
    ending = tail[len(tail.rstrip("\r\n")) :]
    tail = tail.rstrip("\r\n")
    return head + (tail if tail.strip() else "") + ending


def apply_changes(path: Path, text: str, changes: Mapping[str, Change]) -> str:
    """The matrix ``text`` (of ``path``, for messages) with ``changes`` applied to its
    ``expectations`` block. Raises :class:`Unrewritable` for a form that cannot be edited as
    lines; call :func:`unrewritable` first to leave out the entries that cannot be."""
    if not changes:
        return text
    newline = "\r\n" if "\r\n" in text else "\n"
    lines = text.splitlines(keepends=True)
    if lines and not lines[-1].endswith("\n"):
        lines[-1] += newline
    root = _compose(text)
    if not isinstance(root, MappingNode) or root.flow_style:
        raise Unrewritable(
            f"{path}:1:1: the matrix is one flow mapping ({{...}}); the update adds expectation "
            "lines only to a block mapping: write the matrix in block style"
        )
    key, block = _expectations(root)
    entries: list[tuple[str, Entry]] = []
    if isinstance(block, MappingNode):
        if block.flow_style and block.value:
            raise Unrewritable(
                f"{path}:{key.start_mark.line + 1 if key else 1}:1: --tile-update needs 'expectations' in "
                "block style, one entry per line; here it is one flow mapping {...}"
            )
        entries = [(k.value, _entry(lines, k, v)) for k, v in block.value if isinstance(k, ScalarNode)]
    by_id = dict(entries)
    additions = [c.line for c in changes.values() if c.line is not None and c.case_id not in by_id]
    if additions and not entries:
        return _new_block(path, lines, root, key, block, additions, newline)
    if additions:  # below every entry, so the edits below keep their line numbers
        at = max(entry.end for _, entry in entries)
        lines[at:at] = [f"{entries[0][1].indent}{line}{newline}" for line in additions]
    # Edit bottom-up so the lines above an edit keep their numbers.
    for case_id, entry in sorted(entries, key=lambda item: -item[1].start):
        change = changes.get(case_id)
        if change is None:
            continue
        if change.line is None:  # removed whole, its comments with it: they were about it
            lines[entry.start : entry.end] = []
            continue
        kept = [entry.indent + c + newline for c in [*entry.whole, *entry.trailing[1:]]]
        comment = f"  {entry.trailing[0]}" if entry.trailing else ""
        lines[entry.start : entry.end] = [*kept, f"{entry.indent}{change.line}{comment}{newline}"]
    return "".join(lines)


def _new_block(
    path: Path,
    lines: list[str],
    root: MappingNode,
    key: Node | None,
    block: Node | None,
    additions: list[str],
    newline: str,
) -> str:
    """The text with a first ``expectations`` entry: under the (empty) key, or in a new block
    at the end of the document (before a ``...`` document end)."""
    if key is not None and block is not None:
        at = key.start_mark.line
        if lines[at][: key.start_mark.column].strip():
            raise Unrewritable(
                f"{path}:{at + 1}:1: an explicit '? expectations' key with no entries: write "
                "'expectations:' so the update can add entries under it"
            )
        col = len(_indent(lines[at])) + 2
        if isinstance(block, (MappingNode, ScalarNode)) and block.start_mark.line == at:
            start, end = block.start_mark.column, block.end_mark.column
            if block.end_mark.line == at and end > start:  # `{}`, `~` or `null`: the comment stays
                lines[at] = _cut(lines[at], start, end)
        lines[at + 1 : at + 1] = [f"{' ' * col}{line}{newline}" for line in additions]
        return "".join(lines)
    col = root.start_mark.column
    end = max(node.end_mark.line for pair in root.value for node in pair)
    at = next((i for i in range(end, len(lines)) if _DOCUMENT_END.match(lines[i])), len(lines))
    lines[at:at] = [
        f"{' ' * col}expectations:{newline}",
        *(f"{' ' * (col + 2)}{line}{newline}" for line in additions),
    ]
    return "".join(lines)
