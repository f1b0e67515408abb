"""The FlashInfer MoE backend's case axes: the launcher's choices past arch, dtypes, tile and
problem, each declared once in :class:`MoeAxes` (its type, its default, the type a matrix writes
one value as, what it means), with TensorRT-LLM's enums written once here. What a matrix may set
(:data:`MoeMatrixAxes`), the defaults of :data:`KIND` and what a results file records
(:data:`MoeRecord`) are made from that declaration.

The core knows none of this (:mod:`..matrix.kinds`); :data:`KIND` declares it. Cheap to import:
the command line reads matrices without torch or FlashInfer."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Annotated, Any, Literal, Optional, TypeAlias, cast, get_args

from pydantic import Field, StrictBool, ValidationError, create_model

from ..archs import arch_number
from ..dtypes import shape_label
from ..matrix.cases import Case
from ..matrix.kinds import CaseKind
from ..matrix.schema import ListOf, Shape, ShapeField, Strict
from . import NAME
from .problem import Problem, ProblemItem, check_routing, same_problem

#: The launcher's epilogue fusions (``EpilogueFusion::NONE``, ``FINALIZE``, ``ACTIVATION``)
Fusion = Literal["none", "finalize", "activation"]
FUSIONS: tuple[str, ...] = get_args(Fusion)
#: SM10x epilogue schedule (TensorRT-LLM's ``EpilogueScheduleType`` TMA or NO_SMEM)
Epilogue = Literal["tma", "nosmem"]
#: SM90 mixed-input mainloop schedule (TensorRT-LLM's ``MainloopScheduleType``): the two
#: warp-specialized kernels and the two single-warpgroup small-K ones
#: (``sm90_generic_mixed_moe_small_k_kernelLauncher``)
Mainloop = Literal["pingpong", "cooperative", "single_warpgroup_prefill", "single_warpgroup_rolling"]
MIXED_MAINLOOPS: tuple[str, ...] = get_args(Mainloop)
#: Another arch's kernel set that the case's arch's FlashInfer module compiles too (its sm103
#: module builds SM100's kernels for sm_103a)
KernelArch = Literal["sm100"]


def _axis(matrix: Any, about: str) -> dict[str, Any]:
    """What a launcher axis of :class:`MoeAxes` is besides its type and default: the type a matrix
    writes one value as (:data:`MoeMatrixAxes`) and what it means."""
    return {"matrix": matrix, "about": about}


@dataclass(frozen=True, slots=True)
class MoeAxes:
    """A case's launcher choices and its problem."""

    problem: Problem
    # the launcher's axes, in the order they multiply
    cluster: Shape = field(default=(1, 1, 1), metadata=_axis(ShapeField, "the CTA cluster"))
    dynamic_cluster: Shape | None = field(
        default=None,
        metadata=_axis(
            ShapeField,
            "SM10x: a dynamic-CGA kernel launched with this runtime cluster (cluster then says 1SM "
            "or 2SM); None: a static cluster",
        ),
    )
    swap_ab: bool = field(default=False, metadata=_axis(StrictBool, "the launcher swaps A and B"))
    fusion: str = field(default="none", metadata=_axis(Fusion, "the epilogue fusion"))
    epilogue: str | None = field(
        default=None,
        metadata=_axis(
            Epilogue, "SM10x: the epilogue schedule; None: the TMA epilogue, the launcher's default"
        ),
    )
    mainloop: str | None = field(
        default=None,
        metadata=_axis(
            Mainloop,
            f"SM90 mixed input: the mainloop schedule ({', '.join(MIXED_MAINLOOPS)}); None: the "
            "launcher's (uniform inputs)",
        ),
    )
    kernel_arch: str | None = field(
        default=None,
        metadata=_axis(
            KernelArch,
            "another arch's kernel set built for this arch (sm103: sm100 builds the SM100 kernel "
            "FlashInfer's sm103 module compiles too); None: the arch's own kernels",
        ),
    )
    pdl: bool | None = field(
        default=None,
        metadata=_axis(
            StrictBool,
            "programmatic dependent launch on or off; None: what the backend does by default "
            "(FlashInfer 0.7.4 turns it on from SM90: enable_pdl=None becomes device_support_pdl, "
            "major >= 9)",
        ),
    )

    @property
    def kernel_sm(self) -> int:
        """:attr:`kernel_arch` as a number (0: the arch's own kernels)."""
        return arch_number(self.kernel_arch) if self.kernel_arch else 0

    def id_words(self) -> list[str]:
        words = ["c" + shape_label(self.cluster)]
        if self.dynamic_cluster is not None:
            words.append("dyn" + shape_label(self.dynamic_cluster))
        words.append(self.fusion)
        if self.epilogue == "nosmem":  # the TMA epilogue, given or not, keeps the ids cases had
            words.append("nosmem")
        if self.mainloop is not None:
            words.append(self.mainloop)
        if self.kernel_arch is not None:
            words.append(f"{self.kernel_arch}kernel")
        if self.swap_ab:
            words.append("swapab")
        if self.pdl is not None:  # cases that leave it to the backend keep the ids they had
            words.append("pdl" if self.pdl else "nopdl")
        if self.problem.name:
            words.append(self.problem.name)
        return words

    def describe(self) -> dict[str, Any]:
        """``pdl``, the SM10x and mixed-input choices and the problem's ``bias``, ``seed``,
        ``tokens`` and ``top_k`` appear where they are set (not the default), so a case that sets
        none of them is described as it was before they existed."""
        found: dict[str, Any] = {
            "cluster": shape_label(self.cluster),
            "swap_ab": self.swap_ab,
            "fusion": self.fusion,
        }
        if self.epilogue is not None:
            found["epilogue"] = self.epilogue
        if self.dynamic_cluster is not None:
            found["dynamic_cluster"] = shape_label(self.dynamic_cluster)
        if self.mainloop is not None:
            found["mainloop"] = self.mainloop
        if self.kernel_arch is not None:
            found["kernel_arch"] = self.kernel_arch
        if self.pdl is not None:
            found["pdl"] = self.pdl
        found["problem"] = {
            "name": self.problem.name,
            "rows": list(self.problem.rows_per_expert),
            "n": self.problem.n,
            "k": self.problem.k,
            **self.problem.recorded(),
        }
        return found

    def record(self) -> dict[str, Any]:
        """:meth:`describe` with every launcher choice and problem field stated (None: the
        launcher's default), as results files have recorded them (:class:`MoeRecord`)."""
        return MoeRecord.model_validate(self.describe()).model_dump()

    def properties(self) -> list[tuple[str, str]]:
        return [
            ("cluster", shape_label(self.cluster)),
            ("swap_ab", str(self.swap_ab).lower()),
            ("fusion", self.fusion),
        ]


