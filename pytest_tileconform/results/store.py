"""The one reader and writer of results files: nothing else opens, parses or writes them.

Reading checks a file against :mod:`.model` and raises :class:`ReportError` naming the file and
the place in it; a file of an older format is upgraded to the current one here, so every reader
sees one layout. Writing is atomic: readers see the old file or the new one, never a torn one.
"""

from __future__ import annotations

import gzip
import io
import json
import re
import zlib
from collections.abc import Callable
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from ..archs import arch_name
from ..files import read_regular, write_atomic
from ..verdict import UNRUN, Stage, kernel_ran
from .model import FORMAT, READABLE_FORMATS, ResultsDocument

#: How many problems one error lists before "and N more".
_SHOWN_ERRORS = 3
#: The largest results file read, as stored and (for ``.gz``) decompressed: the sm90 matrix's
#: 360 cases take about 0.5 MB, so this leaves room for matrices far larger than any shipped
#: one while a wrong file (a disk image, a ``.gz`` bomb) is refused before it fills memory.
MAX_RESULTS_BYTES = 256 * 1024 * 1024
#: The deepest nesting of JSON arrays and objects read: a results file nests about six deep;
#: far deeper input is hostile and would exhaust the parser's or the validator's stack.
MAX_DEPTH = 64
#: JSON objects and arrays in one file, counted on its bytes before it is parsed: a case has
#: about eight (1.4 KB of text), so a file at :data:`MAX_RESULTS_BYTES` holds about 1.5 M of
#: them; 255 MB of ``{}`` would be 85 M dicts, several gigabytes of memory, before any check.
MAX_CONTAINERS = 4_000_000
#: The most characters of a number: Python refuses to convert an integer of more than 4,300
#: digits (and is quadratic below that); no field of a results file needs more than 20.
MAX_NUMBER = 40


class ReportError(ValueError):
    """A results file cannot be read; the message names the file and the place in it."""


def read_results(path: Path) -> ResultsDocument:
    """Read a results file (``.json``, or ``.json.gz`` as the repository keeps large ones).

    Every way a file can be wrong ends in :class:`ReportError`: not a regular file (a FIFO,
    ``/dev/zero`` and a directory are refused without blocking), larger than
    :data:`MAX_RESULTS_BYTES` stored or decompressed, not UTF-8, not JSON, nested deeper than
    :data:`MAX_DEPTH`, or not a results document."""
    try:
        raw = read_regular(path, MAX_RESULTS_BYTES, "results file")
    except OSError as exc:
        raise ReportError(f"{path}: cannot read: {exc.strerror or exc}") from None
    if path.name.endswith(".gz"):
        raw = _gunzip(raw, path)
    if raw.startswith((b"\xff\xfe", b"\xfe\xff")):
        raise ReportError(f"{path}: UTF-16 text: results files are UTF-8 (save it as UTF-8)")
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ReportError(f"{path}: not UTF-8 text: {exc}") from None
    containers = raw.count(b"{") + raw.count(b"[")
    if containers > MAX_CONTAINERS:
        raise ReportError(
            f"{path}: {containers:,} JSON objects and arrays, more than the {MAX_CONTAINERS:,} a results "
            "file may hold (a case has about eight)"
        )
    try:
        data = json.loads(text.removeprefix("\ufeff"), parse_int=_number(int), parse_float=_number(float))
    except json.JSONDecodeError as exc:
        raise ReportError(f"{path}:{exc.lineno}:{exc.colno}: not JSON: {exc.msg}") from None
    except _LongNumber as exc:
        line, col = _line_col(text, str(exc))
        raise ReportError(
            f"{path}:{line}:{col}: a number of {len(str(exc)):,} characters; no field of a results file "
            f"has more than {MAX_NUMBER}"
        ) from None
    except RecursionError:
        raise ReportError(f"{path}: JSON nested too deeply (a results file nests about six deep)") from None
    if _depth(data) > MAX_DEPTH:
        raise ReportError(f"{path}: JSON nested deeper than {MAX_DEPTH} (results files nest about six deep)")
    return parse_results(data, str(path))


class _LongNumber(ValueError):
    """A JSON number of more than :data:`MAX_NUMBER` characters; the text is the number."""


def _number(convert: Callable[[str], Any]) -> Callable[[str], Any]:
    def bounded(text: str) -> Any:
        if len(text) > MAX_NUMBER:
            raise _LongNumber(text)
        return convert(text)

    return bounded


def _line_col(text: str, found: str) -> tuple[int, int]:
    at = max(text.find(found), 0)
    return text.count("\n", 0, at) + 1, at - (text.rfind("\n", 0, at) + 1) + 1


