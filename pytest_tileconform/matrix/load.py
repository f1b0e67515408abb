"""Loading a matrix file: YAML -> validated model -> the list of cases, or every error with its position.

ruamel's round-trip loader keeps the line and column of every key and item, so each
problem pydantic (or the expansion) finds is reported as ``file:line:col: message``.
"""

from __future__ import annotations

import itertools
from collections.abc import Collection, Iterable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from pydantic import ValidationError
from ruamel.yaml import YAML
from ruamel.yaml.comments import CommentedMap, CommentedSeq
from ruamel.yaml.error import MarkedYAMLError, YAMLError

from .cases import Case
from .schema import FORMAT_VERSION, Axes, Matrix, Suite, TileEntry

Loc = tuple[str | int, ...]


@dataclass(frozen=True)
class MatrixError:
    path: Path
    line: int  # 1-based
    col: int  # 1-based
    message: str

    def __str__(self) -> str:
        return f"{self.path}:{self.line}:{self.col}: {self.message}"


class MatrixInvalid(Exception):
    """A matrix file has one or more problems; ``errors`` lists each with its position."""

    def __init__(self, errors: Sequence[MatrixError]) -> None:
        super().__init__("\n".join(str(e) for e in errors))
        self.errors = list(errors)


@dataclass(frozen=True)
class LoadedMatrix:
    path: Path
    model: Matrix
    cases: list[Case]


def _yaml() -> YAML:
    yaml = YAML(typ="rt")
    yaml.allow_duplicate_keys = False
    return yaml


def read_document(path: Path) -> Any:
    """Parse ``path`` with positions kept; raise MatrixInvalid for unreadable or bad YAML."""
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise MatrixInvalid([MatrixError(path, 1, 1, f"cannot read matrix: {exc.strerror}")]) from None
    return parse_document(path, text)


def parse_document(path: Path, text: str) -> Any:
    """Parse matrix ``text`` (read from ``path``) with positions kept."""
    try:
        return _yaml().load(text)
    except MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        line, col = (mark.line + 1, mark.column + 1) if mark else (1, 1)
        message = " ".join(str(p) for p in (exc.context, exc.problem) if p)
        raise MatrixInvalid([MatrixError(path, line, col, f"invalid YAML: {message}")]) from None
    except YAMLError as exc:
        raise MatrixInvalid([MatrixError(path, 1, 1, f"invalid YAML: {exc}")]) from None


def position(document: Any, loc: Loc) -> tuple[int, int]:
    """The 1-based (line, col) of the deepest node of ``loc`` that exists in the document.

    For a mapping key the key's own position is used, so "unknown key" points at the key.
    """
    node = document
    line, col = 0, 0
    for part in loc:
        if isinstance(node, CommentedMap) and part in node:
            line, col = node.lc.key(part)
            node = node[part]
        elif isinstance(node, CommentedSeq) and isinstance(part, int) and 0 <= part < len(node):
            line, col = node.lc.item(part)
            node = node[part]
        elif isinstance(part, int) and part == 0:
            continue  # a scalar axis value that the schema wrapped into a one-element list
        else:
            break
    return line + 1, col + 1


def _pydantic_loc(raw: tuple[str | int, ...]) -> Loc:
    """Drop pydantic's synthetic loc parts (union members, validator names) to get a YAML path."""
    return tuple(p for p in raw if isinstance(p, int) or not any(c in p for c in "[]()"))


def _validation_errors(path: Path, document: Any, exc: ValidationError) -> list[MatrixError]:
    errors = []
    seen = set()
    for err in exc.errors(include_url=False):
        loc = _pydantic_loc(err["loc"])
        if err["type"] == "extra_forbidden":
            message = f"unknown key {loc[-1]!r}"
        elif err["type"] == "missing":
            message = f"missing key {loc[-1]!r}"
        else:
            msg = err["msg"].removeprefix("Value error, ")
            message = f"{'.'.join(str(p) for p in loc) or 'matrix'}: {msg}"
        key = (loc, message)
        if key in seen:  # union branches repeat the same complaint
            continue
        seen.add(key)
        line, col = position(document, loc)
        errors.append(MatrixError(path, line, col, message))
    return errors


def _pick(*layers: Axes | None, axis: str) -> list[Any] | None:
    """The first layer (tile entry, suite, defaults) that sets ``axis``."""
    for layer in layers:
        value = getattr(layer, axis) if layer is not None else None
        if value is not None:
            return list(value)
    return None