_SHAPE = r"^\d+x\d+x\d+$"


def _shape(label: str) -> Shape:
    m, n, k = (int(v) for v in label.split("x"))
    return (m, n, k)


class ProblemRecord(Strict):
    """A case's :class:`.problem.Problem` as a results file records it: rows listed per expert,
    each field stated (a file written before a field existed reads as its default)."""

    name: str | None = None
    rows: list[int] = Field(description="rows of each expert")
    n: int
    k: int
    bias: bool = Field(default=False, description="the finalize epilogue adds a bias per expert")
    seed: int = Field(default=0, description="the seed the routing and the inputs were drawn with")
    tokens: int | None = Field(default=None, description="tokens routed (a preset), else None")
    top_k: int | None = Field(default=None, description="experts per token (a preset), else None")


#: The launcher's axes of :class:`MoeAxes` (every field but its problem), in the order they multiply.
LAUNCHER_AXES: tuple[dataclasses.Field[Any], ...] = tuple(
    axis for axis in dataclasses.fields(MoeAxes) if axis.name != "problem"
)


def _is_shape(name: str) -> bool:
    return any(axis.name == name and axis.metadata["matrix"] is ShapeField for axis in LAUNCHER_AXES)


def _listed(axis: dataclasses.Field[Any]) -> tuple[Any, Any]:
    """The key a matrix sets ``axis`` with: a list of its values (one value alone is a list of one)."""
    one = axis.metadata["matrix"]
    values = Optional[Annotated[list[one], ListOf]]  # type: ignore[valid-type]  # noqa: UP045
    return values, Field(default=None, description=axis.metadata["about"])


