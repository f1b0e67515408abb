"""The bounds a matrix file is held to before anything is built from it, and the bounded read.

A matrix comes from a user, a CI job or a generated file, and a mistake in it must end as one
usage error with its position, never as a hang, a swapped-out host or a traceback. So every
resource a file can make the loader spend is bounded *before* it is spent: the bytes read (a
FIFO, a device or a huge file is refused without reading), the YAML nodes composed (alias
expansion counted as it would expand, so a "billion laughs" file stops early), the nesting
depth (ruamel's composer recurses) and the cases a file expands to (counted from the axes'
lengths, not by building them). What one value of a backend's axis may ask for (a grouped GEMM's
problem size) is the backend's bound, checked by its own schema.

Each limit is far above what a real matrix needs (the shipped ones are under 6 KB, a few
hundred nodes, depth 9 and a few thousand cases) and is named in the message that enforces it.
"""

from __future__ import annotations

import codecs
import os
import stat
from pathlib import Path
from typing import Any

from ruamel.yaml.composer import Composer, ComposerError
from ruamel.yaml.events import AliasEvent
from ruamel.yaml.nodes import ScalarNode

from ..files import read_regular

#: Bytes read from a matrix file: room for the expectations of several thousand known-bad cases
#: (an entry is 100-200 bytes); ruamel parses about 100 KB/s, and the node bound below stops a
#: file of small nodes well before the end.
MAX_BYTES = 2 << 20
#: YAML nodes after alias expansion: what validation walks. A shipped matrix has a few hundred;
#: an expectation entry is about eight, so a matrix with several thousand known-bad cases still
#: loads; an alias bomb stops here, and a file of this many nodes takes seconds to parse.
MAX_NODES = 60_000
#: YAML nodes of one ``expectations`` entry's value, aliases expanded: an entry written by
#: ``--tile-update`` has at most 13 (a mapping of six fields). The entries themselves count two
#: nodes each (key and value) against :data:`MAX_NODES`, not their fields, so the expectations the
#: update writes for every case of a matrix within :data:`MAX_CASES` load again: the node bound is
#: for what a user writes, not for what this tool records (a 5,000-case matrix whose cases all
#: fail needs 70,000 nodes counted field by field).
MAX_ENTRY_NODES = 64
#: Nesting of collections; a matrix needs 9 (matrix, suites, suite, tile, entry, problems,
#: problem, rows, row).
MAX_DEPTH = 32
#: Cases one matrix file may expand to: 50 times the largest shipped matrix, and about a second
#: to load (pytest then makes an item of each); raised with the loader's ``max_cases``.
MAX_CASES = 20_000
#: The most ``--tile-max-cases`` may raise it to: a million cases are about 2.5 GB of pytest items
#: before any is judged (collecting sm90.yaml's 2,880 took 7 MB more than the smoke matrix's 6,
#: BENCHMARKS.md) and minutes to collect; more is a typo, not a run this tool can hold.
MAX_CASES_RAISED = 1_000_000
#: Errors reported for one file; past this the rest are counted, not listed (a list of a
#: thousand bad rows is one mistake, not a thousand lines).
MAX_ERRORS = 50
#: Suite names, and the names a backend's axes give, become part of pytest node ids, which
#: ``::``, ``/`` and spaces break.
MAX_NAME = 64

NAME_ALPHABET = "letters, digits, '-', '_' and '.'"


class MatrixFileError(Exception):
    """A file cannot be a matrix before parsing; ``line``/``col`` say where when known."""

    def __init__(self, message: str, line: int = 1, col: int = 1) -> None:
        super().__init__(message)
        self.message = message
        self.line = line
        self.col = col


_WIDE_BOMS = (
    (codecs.BOM_UTF32_LE, "UTF-32"),
    (codecs.BOM_UTF32_BE, "UTF-32"),
    (codecs.BOM_UTF16_LE, "UTF-16"),
    (codecs.BOM_UTF16_BE, "UTF-16"),
)


def read_bytes(path: Path, limit: int = MAX_BYTES) -> bytes:
    """The bytes of ``path`` if it is a regular file of at most ``limit`` bytes.

    The type is checked before opening, to say in a matrix's words what the path is instead;
    :func:`..files.read_regular` then reads without blocking and checks again on the open
    descriptor, so a file swapped for a FIFO or a device meanwhile is refused without being read.
    """
    try:
        info = os.stat(path)  # follows links; a loop is ELOOP here
    except OSError as exc:
        raise MatrixFileError(f"cannot read matrix: {exc.strerror or exc}") from None
    _check_kind(info.st_mode, info.st_size, limit)
    try:
        return read_regular(path, limit, "matrix file")
    except OSError as exc:  # FileRefused too: swapped or grown since the check above
        raise MatrixFileError(f"cannot read matrix: {exc.strerror or exc}") from None


