"""The dense backend's case axes: past arch, dtypes and CTA tile, the tactic's ``swap_ab`` and
``use_stream_k`` (its scheduler) and the GEMM's M x N x K. Cheap to import: the command line reads
matrices without FlashInfer."""

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
    #: the tactic's scheduler: stream-K (true) or data-parallel (false)
    stream_k: Annotated[list[StrictBool], ListOf] | None = None
    #: the GEMM's M x N x K (D is M x N); not ``problem``, which results records type as the
    #: MoE backend's grouped problem
    mnk: Annotated[list[ShapeField], ListOf] | None = None


@dataclass(frozen=True, slots=True)
class DenseAxes:
    swap_ab: bool
    mnk: Shape
    #: the tactic's scheduler; only FlashInfer's fp4 runners offer stream-K tactics
    stream_k: bool = False

    def id_words(self) -> list[str]:
        m, n, k = self.mnk
        flags = [w for w, on in (("swapab", self.swap_ab), ("streamk", self.stream_k)) if on]
        return [*flags, f"m{m}n{n}k{k}"]

    def describe(self) -> dict[str, Any]:
        # stream_k only where set: a data-parallel tactic records as one of a runner without
        # stream-K tactics (mxfp8's) does, so both families' reports name their cases alike
        return {
            "swap_ab": self.swap_ab,
            **({"stream_k": True} if self.stream_k else {}),
            "mnk": shape_label(self.mnk),
        }

    def record(self) -> dict[str, Any]:
        return self.describe()

    def properties(self) -> list[tuple[str, str]]:
        return [(key, str(value).lower()) for key, value in self.describe().items()]


KIND = CaseKind(
    backend=NAME,
    axes=DenseMatrixAxes,
    defaults={"swap_ab": [False, True], "stream_k": [False], "mnk": [(256, 256, 512)]},
    make=DenseAxes,
    id_pattern="[swapab-][streamk-]mMnNkK",
    id_advice="give each problem its own M, N or K",
)
