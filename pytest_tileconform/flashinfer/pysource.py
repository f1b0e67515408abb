"""FlashInfer's Python files read as data: parsed, never imported or run.

Every parse goes through one lock because CPython 3.11's ``ast.parse`` is not safe across threads
(python/cpython#106905: two threads building AST objects at once share one recursion counter and
fail with "AST constructor recursion depth mismatch"), and the release probe and the planners read
a release's files from thread pools. A file's tree is kept while its size and modification time
stay the same: the flags of every unit's nvcc command are read from two of them.
"""

from __future__ import annotations

import ast
import os
import threading
from pathlib import Path

_PARSING = threading.Lock()
#: (path, inode, size, mtime_ns) -> the file's tree, shared read-only by every caller
_TREES: dict[tuple[str, int, int, int], ast.Module] = {}


def parse_file(path: Path) -> ast.Module:
    """The syntax tree of ``path``, which callers read and never change; raises what reading and
    ``ast.parse`` raise (``OSError``, ``SyntaxError``, ``ValueError``), with the path in a syntax
    error's message."""
    stat = os.stat(path)
    key = (os.path.abspath(path), stat.st_ino, stat.st_size, stat.st_mtime_ns)
    with _PARSING:
        if key not in _TREES:
            _TREES[key] = ast.parse(path.read_text(), filename=str(path))
        return _TREES[key]