def _gunzip(raw: bytes, path: Path) -> bytes:
    """``raw`` decompressed, at most :data:`MAX_RESULTS_BYTES` of it (a bomb stops there)."""
    try:
        with gzip.GzipFile(fileobj=io.BytesIO(raw)) as stream:
            data = stream.read(MAX_RESULTS_BYTES + 1)
    except (OSError, EOFError, zlib.error) as exc:
        raise ReportError(f"{path}: cannot read: not a readable gzip file: {exc}") from None
    if len(data) > MAX_RESULTS_BYTES:
        raise ReportError(
            f"{path}: decompresses to more than {MAX_RESULTS_BYTES:,} bytes, more than a results file has"
        )
    return data


def _depth(data: Any) -> int:
    """How deeply ``data`` nests lists and dicts, counted without recursion."""
    deepest, stack = 0, [(data, 1)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, (dict, list)):
            deepest = max(deepest, depth)
            if depth > MAX_DEPTH:
                return depth
            stack.extend((child, depth + 1) for child in (item.values() if isinstance(item, dict) else item))
    return deepest


def _lone_surrogate(data: Any) -> str | None:
    """The first string (key or value) of ``data`` with a lone surrogate (JSON's ``"\\ud800"``
    escape decodes to one): such a string is no text, and every writer (the terminal, Markdown,
    HTML, a rewritten results file) would fail on it or write a different one."""
    stack = [data]
    while stack:
        item = stack.pop()
        if isinstance(item, str):
            if _SURROGATE.search(item):
                return item
        elif isinstance(item, dict):
            stack.extend(item.keys())
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)
    return None


_SURROGATE = re.compile("[\ud800-\udfff]")


def parse_results(data: Any, origin: str = "<results>") -> ResultsDocument:
    """A results document from parsed JSON (``origin`` names it in errors), upgraded if older."""
    if not isinstance(data, dict) or "cases" not in data:
        raise ReportError(
            f"{origin}: not a tileconform results file (no 'cases'; write one with --tile-report)"
        )
    version = data.get("format")
    if type(version) is not int or version not in READABLE_FORMATS:  # not True, not 1.0
        raise ReportError(
            f"{origin}: results format {version!r} is not one this version reads {READABLE_FORMATS}"
        )
    bad = _lone_surrogate(data)
    if bad is not None:
        shown = bad[:60].encode("utf-8", "backslashreplace").decode()
        raise ReportError(
            f"{origin}: the string {shown!r} holds a lone surrogate (a \\ud800-\\udfff escape): not text"
        )
    if version == 1:
        data = _upgrade_from_1(data)
    if version in (1, 2):
        data = _upgrade_from_2(data)
    try:
        document = ResultsDocument.model_validate(data)
    except ValidationError as exc:
        raise ReportError("\n".join(f"{origin}: {problem}" for problem in _problems(exc))) from None
    _check_consistent(document, origin)
    return document


def _check_consistent(document: ResultsDocument, origin: str) -> None:
    """A file that judges one case twice, or a verdict whose outcome is not its failed stage,
    is refused: every reader keys cases by matrix and id and reads a verdict's outcome, so the
    second judgement of a case would replace the first (a failure hidden behind a later pass
    in ``report diff``), and an outcome that says ``pass`` over a failed stage would be read as
    a pass by one reader and a failure by another."""
    seen: dict[tuple[str | None, str], int] = {}
    for index, entry in enumerate(document.cases):
        key = (entry.matrix, entry.id)
        if key in seen:
            raise ReportError(
                f"{origin}: cases[{index}]: case {entry.id!r}{' of ' + entry.matrix if entry.matrix else ''} "
                f"is in the file twice (first at cases[{seen[key]}]): a run judges a case once"
            )
        seen[key] = index
        verdict = entry.verdict
        if verdict is None:
            continue
        stage = "pass" if verdict.failed_stage is None else verdict.failed_stage.value
        if str(verdict.outcome) != stage:
            raise ReportError(
                f"{origin}: cases[{index}].verdict: outcome {str(verdict.outcome)!r} contradicts "
                f"failed_stage {None if verdict.failed_stage is None else stage!r} (the outcome is "
                "'pass' or the failed stage)"
            )


def dumps(document: ResultsDocument) -> str:
    return json.dumps(document.to_json(), indent=1, sort_keys=False) + "\n"


def write_results(path: Path, document: ResultsDocument) -> None:
    write_atomic(path, dumps(document))


