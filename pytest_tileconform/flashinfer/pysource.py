"""FlashInfer's Python files read as data: parsed, never imported or run.

Every parse goes through one lock because CPython 3.11's ``ast.parse`` is not safe across threads
(python/cpython#106905: two threads building AST objects at once share one recursion counter and
fail with "AST constructor recursion depth mismatch"), and the release probe and the planners read
a release's files from thread pools.
"""

from __future__ import annotations

import ast
import threading
from pathlib import Path

_PARSING = threading.Lock()


def parse_file(path: Path) -> ast.Module:
    """The syntax tree of ``path``; raises what reading and ``ast.parse`` raise (``OSError``,
    ``SyntaxError``, ``ValueError``), with the path in a syntax error's message."""
    text = path.read_text()
    with _PARSING:
        return ast.parse(text, filename=str(path))
