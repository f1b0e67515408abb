"""The hostile-input corpus's shared pieces: a valid results document to damage, and ``tileconform``
in a child process under a time limit, for inputs that could block (FIFOs, devices)."""

from __future__ import annotations

import copy
import subprocess
import sys
from typing import Any

from helpers.evidence import document, report
from helpers.paths import DATA

VALID_RESULTS = report("sm120-virtual")
VALID_TACTICS = DATA / "tactics-sm120-drift.jsonl"
#: every child process of the corpus ends within this many seconds, or the case fails
LIMIT_S = 60


def valid_document() -> dict[str, Any]:
    """A small valid results document (format 1, two cases) to damage."""
    data: dict[str, Any] = document(VALID_RESULTS)
    data["cases"] = copy.deepcopy(data["cases"][:2])
    return data


def tileconform(
    *args: str, stdin: Any = subprocess.DEVNULL, stdout: Any = subprocess.PIPE
) -> subprocess.CompletedProcess[str]:
    """``tileconform ARGS`` in a child process, killed after :data:`LIMIT_S` seconds."""
    return subprocess.run(
        [sys.executable, "-m", "pytest_tileconform", *args],
        stdout=stdout,
        stderr=subprocess.PIPE,
        text=True,
        timeout=LIMIT_S,
        stdin=stdin,
    )
