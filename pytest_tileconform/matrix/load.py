"""Loading a matrix file: YAML -> validated model -> the list of cases, or every error with its position.

ruamel's round-trip loader keeps the line and column of every key and item, so each
problem pydantic (or the expansion) finds is reported as ``file:line:col: message``.
"""

from __future__ import annotations

import itertools
from collections.abc import Collection, Hashable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from pydantic import ValidationError
from ruamel.yaml import YAML
from ruamel.yaml.comments import CommentedMap, CommentedSeq
from ruamel.yaml.error import MarkedYAMLError, YAMLError
from ruamel.yaml.reader import ReaderError

from .bounds import (
    MAX_BYTES,
    MAX_CASES,
    MAX_DEPTH,
    MAX_ERRORS,
    MatrixFileError,
    decode,
    read_bytes,
)
from .cases import Case
from .duplicates import Axis, Loc, across_entries, same_axis
from .kinds import CaseKind, Expanding
from .schema import FORMAT_VERSION, Axes, Matrix, matrix_model
from .support import DTypesOn, unsupported
from .yamlsubset import MatrixComposer, NotMatrixYAML


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
    places: dict[str, CasePlace] = field(default_factory=dict)  # by case id
    #: expectation entries of ids that are no case of the matrix (its tile or axis was removed),
    #: loaded only where the caller prunes them (``stale_ok``)
    stale: list[str] = field(default_factory=list)


def _yaml() -> YAML:
    yaml = YAML(typ="rt")
    yaml.allow_duplicate_keys = False
    yaml.max_depth = MAX_DEPTH
    yaml.Composer = MatrixComposer
    return yaml


def read_text(path: Path) -> str:
    """The text of the matrix file ``path``, read within :mod:`.bounds`; MatrixInvalid if it
    is not a regular UTF-8 file of bounded size."""
    try:
        return decode(read_bytes(path))
    except MatrixFileError as exc:
        raise MatrixInvalid([MatrixError(path, exc.line, exc.col, exc.message)]) from None


def read_document(path: Path) -> Any:
    """Parse ``path`` with positions kept; raise MatrixInvalid for unreadable or bad YAML."""
    return parse_document(path, read_text(path))


def parse_document(path: Path, text: str) -> Any:
    """Parse matrix ``text`` (read from ``path``) with positions kept.

    ruamel is a parser of untrusted text here: whatever it raises (a YAML error, an integer
    with too many digits, a date that is not one) is the file's fault and is reported as such.
    """
    if len(text) > MAX_BYTES:
        raise MatrixInvalid(
            [
                MatrixError(
                    path, 1, 1, f"the matrix is {len(text):,} characters; it may be at most {MAX_BYTES:,}"
                )
            ]
        )
    try:
        return _yaml().load(text)
    except NotMatrixYAML as exc:  # valid YAML, not a matrix's: the message says what to write
        mark = exc.problem_mark
        raise MatrixInvalid([MatrixError(path, mark.line + 1, mark.column + 1, str(exc.problem))]) from None
    except MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        line, col = (mark.line + 1, mark.column + 1) if mark else (1, 1)
        message = " ".join(str(p) for p in (exc.context, exc.problem) if p)
        raise MatrixInvalid([MatrixError(path, line, col, f"invalid YAML: {message}")]) from None
    except ReaderError as exc:  # a character YAML does not allow; it knows only the offset
        before = text[: exc.position]
        line, col = before.count("\n") + 1, exc.position - (before.rfind("\n") + 1) + 1
        char = exc.character
        shown = f"#x{char:04x}" if isinstance(char, int) else repr(char)
        message = f"invalid YAML: unacceptable character {shown}: {exc.reason}"
        raise MatrixInvalid([MatrixError(path, line, col, message)]) from None
    except YAMLError as exc:
        raise MatrixInvalid([MatrixError(path, 1, 1, f"invalid YAML: {exc}")]) from None
    except RecursionError:
        raise MatrixInvalid(
            [MatrixError(path, 1, 1, f"invalid YAML: nested deeper than {MAX_DEPTH}")]
        ) from None
    except (ValueError, TypeError, OverflowError, KeyError, AttributeError) as exc:
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