def _recorded(axis: dataclasses.Field[Any]) -> tuple[Any, Any]:
    """The key a results file records ``axis`` as: a shape as ``MxNxK``, a name as text."""
    matrix, default = axis.metadata["matrix"], cast(Any, axis.default)
    value: Any = StrictBool if matrix is StrictBool else str
    if matrix is ShapeField:
        value = Annotated[str, Field(pattern=_SHAPE)]
        default = None if default is None else shape_label(default)
    if default is None:
        value = Optional[value]  # noqa: UP045
    return value, Field(default=default, description=axis.metadata["about"])


_MATRIX_KEYS: dict[str, Any] = {
    **{axis.name: _listed(axis) for axis in LAUNCHER_AXES},
    "problems": (
        Optional[Annotated[list[ProblemItem], ListOf]],  # noqa: UP045
        Field(default=None, description="the grouped problems: rows per expert, n and k, or preset names"),
    ),
}
#: The keys a suite, the defaults and a tile entry of a FlashInfer matrix may set.
MoeMatrixAxes: type[Strict] = create_model("MoeMatrixAxes", __base__=Strict, **_MATRIX_KEYS)

_RECORD_KEYS: dict[str, Any] = {
    "problem": (Optional[ProblemRecord], Field(default=None, description="the grouped problem")),  # noqa: UP045
    **{axis.name: _recorded(axis) for axis in LAUNCHER_AXES},
}
#: :meth:`MoeAxes.describe` as a results file records it (the backend's part of a case record,
#: :class:`..results.model.CaseRecord`), every axis stated.
MoeRecord: type[Strict] = create_model("MoeRecord", __base__=Strict, **_RECORD_KEYS)


class RecordError(ValueError):
    """A results file's case record that is not this backend's: the message names the key;
    ``foreign`` when every problem is a key this backend does not have (another backend's case,
    in a results file of a run of several)."""

    def __init__(self, message: str, foreign: bool = False) -> None:
        super().__init__(message)
        self.foreign = foreign


def recorded_axes(coordinates: Mapping[str, Any]) -> dict[str, Any]:
    """The launcher choices a results file recorded for a case (its backend's keys,
    :meth:`..results.model.CaseRecord.coordinates`), by axis as :class:`MoeAxes` holds them
    (shapes as tuples); :class:`RecordError` for a key this backend does not have or a value it
    does not read."""
    try:
        record = MoeRecord.model_validate(coordinates)
    except ValidationError as exc:
        problems = []
        errors = exc.errors(include_url=False)
        for err in errors:
            where = ".".join(str(p) for p in err["loc"])
            what = "unknown key" if err["type"] == "extra_forbidden" else err["msg"]
            problems.append(f"{where}: {what}")
        foreign = all(err["type"] == "extra_forbidden" for err in errors)
        raise RecordError("; ".join(problems), foreign) from None
    found = {axis.name: getattr(record, axis.name) for axis in LAUNCHER_AXES}
    return {name: _shape(v) if _is_shape(name) and v is not None else v for name, v in found.items()}


#: A case of this backend: the core's frame with :class:`MoeAxes`.
MoeCase: TypeAlias = Case[MoeAxes]


def moe_cases(cases: Iterable[Case]) -> list[MoeCase]:
    """Cases of this backend's matrices (loaded with :data:`KIND`), typed as its own."""
    found: list[MoeCase] = []
    for case in cases:
        if not isinstance(case.axes, MoeAxes):
            raise TypeError(f"{case.id} is a case of backend {case.backend!r}, not {NAME!r}")
        found.append(cast(MoeCase, case))
    return found


def _make(problems: Problem, **choices: Any) -> MoeAxes:
    """A case's axes from one value of each axis of :data:`KIND` (``problems`` gives one problem)."""
    return MoeAxes(problem=problems, **choices)


KIND = CaseKind(
    backend=NAME,
    axes=MoeMatrixAxes,
    defaults={
        **{axis.name: [axis.default] for axis in LAUNCHER_AXES},
        "problems": None,  # the matrix gives them
    },
    make=_make,
    id_pattern="cCLUSTER[-dynCLUSTER]-fusion[-nosmem][-MAINLOOP][-sm100kernel][-swapab][-pdl|-nopdl]"
    "[-problem name]",
    id_advice="give their problems different names",
    check=check_routing,
    same_value={"problems": same_problem},
    record=MoeRecord,
)
#: This backend's kinds, as :func:`..matrix.load.load_matrix` takes them (its commands read its
#: matrices without the plugin manager)
KINDS: dict[str, CaseKind] = {NAME: KIND}