def _check_kind(mode: int, size: int, limit: int) -> None:
    if stat.S_ISDIR(mode):
        raise MatrixFileError("a directory, not a matrix file: give the path of a .yaml file")
    if not stat.S_ISREG(mode):
        kind = (
            "a FIFO"
            if stat.S_ISFIFO(mode)
            else "a device"
            if stat.S_ISCHR(mode) or stat.S_ISBLK(mode)
            else "a socket"
            if stat.S_ISSOCK(mode)
            else "not a regular file"
        )
        raise MatrixFileError(f"{kind}, not a regular file: a matrix is read only from a regular file")
    if size > limit:
        raise MatrixFileError(_too_large(size, limit))


def _too_large(size: int, limit: int) -> str:
    return f"the file is {size:,} bytes or more; a matrix may be at most {limit:,} bytes"


def decode(data: bytes) -> str:
    """``data`` as UTF-8 text (a UTF-8 BOM is dropped); other encodings are refused with where."""
    for bom, name in _WIDE_BOMS:
        if data.startswith(bom):
            raise MatrixFileError(
                f"the file is {name} (it starts with a {name} byte order mark); save it as UTF-8"
            )
    data = data.removeprefix(codecs.BOM_UTF8)
    nul = data.find(b"\0")
    if nul >= 0:
        line, col = _line_col(data, nul)
        raise MatrixFileError(
            f"NUL byte at byte offset {nul}: a matrix is UTF-8 text (is this UTF-16 or a binary file?)",
            line,
            col,
        )
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line, col = _line_col(data, exc.start)
        raise MatrixFileError(
            f"not UTF-8: byte 0x{data[exc.start]:02x} at byte offset {exc.start} ({exc.reason}); "
            "save the matrix as UTF-8",
            line,
            col,
        ) from None


def _line_col(data: bytes, offset: int) -> tuple[int, int]:
    """The 1-based line and column (in characters of the valid UTF-8 before it) of ``offset``."""
    start = data.rfind(b"\n", 0, offset) + 1
    col = len(data[start:offset].decode("utf-8", errors="replace")) + 1
    return data.count(b"\n", 0, offset) + 1, col


class BoundedComposer(Composer):
    """ruamel's composer, counting nodes as they would be after alias expansion.

    An alias costs the node count of what it names, so a file of nested aliases that would
    expand to billions of nodes is stopped at :data:`MAX_NODES`, at the alias that crosses it.
    An entry of the root's ``expectations`` costs two nodes (its key and value) and its value's
    own nodes count against :data:`MAX_ENTRY_NODES` instead: the entries are what
    ``--tile-update`` writes, one per failing case; an alias in one still costs what it expands to.
    """

    def __init__(self, loader: Any = None) -> None:
        super().__init__(loader)
        self.warn_double_anchors = False  # YAML allows it; a warning would only be noise
        self.nodes = 0  # counted against MAX_NODES
        self.total = 0  # every node, aliases expanded: what an anchor costs where it is used
        self.entry = 0  # nodes of the current expectation entry's value
        self.in_expectations = False
        self.sizes: dict[Any, int] = {}

    def _count(self, n: int, mark: Any) -> None:
        self.nodes += n
        if self.nodes > MAX_NODES:
            raise ComposerError(
                None,
                None,
                f"the matrix has more than {MAX_NODES:,} YAML nodes (aliases counted as expanded); "
                "a matrix lists axes, not cases",
                mark,
            )

    def _count_entry(self, n: int, mark: Any) -> None:
        self.entry += n
        if self.entry > MAX_ENTRY_NODES:
            raise ComposerError(
                None,
                None,
                f"this expectation entry has more than {MAX_ENTRY_NODES} YAML nodes (aliases counted "
                "as expanded); an entry is a mapping of stage, status, smem, limit, source and reason",
                mark,
            )

    def compose_node(self, parent: Any, index: Any) -> Any:
        opens = self.depth == 1 and isinstance(index, ScalarNode) and index.value == "expectations"
        if opens:
            self.in_expectations = True
        try:
            return self._compose_counted(parent, index)
        finally:
            if opens:
                self.in_expectations = False

    def _compose_counted(self, parent: Any, index: Any) -> Any:
        event = self.parser.peek_event()
        inside = self.in_expectations and self.depth >= 3  # within an entry's value
        if self.in_expectations and self.depth == 2 and index is not None:
            self.entry = 0  # an entry's value starts
        if isinstance(event, AliasEvent):
            size = self.sizes.get(event.anchor, 1)
            self._count(size, event.start_mark)
            if inside:
                self._count_entry(size, event.start_mark)
            self.total += size
            return super().compose_node(parent, index)
        before = self.total
        self.total += 1
        if inside:
            self._count_entry(1, event.start_mark)
        else:
            self._count(1, event.start_mark)
        node = super().compose_node(parent, index)
        if event.anchor is not None:
            self.sizes[event.anchor] = self.total - before
        return node