def block_column(document: Any, loc: Loc) -> int | None:
    """The 1-based column of the key at ``loc`` when its mapping is in block style, so that block
    YAML can be suggested in its place; None when it is in a flow mapping or absent."""
    node = document
    for part in loc[:-1]:
        if (isinstance(node, CommentedMap) and part in node) or (
            isinstance(node, CommentedSeq) and isinstance(part, int) and 0 <= part < len(node)
        ):
            node = node[part]
        elif part != 0:  # 0: a scalar axis value that the schema wrapped into a one-element list
            return None
    if isinstance(node, CommentedMap) and loc and loc[-1] in node and not node.fa.flow_style():
        return int(node.lc.key(loc[-1])[1]) + 1
    return None


def _pydantic_loc(raw: tuple[str | int, ...], document: Any) -> Loc:
    """Drop pydantic's synthetic loc parts (union members, validator names) to get a YAML path.

    A part that is a key of the mapping it indexes is kept whatever its characters: a file's
    own key may contain brackets too.
    """
    node, loc = document, []
    for part in raw:
        if isinstance(node, CommentedMap) and part in node:
            loc.append(part)
            node = node[part]
        elif isinstance(part, int) or not any(c in part for c in "[]()"):
            loc.append(part)
            inside = isinstance(node, CommentedSeq) and isinstance(part, int) and 0 <= part < len(node)
            node = node[part] if inside else None
    return tuple(loc)


def _validation_errors(path: Path, document: Any, exc: ValidationError) -> list[MatrixError]:
    errors = []
    seen = set()
    for err in exc.errors(include_url=False):
        loc = _pydantic_loc(err["loc"], document)
        name = loc[-1] if loc else err["loc"][-1] if err["loc"] else ""
        if err["type"] == "extra_forbidden":
            message = f"unknown key {name!r}"
        elif err["type"] == "missing":
            message = f"missing key {name!r}"
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


#: The frame's axes a tile entry multiplies before the backend's (:func:`axes_of`); the matrix
#: must set them
FRAME = ("arch", "dtype")


def axes_of(kind: CaseKind) -> dict[str, list[Any] | None]:
    """Every axis of ``kind``'s cases with its values where no layer sets it (None: the matrix
    must), in the order of :func:`itertools.product` below: the frame's arch and dtype, then the
    backend's."""
    return {**dict.fromkeys(FRAME), **kind.defaults}


@dataclass(frozen=True)
class CasePlace:
    """Where a case comes from in its matrix file (1-based lines): CI annotations and failure
    reports point there rather than at this plugin's code."""

    line: int  # the tile entry
    col: int
    suite_line: int
    suite: str | None
    expectation_line: int | None = None


def _pick(layers: Sequence[tuple[Axes | None, Loc]], axis: str, fallback: list[Any] | None) -> Axis | None:
    """The first layer (tile entry, suite, defaults) that sets ``axis``, then the built-in default.

    An item that stands for several values (:class:`.kinds.Expanding`: a preset name for a
    model's problems) gives each of them, and ``items`` says which item of the list in the file
    each came from.
    """
    for layer, loc in layers:
        value = getattr(layer, axis) if layer is not None else None
        if value is None:
            continue
        if not any(isinstance(item, Expanding) for item in value):
            return Axis(list(value), (*loc, axis))
        values: list[Any] = []
        items: list[int] = []
        for i, item in enumerate(value):
            given = item.expand() if isinstance(item, Expanding) else (item,)
            values.extend(given)
            items.extend([i] * len(given))
        return Axis(values, (*loc, axis), items, list(value))
    return None if fallback is None else Axis(fallback, None)


