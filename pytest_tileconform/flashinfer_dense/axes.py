"""The dense backend's case axes: past arch, dtypes and CTA tile, the tactic's ``swap_ab``,
``use_stream_k`` (its scheduler) and cluster shape, the weights' scale group where the family has
one (SM90 fpA_intB), and the GEMM's M x N x K; what a matrix may set (:class:`DenseMatrixAxes`)
and what a results file records (:class:`DenseRecord`). Cheap to import: the command line reads
matrices without FlashInfer."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated, Any, Literal

from pydantic import Field, StrictBool, StrictInt

from ..dtypes import shape_label
from ..matrix.kinds import CaseKind
from ..matrix.schema import ListOf, Shape, ShapeField, Strict
from . import NAME

Dispatch = Literal["deepgemm", "static"]
BScales = Literal["128x128", "1x128"]


class DenseMatrixAxes(Strict):
    """The keys a suite, the defaults and a tile entry of a dense matrix may set."""

    swap_ab: Annotated[list[StrictBool], ListOf] | None = None
    #: the tactic's scheduler: stream-K (true) or data-parallel (false)
    stream_k: Annotated[list[StrictBool], ListOf] | None = None
    #: the tactic's cluster shape (SM10x runners offer several per tile; SM12x only 1x1x1)
    cluster: Annotated[list[ShapeField], ListOf] | None = None
    #: the GEMM's M x N x K (D is M x N); not ``problem``, which results records type as the
    #: MoE backend's grouped problem
    mnk: Annotated[list[ShapeField], ListOf] | None = None
    #: weight-only GEMMs (SM90 fpA_intB): the scales' group along K, 0 for one scale per output
    #: channel; the other families leave it out
    group: Annotated[list[StrictInt], ListOf] | None = None
    #: SM90 FP8 block-scale GEMM: the runner's dispatch, DeepGEMM's run-time compiled kernels
    #: (FlashInfer's default) or the kernels built into the module (``TRTLLM_DG_ENABLED=0``);
    #: the other families leave it out
    dispatch: Annotated[list[Dispatch], ListOf] | None = None
    #: SM90 FP8 block-scale GEMM with fp8 weights: the weight scales' block, one of the two shapes
    #: its binding accepts (128x128: per block, 1x128: per row)
    b_scales: Annotated[list[BScales], ListOf] | None = None


#: the cluster of a tactic that names none (every SM12x tactic)
CLUSTER_1X1X1: Shape = (1, 1, 1)
_SHAPE = r"^\d+x\d+x\d+$"


class DenseRecord(Strict):
    """:meth:`DenseAxes.record` as a results file records it (the backend's part of a case record,
    :class:`..results.model.CaseRecord`), every axis stated: a file written before the stream-K or
    the cluster axis, or one that left them out, reads as the data-parallel 1x1x1 tactic it judged."""

    swap_ab: StrictBool
    stream_k: StrictBool = Field(
        default=False, description="the tactic's scheduler: stream-K (true) or data-parallel (false)"
    )
    cluster: Annotated[str, Field(pattern=_SHAPE, description="the tactic's cluster shape")] = shape_label(
        CLUSTER_1X1X1
    )
    mnk: Annotated[str, Field(pattern=_SHAPE, description="the GEMM's M x N x K")]
    group: StrictInt | None = Field(
        default=None, description="a weight-only GEMM's scale group along K (0: per channel); none otherwise"
    )
    dispatch: Dispatch | None = Field(
        default=None, description="an FP8 block-scale GEMM's dispatch (deepgemm or static); none otherwise"
    )
    b_scales: BScales | None = Field(
        default=None, description="an FP8 block-scale GEMM's fp8 weight scale block; none otherwise"
    )


@dataclass(frozen=True, slots=True)
class DenseAxes:
    swap_ab: bool
    mnk: Shape
    #: the tactic's scheduler; only FlashInfer's fp4 runners offer stream-K tactics
    stream_k: bool = False
    cluster: Shape = CLUSTER_1X1X1
    group: int | None = None
    dispatch: str | None = None
    b_scales: str | None = None

    def id_words(self) -> list[str]:
        m, n, k = self.mnk
        flags = [w for w, on in (("swapab", self.swap_ab), ("streamk", self.stream_k)) if on]
        cluster = [] if self.cluster == CLUSTER_1X1X1 else [f"c{shape_label(self.cluster)}"]
        group = [] if self.group is None else [f"g{self.group}" if self.group else "gcol"]
        blockscale = [w for w in (self.dispatch, self.b_scales and f"sb{self.b_scales}") if w]
        return [*cluster, *flags, *group, *blockscale, f"m{m}n{n}k{k}"]

    def describe(self) -> dict[str, Any]:
        # stream_k, cluster and group only where not the default: a data-parallel 1x1x1 tactic
        # reads as one of a runner without stream-K or cluster choices (SM120 mxfp8's); the
        # record states them (DenseRecord)
        return {
            "swap_ab": self.swap_ab,
            **({"stream_k": True} if self.stream_k else {}),
            **({} if self.cluster == CLUSTER_1X1X1 else {"cluster": shape_label(self.cluster)}),
            **({} if self.group is None else {"group": self.group}),
            **({} if self.dispatch is None else {"dispatch": self.dispatch}),
            **({} if self.b_scales is None else {"b_scales": self.b_scales}),
            "mnk": shape_label(self.mnk),
        }

    def record(self) -> dict[str, Any]:
        # every axis of the case's family stated; the scale group only for a weight-only GEMM,
        # so the other families' records are what they were
        return DenseRecord.model_validate(self.describe()).model_dump(exclude_none=True)

    def properties(self) -> list[tuple[str, str]]:
        return [(key, str(value).lower()) for key, value in self.describe().items()]


KIND = CaseKind(
    backend=NAME,
    axes=DenseMatrixAxes,
    defaults={
        "swap_ab": [False, True],
        "stream_k": [False],
        "cluster": [CLUSTER_1X1X1],
        "group": [None],
        "dispatch": [None],
        "b_scales": [None],
        "mnk": [(256, 256, 512)],
    },
    make=DenseAxes,
    id_pattern="[cCMxCNxCK-][swapab-][streamk-][gG-|gcol-][deepgemm-|static-][sbBMxBK-]mMnNkK",
    id_advice="give each problem its own M, N or K",
    record=DenseRecord,
)
