"""The lab's evidence, read only through results/index.json: the reports behind each shipped
matrix (``matrix_reports``) and the reports the tests read by name (``report``). A test never
spells a path under results/, so the results can be reorganised by editing the index alone."""

from __future__ import annotations

import functools
import gzip
import json
from pathlib import Path
from typing import Any

from helpers.paths import REPO

RESULTS = REPO / "results"
INDEX = RESULTS / "index.json"


@functools.cache
def index() -> dict[str, Any]:
    data: dict[str, Any] = json.loads(INDEX.read_text(encoding="utf-8"))
    return data


def matrix_report_groups(matrix: str) -> list[list[Path]]:
    """For each pattern the index lists for ``matrix`` (a shipped matrix's file name), the
    reports it matches, sorted; a pattern that matches nothing is an error."""
    groups = []
    for pattern in index()["matrices"][matrix]["reports"]:
        paths = sorted(RESULTS.glob(pattern))
        if not paths:
            raise FileNotFoundError(f"results/index.json: {matrix}'s results/{pattern} matches no file")
        groups.append(paths)
    return groups


def matrix_reports(matrix: str) -> list[Path]:
    """Every report behind ``matrix``'s verdicts."""
    return [path for group in matrix_report_groups(matrix) for path in group]


def complete_matrices() -> list[str]:
    """The shipped matrices whose every case the listed reports judged."""
    return sorted(name for name, entry in index()["matrices"].items() if entry["complete"])


def report(name: str) -> Path:
    """The report the index names ``name``."""
    return RESULTS / str(index()["reports"][name])


def document(path: Path) -> Any:
    """A report's JSON document, gzipped or not, as stored."""
    data = path.read_bytes()
    return json.loads(gzip.decompress(data) if path.name.endswith(".gz") else data)