def _axis_length(layers: Sequence[tuple[Axes | None, Loc]], axis: str, fallback: list[Any] | None) -> int:
    """How many values :func:`_pick` would give, without expanding any item."""
    for layer, _ in layers:
        value = getattr(layer, axis) if layer is not None else None
        if value is not None:
            return sum(item.count if isinstance(item, Expanding) else 1 for item in value)
    return 0 if fallback is None else len(fallback)


Produced = tuple[Case, tuple[int, ...]]  # a case and the index of its value on each axis


def _expand_tile(
    path: Path, matrix: Matrix, kind: CaseKind, s: int, t: int
) -> tuple[list[Produced], dict[str, Axis], list[str]]:
    suite = matrix.suites[s]
    entry = suite.tile[t]
    layers = [(entry, ("suites", s, "tile", t)), (suite, ("suites", s)), (matrix.defaults, ("defaults",))]
    order = axes_of(kind)
    axes = {axis: _pick(layers, axis, fallback) for axis, fallback in order.items()}
    missing = [axis for axis, found in axes.items() if found is None]
    if missing:
        return [], {}, [f"no {' or '.join(missing)} given (in the tile entry, the suite or defaults)"]
    given = {axis: found for axis, found in axes.items() if found is not None}
    empty = [axis for axis, found in given.items() if not found.values]
    if empty:
        return [], given, [f"empty product: {', '.join(empty)} lists nothing"]
    expectations = matrix.expectations or {}
    produced = []
    for index in itertools.product(*(range(len(given[axis].values)) for axis in order)):
        values = {axis: given[axis].values[i] for axis, i in zip(order, index, strict=True)}
        arch, dt = values.pop("arch"), values.pop("dtype")
        case: Case = Case(
            matrix=path,
            backend=matrix.backend,
            arch=arch,
            act=dt.act,
            weight=dt.weight,
            out=dt.out,
            dtype_label=dt.label,
            tile=entry.shape,
            axes=kind.make(**values),
            expectation=None,
            suite=suite.name,
        )
        expectation = expectations.get(case.id)
        if expectation is not None:
            case = replace(case, expectation=expectation)
        produced.append((case, index))
    return produced, given, []


def count_cases(matrix: Matrix, kind: CaseKind) -> list[tuple[int, int, int]]:
    """(suite, tile entry, cases it gives) for every tile entry, from the axes' lengths alone:
    a file that means 10^9 cases is measured without building one."""
    counts = []
    for s, suite in enumerate(matrix.suites):
        for t, entry in enumerate(suite.tile):
            layers: list[tuple[Axes | None, Loc]] = [(entry, ()), (suite, ()), (matrix.defaults, ())]
            n = 1
            for axis, fallback in axes_of(kind).items():
                n *= _axis_length(layers, axis, fallback)
            counts.append((s, t, n))
    return counts


def _layers(matrix: Matrix) -> list[tuple[Axes, Loc]]:
    """Every layer of ``matrix`` that sets axes, with its place, in file order."""
    layers: list[tuple[Axes, Loc]] = [(matrix.defaults, ("defaults",))]
    for s, suite in enumerate(matrix.suites):
        layers.append((suite, ("suites", s)))
        layers.extend((entry, ("suites", s, "tile", t)) for t, entry in enumerate(suite.tile))
    return layers


def _check_count(path: Path, document: Any, matrix: Matrix, kind: CaseKind, max_cases: int) -> None:
    """Refuse ``matrix`` if it would expand to more than ``max_cases`` cases, at the tile
    entry that gives the most."""
    counts = count_cases(matrix, kind)
    total = sum(n for _, _, n in counts)
    if total <= max_cases:
        return
    s, t, most = max(counts, key=lambda c: c[2])
    raise MatrixInvalid(
        [
            MatrixError(
                path,
                *position(document, ("suites", s, "tile", t)),
                f"the matrix expands to {total:,} cases, more than the limit of {max_cases:,} "
                f"(this tile entry gives {most:,}); split it into smaller matrices or raise the "
                "limit with --tile-max-cases",
            )
        ]
    )


