"""The dense backend's case axes: past arch, dtypes and CTA tile, the tactic's ``swap_ab`` and the
GEMM's M x N x K. Cheap to import: the command line reads matrices without FlashInfer."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated, Any

from pydantic import StrictBool

from ..dtypes import shape_label
from ..matrix.kinds import CaseKind
from ..matrix.schema import ListOf, Shape, ShapeField, Strict
from . import NAME


class DenseMatrixAxes(Strict):
    """The keys a suite, the defaults and a tile entry of a dense matrix may set."""

    swap_ab: Annotated[list[StrictBool], ListOf] | None = None
    #: the GEMM's M x N x K (D is M x N); not ``problem``, which results records type as the
    #: MoE backend's grouped problem
    mnk: Annotated[list[ShapeField], ListOf] | None = None


@dataclass(frozen=True, slots=True)
class DenseAxes:
    swap_ab: bool
    mnk: Shape

    def id_words(self) -> list[str]:
        m, n, k = self.mnk
        return [*(["swapab"] if self.swap_ab else []), f"m{m}n{n}k{k}"]

    def describe(self) -> dict[str, Any]:
        return {"swap_ab": self.swap_ab, "mnk": shape_label(self.mnk)}

    def record(self) -> dict[str, Any]:
        return self.describe()

    def properties(self) -> list[tuple[str, str]]:
        return [("swap_ab", str(self.swap_ab).lower()), ("mnk", shape_label(self.mnk))]


KIND = CaseKind(
    backend=NAME,
    axes=DenseMatrixAxes,
    defaults={"swap_ab": [False, True], "mnk": [(256, 256, 512)]},
    make=DenseAxes,
    id_pattern="[swapab-]mMnNkK",
    id_advice="give each problem its own M, N or K",
)