def _expand_tile(path: Path, matrix: Matrix, suite: Suite, entry: TileEntry) -> tuple[list[Case], list[str]]:
    axes = {}
    missing = []
    for axis, fallback in (
        ("arch", None),
        ("dtype", None),
        ("cluster", [(1, 1, 1)]),
        ("swap_ab", [False]),
        ("fusion", ["none"]),
        ("problems", None),
    ):
        value = _pick(entry, suite, matrix.defaults, axis=axis)
        if value is None:
            value = fallback
        if value is None:
            missing.append(axis)
        else:
            axes[axis] = value
    if missing:
        return [], [f"no {' or '.join(missing)} given (in the tile entry, the suite or defaults)"]
    empty = [axis for axis, values in axes.items() if not values]
    if empty:
        return [], [f"empty product: {', '.join(empty)} lists nothing"]
    expectations = matrix.expectations or {}
    cases = []
    for arch, dt, cluster, swap_ab, fusion, problem in itertools.product(
        axes["arch"],
        axes["dtype"],
        axes["cluster"],
        axes["swap_ab"],
        axes["fusion"],
        axes["problems"],
    ):
        case = Case(
            matrix=path,
            backend=matrix.backend,
            arch=arch,
            act=dt.act,
            weight=dt.weight,
            out=dt.out,
            dtype_label=dt.label,
            tile=entry.shape,
            cluster=cluster,
            swap_ab=swap_ab,
            fusion=fusion,
            problem=problem,
            expectation=None,
            suite=suite.name,
        )
        expectation = expectations.get(case.id)
        if expectation is not None:
            case = replace(case, expectation=expectation)
        cases.append(case)
    return cases, []


def expand(path: Path, document: Any, matrix: Matrix) -> list[Case]:
    """All cases of ``matrix`` in file order; raise MatrixInvalid on empty products or duplicates."""
    errors: list[MatrixError] = []
    cases: list[Case] = []
    first_seen: dict[str, Loc] = {}
    for s, suite in enumerate(matrix.suites):
        for t, entry in enumerate(suite.tile):
            loc: Loc = ("suites", s, "tile", t)
            produced, problems = _expand_tile(path, matrix, suite, entry)
            for problem in problems:
                errors.append(MatrixError(path, *position(document, loc), problem))
            for case in produced:
                if case.id in first_seen:
                    line, _ = position(document, first_seen[case.id])
                    errors.append(
                        MatrixError(
                            path,
                            *position(document, loc),
                            f"duplicate case {case.id!r} (first produced at line {line})",
                        )
                    )
                    continue
                first_seen[case.id] = loc
                cases.append(case)
    for case_id in matrix.expectations or {}:
        if case_id not in first_seen:
            errors.append(
                MatrixError(
                    path,
                    *position(document, ("expectations", case_id)),
                    f"expectation for {case_id!r}, which is not a case of this matrix",
                )
            )
    if not cases and not errors:
        errors.append(MatrixError(path, *position(document, ("suites",)), "the matrix has no cases"))
    if errors:
        raise MatrixInvalid(errors)
    return cases


def load_matrix(path: Path, backends: Collection[str] | None = None, text: str | None = None) -> LoadedMatrix:
    """Read, validate and expand one matrix file (or ``text`` that would be written to it).

    ``backends`` is the set of registered backend names; None skips that check.
    """
    document = read_document(path) if text is None else parse_document(path, text)
    if not isinstance(document, CommentedMap):
        raise MatrixInvalid([MatrixError(path, 1, 1, "a matrix must be a YAML mapping")])
    errors: list[MatrixError] = []
    version = document.get("version")
    if version != FORMAT_VERSION:
        where = position(document, ("version",))
        errors.append(
            MatrixError(
                path,
                *where,
                f"unsupported matrix version {version!r}; this plugin reads version {FORMAT_VERSION}",
            )
        )
        raise MatrixInvalid(errors)
    backend = document.get("backend")
    if backends is not None and isinstance(backend, str) and backend not in backends:
        known = ", ".join(sorted(backends)) or "none registered"
        where = position(document, ("backend",))
        errors.append(MatrixError(path, *where, f"unknown backend {backend!r} (known: {known})"))
    cases: list[Case] = []
    try:
        model = Matrix.model_validate(document)
        cases = expand(path, document, model)
    except ValidationError as exc:
        errors.extend(_validation_errors(path, document, exc))
    except MatrixInvalid as exc:
        errors.extend(exc.errors)
    if errors:
        raise MatrixInvalid(sorted(errors, key=lambda e: (e.line, e.col)))
    return LoadedMatrix(path, model, cases)


def load_matrices(paths: Iterable[Path], backends: Collection[str] | None = None) -> list[LoadedMatrix]:
    """Load every matrix, gathering the errors of all of them before raising."""
    loaded, errors = [], []
    for path in paths:
        try:
            loaded.append(load_matrix(path, backends))
        except MatrixInvalid as exc:
            errors.extend(exc.errors)
    if errors:
        raise MatrixInvalid(errors)
    return loaded