def expand(
    path: Path,
    document: Any,
    matrix: Matrix,
    kind: CaseKind,
    max_cases: int = MAX_CASES,
    stale: list[str] | None = None,
    archs: Collection[str] | None = None,
    dtypes_on: DTypesOn | None = None,
) -> tuple[list[Case], dict[str, CasePlace]]:
    """All cases of ``matrix`` in file order and where each comes from; raise MatrixInvalid on
    more than ``max_cases`` cases, empty products or duplicates, on an arch not in ``archs`` (the
    backend's, None: any) or dtypes not in ``dtypes_on`` of their arch (:mod:`.support`), and on
    an expectation of an id that is no case, unless ``stale`` is given: such ids are appended to
    it instead.

    Each cause of duplicates is reported once, where it is (:mod:`.duplicates`): two problems
    without names in a list shared by many tile entries are one mistake, not one per case.
    """
    _check_count(path, document, matrix, kind, max_cases)
    refused = kind.check(_layers(matrix)) if kind.check is not None else None
    if refused is not None:
        raise MatrixInvalid([MatrixError(path, *position(document, refused[0]), refused[1])])
    errors: list[MatrixError] = []
    cases: list[Case] = []
    places: dict[str, CasePlace] = {}
    first_seen: dict[str, Loc] = {}
    reported: set[Hashable] = set()
    across: dict[tuple[Loc, Loc], list[str]] = {}

    def where(loc: Loc) -> tuple[int, int]:
        return position(document, loc)

    def column(loc: Loc) -> int | None:
        return block_column(document, loc)

    for s, suite in enumerate(matrix.suites):
        suite_line, _ = position(document, ("suites", s))
        for t in range(len(suite.tile)):
            loc: Loc = ("suites", s, "tile", t)
            line, col = position(document, loc)
            produced, axes, problems = _expand_tile(path, matrix, kind, s, t)
            for problem in problems:
                errors.append(MatrixError(path, line, col, problem))
            for place, message in unsupported(matrix.backend, axes, archs, dtypes_on, reported, where):
                errors.append(MatrixError(path, *place, message))
            here: dict[str, tuple[int, ...]] = {}
            for case, index in produced:
                if case.id in here:
                    found = same_axis(where, column, axes, here[case.id], index, case.id, kind.same_value)
                    if found is not None and found.key not in reported:
                        reported.add(found.key)
                        errors.append(MatrixError(path, *found.where, found.message))
                    continue
                if case.id in first_seen:
                    across.setdefault((first_seen[case.id], loc), []).append(case.id)
                    continue
                here[case.id] = index
                first_seen[case.id] = loc
                cases.append(case)
                expectation_line = None
                if case.expectation is not None:
                    expectation_line = position(document, ("expectations", case.id))[0]
                places[case.id] = CasePlace(line, col, suite_line, suite.name, expectation_line)
    for (first, then), ids in across.items():
        errors.append(
            MatrixError(
                path, *where(then), across_entries(ids, where(first), kind.id_pattern, kind.id_advice)
            )
        )
    for case_id in matrix.expectations or {}:
        if case_id in first_seen:
            continue
        if stale is not None:
            stale.append(case_id)
            continue
        errors.append(
            MatrixError(
                path,
                *position(document, ("expectations", case_id)),
                f"expectation for {case_id!r}, which is not a case of this matrix (--tile-update removes it)",
            )
        )
    if not cases and not errors:
        errors.append(MatrixError(path, *position(document, ("suites",)), "the matrix has no cases"))
    if errors:
        raise MatrixInvalid(errors)
    return cases, places


