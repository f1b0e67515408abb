"""What a backend declares about its cases, so that the core knows none of its axes.

The core's frame of a case is its arch, dtypes and CTA tile: the coordinates every report
groups by. Everything past them (a grouped GEMM's problem and launcher choices, ...) is the
backend's: a :class:`CaseKind` names the backend's matrix keys (a pydantic model the matrix
schema joins to its frame, :func:`.schema.matrix_model`), the value of each key no layer sets, and
how a case's values become its typed coordinates (:class:`CaseAxes`), which give the words of
the case id, the coordinates a results file records and the case's JUnit properties. As the
CUTLASS profiler lets each operation declare its own arguments.

Plugins return their kinds from ``pytest_tileconform_case_kinds`` (:mod:`..newhooks`), which
pytest and the ``tileconform`` command line both call.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

from pydantic import BaseModel

from .duplicates import Loc, SameValue


class CaseAxes(Protocol):
    """A case's coordinates past the core's frame, typed by the backend that declares them."""

    def id_words(self) -> list[str]:
        """The words of the case id after ``arch-dtypes-tile`` (before the problem's name)."""
        ...  # pragma: no cover

    def describe(self) -> dict[str, Any]:
        """The coordinates the matrix set (JSON values), after the frame's: what a failure shows."""
        ...  # pragma: no cover

    def record(self) -> dict[str, Any]:
        """The coordinates as a results file records them: :meth:`describe`'s, with what the
        matrix left out stated (the backend's defaults)."""
        ...  # pragma: no cover

    def properties(self) -> list[tuple[str, str]]:
        """The JUnit properties of the case after arch, dtypes and tile."""
        ...  # pragma: no cover


@runtime_checkable
class Expanding(Protocol):
    """An item of an axis's list that stands for several values (a preset name for a model's
    problems): the loader counts it before it makes any (a file that means 10^9 cases is refused
    without building one) and expands it only then."""

    @property
    def count(self) -> int: ...  # pragma: no cover

    def expand(self) -> tuple[Any, ...]: ...  # pragma: no cover


#: The layers of a matrix that set axes (the defaults, each suite, each tile entry), with their
#: places, in file order -> the place and message of a matrix refused before any case is made
Check = Callable[[Sequence[tuple[Any, Loc]]], "tuple[Loc, str] | None"]


@dataclass(frozen=True)
class CaseKind:
    """A backend's declaration of its cases."""

    #: the ``backend:`` name of the matrices whose cases these are
    backend: str
    #: the keys the backend adds to a suite, the defaults and a tile entry: a pydantic model whose
    #: every field is a list of values or None (not set there); it must forbid other keys
    axes: type[BaseModel]
    #: each axis's values where no layer sets it (None: the matrix must set it), in the order
    #: the axes multiply: between the frame's arch and dtype and its problems
    defaults: Mapping[str, list[Any] | None]
    #: one value of each axis (keywords named as in ``defaults``) -> the case's coordinates
    make: Callable[..., CaseAxes]
    #: words of the case id in their order, and an example of making two cases differ, for the
    #: message on duplicate ids
    id_pattern: str = ""
    id_advice: str = ""
    #: refuses a matrix before its cases are made (what expanding it would cost), or None
    check: Check | None = None
    #: the backend's advice on duplicate ids, by axis (a list of problems without names)
    same_value: Mapping[str, SameValue] = field(default_factory=dict)
    #: the backend's typed record of its keys in a results file (what :meth:`CaseAxes.record`
    #: writes), which reads what an older file left out as the backend's default; None: its
    #: keys are compared as written
    record: type[BaseModel] | None = None


def records_of(kinds: Iterable[CaseKind]) -> list[type[BaseModel]]:
    """The typed records the backends of ``kinds`` declare (the ``record`` of a :class:`CaseKind`)."""
    return [kind.record for kind in kinds if kind.record is not None]


def kinds_by_backend(found: Iterable[Iterable[CaseKind]]) -> dict[str, CaseKind]:
    """The kinds the plugins returned (one list each), by backend; ValueError for two plugins
    declaring one backend's cases."""
    kinds: dict[str, CaseKind] = {}
    for kind in (kind for listed in found for kind in listed):
        if kind.backend in kinds:
            raise ValueError(f"two plugins declare the cases of backend {kind.backend!r}")
        kinds[kind.backend] = kind
    return kinds
