"""A matrix case: one (arch, dtypes, tile, the backend's axes) combination."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Generic

from typing_extensions import TypeVar

from ..archs import arch_number
from ..dtypes import shape_label
from .kinds import CaseAxes
from .schema import Expectation, Shape

#: The backend's typed coordinates of a case (:class:`.kinds.CaseAxes`): the core reads only
#: the protocol; a backend's own code reads ``Case[ItsAxes]``.
AxesT = TypeVar("AxesT", bound=CaseAxes, default=CaseAxes)


@dataclass(frozen=True, slots=True)
class Case(Generic[AxesT]):
    """One parametrized test. ``id`` is its stable, readable name within the matrix."""

    matrix: Path
    backend: str
    arch: str
    act: str
    weight: str
    out: str
    dtype_label: str
    tile: Shape
    #: the backend's axes (:class:`.kinds.CaseKind`): a launcher's choices, a problem, ...
    axes: AxesT
    expectation: Expectation | None
    suite: str | None
    id: str = field(init=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "id", self._make_id())

    def _make_id(self) -> str:
        return "-".join([self.arch, self.dtype_label, shape_label(self.tile), *self.axes.id_words()])

    @property
    def expected(self) -> str:
        """``pass`` or the stage this case is known to fail at."""
        return self.expectation.stage if self.expectation else "pass"

    @property
    def sm(self) -> int:
        """The arch as a number: ``sm120`` -> 120."""
        return arch_number(self.arch)

    def _frame(self) -> dict[str, Any]:
        return {
            "arch": self.arch,
            "act": self.act,
            "weight": self.weight,
            "out": self.out,
            "tile": shape_label(self.tile),
        }

    def describe(self) -> dict[str, Any]:
        """The case's coordinates as the matrix set them, for failure reports: the frame's, then
        the backend's (:meth:`.kinds.CaseAxes.describe`)."""
        return {**self._frame(), **self.axes.describe()}

    def record(self) -> dict[str, Any]:
        """The case's coordinates as the results file records them (:meth:`.kinds.CaseAxes.record`)."""
        return {**self._frame(), **self.axes.record()}