def load_matrix(
    path: Path,
    kinds: Mapping[str, CaseKind],
    backends: Collection[str] | None = None,
    text: str | None = None,
    max_cases: int = MAX_CASES,
    stale_ok: bool = False,
    archs: Mapping[str, Collection[str]] | None = None,
    dtypes: Mapping[str, DTypesOn] | None = None,
) -> LoadedMatrix:
    """Read, validate and expand one matrix file (or ``text`` that would be written to it).

    ``kinds``: what each backend declares of its cases (:mod:`.kinds`), by backend name; a
    matrix of a backend without one is refused. ``backends`` is the set of registered backend
    names; None skips that check. A file that
    would expand to more than ``max_cases`` cases is refused before any case is built. With
    ``stale_ok`` an expectation of an id that is no case is listed in :attr:`LoadedMatrix.stale`
    rather than refused (``--tile-update`` removes it). ``archs``: the archs of each backend
    that names them (a backend left out takes any); ``dtypes``: the dtype combinations of each
    backend that names them, by arch.
    """
    document = read_document(path) if text is None else parse_document(path, text)
    if not isinstance(document, CommentedMap):
        raise MatrixInvalid([MatrixError(path, 1, 1, "a matrix must be a YAML mapping")])
    errors: list[MatrixError] = []
    version = document.get("version")
    number = isinstance(version, int) and not isinstance(version, bool)
    if not number or version != FORMAT_VERSION:  # not "1", 1.0 or true
        where = position(document, ("version",))
        errors.append(
            MatrixError(
                path,
                *where,
                f"unsupported matrix version {version!r}; this plugin reads version {FORMAT_VERSION}"
                + (
                    ""
                    if version is None or number
                    else f" (the number {FORMAT_VERSION}, not a string, bool or float)"
                ),
            )
        )
        raise MatrixInvalid(errors)
    backend = document.get("backend")
    known = kinds.keys() if backends is None else backends
    kind = kinds.get(backend) if isinstance(backend, str) else None
    if isinstance(backend, str) and (backend not in known or kind is None):
        names = ", ".join(sorted(known)) or "none registered"
        where = position(document, ("backend",))
        errors.append(MatrixError(path, *where, f"unknown backend {backend!r} (known: {names})"))
    cases: list[Case] = []
    places: dict[str, CasePlace] = {}
    stale: list[str] | None = [] if stale_ok else None
    try:
        model = matrix_model(None if kind is None else kind.axes).model_validate(document)
        supported = (archs or {}).get(model.backend)
        if kind is not None:
            dtypes_on = (dtypes or {}).get(model.backend)
            cases, places = expand(path, document, model, kind, max_cases, stale, supported, dtypes_on)
    except ValidationError as exc:
        errors.extend(_validation_errors(path, document, exc))
    except MatrixInvalid as exc:
        errors.extend(exc.errors)
    if errors:
        raise MatrixInvalid(_at_most(sorted(dict.fromkeys(errors), key=lambda e: (e.line, e.col))))
    return LoadedMatrix(path, model, cases, places, stale or [])


def _at_most(errors: list[MatrixError]) -> list[MatrixError]:
    """The first :data:`MAX_ERRORS` errors and a line that counts the rest."""
    if len(errors) <= MAX_ERRORS:
        return errors
    last = errors[MAX_ERRORS]
    rest = len(errors) - MAX_ERRORS
    return [*errors[:MAX_ERRORS], replace(last, message=f"{rest:,} more errors from here on are not listed")]


def load_matrices(
    paths: Iterable[Path],
    kinds: Mapping[str, CaseKind],
    backends: Collection[str] | None = None,
    max_cases: int = MAX_CASES,
    stale_ok: bool = False,
    archs: Mapping[str, Collection[str]] | None = None,
    dtypes: Mapping[str, DTypesOn] | None = None,
) -> list[LoadedMatrix]:
    """Load every matrix, gathering the errors of all of them before raising; ``max_cases``
    bounds each file (``kinds``, ``stale_ok``, ``archs``, ``dtypes``: :func:`load_matrix`'s)."""
    loaded, errors = [], []
    for path in paths:
        try:
            loaded.append(
                load_matrix(
                    path, kinds, backends, max_cases=max_cases, stale_ok=stale_ok, archs=archs, dtypes=dtypes
                )
            )
        except MatrixInvalid as exc:
            errors.extend(exc.errors)
    if errors:
        raise MatrixInvalid(errors)
    return loaded