# -- format 1 -> 2 ------------------------------------------------------------------------------
_HARDWARE_1 = re.compile(r"^hardware \((?P<name>.+), CC (?P<major>\d+)\.(?P<minor>\d+)\)$")
_VIRTUAL_1 = re.compile(r"^virtual \((?P<arch>sm\d+) profile\)$")


def device_of_format_1(source: str) -> dict[str, Any]:
    """The structured device a format-1 verdict named only in its ``source`` text. This is the
    one place that text is read back: format 2 records the device itself."""
    if match := _HARDWARE_1.match(source):
        major, minor = match["major"], match["minor"]
        return {
            "kind": "hardware",
            "name": match["name"],
            "arch": arch_name(int(major) * 10 + int(minor)),
            "cc": f"{major}.{minor}",
        }
    if match := _VIRTUAL_1.match(source):
        arch = match["arch"]
        return {"kind": "virtual", "name": f"virtual {arch}", "arch": arch, "cc": f"{arch[2:-1]}.{arch[-1]}"}
    # decided by the build: "codegen (LIBRARY V)", "nvcc (LIBRARY V)", "compile only"; the
    # name is the step, as the backend names it in format 2
    return {"kind": "build", "name": source.split(" (", 1)[0], "arch": None, "cc": None}


def _upgrade_from_1(data: dict[str, Any]) -> dict[str, Any]:
    """Format 1 is format 2 without ``verdict.device`` (files written just before the bump carry
    ``"device": null``). Anything malformed is left as it is for validation to report."""
    cases = data.get("cases")
    upgraded = []
    for entry in cases if isinstance(cases, list) else []:
        verdict = entry.get("verdict") if isinstance(entry, dict) else None
        if (
            isinstance(verdict, dict)
            and verdict.get("device") is None
            and isinstance(verdict.get("source"), str)
        ):
            entry = {**entry, "verdict": {**verdict, "device": device_of_format_1(verdict["source"])}}
        upgraded.append(entry)
    return {**data, "format": 2, "cases": upgraded if isinstance(cases, list) else cases}


# -- format 2 -> 3 ------------------------------------------------------------------------------
def _upgrade_from_2(data: dict[str, Any]) -> dict[str, Any]:
    """Format 2 is format 3 without ``verdict.kernel_ran`` (it follows from ``judged_through``) and
    with pytest's ``passed`` for a pass whose kernel did not run (now ``unrun``). Anything
    malformed is left as it is for validation to report."""
    cases = data.get("cases")
    if not isinstance(cases, list):
        return {**data, "format": FORMAT}
    upgraded = []
    for entry in cases:
        verdict = entry.get("verdict") if isinstance(entry, dict) else None
        through = verdict.get("judged_through") if isinstance(verdict, dict) else None
        if isinstance(verdict, dict) and "kernel_ran" not in verdict and through in _STAGES:
            ran = kernel_ran(Stage(through))
            entry = {**entry, "verdict": {**verdict, "kernel_ran": ran}}
            if entry.get("outcome") == "passed" and verdict.get("outcome") == "pass" and not ran:
                entry["outcome"] = UNRUN
        upgraded.append(entry)
    return {**data, "format": FORMAT, "cases": upgraded}


_STAGES = frozenset(stage.value for stage in Stage)


# -- errors -------------------------------------------------------------------------------------
def _where(loc: tuple[int | str, ...]) -> str:
    text = ""
    for part in loc:
        text += f"[{part}]" if isinstance(part, int) else (f".{part}" if text else str(part))
    return text or "the document"


def _problems(exc: ValidationError) -> list[str]:
    """``cases[3].case: missing 'act', 'tile'``, ``cases[4].verdict.outcome: unknown outcome 'x'``."""
    problems: dict[str, list[str]] = {}
    for error in exc.errors(include_url=False):
        loc = tuple(error["loc"])
        kind, field = error["type"], loc[-1] if loc else ""
        if kind == "missing":
            problems.setdefault(f"{_where(loc[:-1])}: missing", []).append(repr(field))
        elif kind == "extra_forbidden":
            problems.setdefault(f"{_where(loc[:-1])}: unknown key", []).append(repr(field))
        elif kind in ("literal_error", "enum"):
            expected = (error.get("ctx") or {}).get("expected", "")
            text = f"unknown {field} {error['input']!r} (expected {expected})"
            problems.setdefault(f"{_where(loc)}: {text}", [])
        else:
            problems.setdefault(f"{_where(loc)}: {error['msg']}", [])
    lines = [f"{head} {', '.join(items)}" if items else head for head, items in problems.items()]
    if len(lines) > _SHOWN_ERRORS:
        lines[_SHOWN_ERRORS:] = [f"and {len(lines) - _SHOWN_ERRORS} more problem(s)"]
    return lines
