"""The matrix file format (version 1), as pydantic models.

A matrix names a backend, optional defaults and a list of suites. Each suite is a
cartesian product over arch x dtype x tile x cluster x swap_ab x fusion x problem; a tile
entry may be a mapping that overrides the suite's other axes for that tile. Known-bad
cases are listed under ``expectations`` by case id.

Tile shapes are CTA M x N x K with K counted in *elements* of the activation type (the
TensorRT-LLM enum names, e.g. ``CtaShape128x128x64B``, count K in bytes).
"""

from __future__ import annotations

import json
import re
from typing import Annotated, Any, Literal

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, model_validator

from ..dtypes import Role, canonical_name, dtype_label
from ..verdict import EXPECTATIONS

FORMAT_VERSION = 1

ARCH_PATTERN = re.compile(r"^sm\d{2,3}$")

Shape = tuple[int, int, int]


def _parse_shape(value: Any) -> Shape:
    """``128x256x64`` (or a list of three ints) -> (128, 256, 64)."""
    if isinstance(value, str):
        parts = value.lower().split("x")
        if len(parts) == 3 and all(p.strip().isdigit() for p in parts):
            shape = tuple(int(p) for p in parts)
        else:
            raise ValueError(f"shape {value!r} is not MxNxK with three positive integers")
    elif (
        isinstance(value, (list, tuple))
        and len(value) == 3
        and all(isinstance(v, int) and not isinstance(v, bool) for v in value)
    ):
        shape = tuple(value)
    else:
        raise ValueError(f"shape {value!r} is not MxNxK with three positive integers")
    if any(v <= 0 for v in shape):
        raise ValueError(f"shape {value!r} has a dimension that is not positive")
    return shape  # type: ignore[return-value]


def _dtype_validator(role: Role) -> BeforeValidator:
    return BeforeValidator(lambda value: canonical_name(value, role))


def _as_list(value: Any) -> Any:
    """Axes accept a scalar as a one-element list."""
    return value if isinstance(value, list) else [value]


def _check_arch(value: Any) -> str:
    name = str(value).lower()
    if not ARCH_PATTERN.match(name):
        raise ValueError(f"arch {value!r} is not of the form sm<major><minor> (e.g. sm90, sm120)")
    return name


ShapeField = Annotated[Shape, BeforeValidator(_parse_shape)]
Arch = Annotated[str, BeforeValidator(_check_arch)]
Fusion = Literal["none", "finalize"]


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class DTypes(Strict):
    """Activation, weight and output types; a plain string means all three are that type."""

    act: Annotated[str, _dtype_validator("activation")]
    weight: Annotated[str, _dtype_validator("weight")]
    out: Annotated[str, _dtype_validator("output")]

    @model_validator(mode="before")
    @classmethod
    def _from_string(cls, value: Any) -> Any:
        if isinstance(value, str):
            return {"act": value, "weight": value, "out": value}
        return value

    @property
    def label(self) -> str:
        return dtype_label(self.act, self.weight, self.out)


class Problem(Strict):
    """One grouped problem: ``rows`` per expert (a list, or one count with ``experts``)."""

    name: str | None = None
    experts: int | None = Field(default=None, gt=0)
    rows: tuple[Annotated[int, Field(ge=0)], ...]
    n: int = Field(gt=0)
    k: int = Field(gt=0)

    @model_validator(mode="before")
    @classmethod
    def _expand_rows(cls, value: Any) -> Any:
        """``rows: 64`` with ``experts: 8`` means 64 rows for each of the 8 experts."""
        if isinstance(value, dict) and isinstance(value.get("rows"), int):
            experts = value.get("experts")
            if not isinstance(experts, int) or experts <= 0:
                raise ValueError("a single 'rows' count needs 'experts'")
            return {**value, "rows": [value["rows"]] * experts}
        return value

    @model_validator(mode="after")
    def _experts_agree(self) -> Problem:
        if not self.rows:
            raise ValueError("rows is empty")
        if self.experts is not None and self.experts != len(self.rows):
            raise ValueError(f"experts={self.experts} but rows lists {len(self.rows)} experts")
        return self

    @property
    def rows_per_expert(self) -> tuple[int, ...]:
        return tuple(self.rows)

    def flow(self) -> str:
        """The problem as one YAML flow mapping, as a matrix file may write it."""
        parts = [] if self.name is None else [f"name: {json.dumps(self.name)}"]
        if self.experts is not None:
            parts.append(f"experts: {self.experts}")
        parts += [f"rows: [{', '.join(map(str, self.rows))}]", f"n: {self.n}", f"k: {self.k}"]
        return "{" + ", ".join(parts) + "}"


#: The problem generated matrices and ``tileconform bisect`` judge unless told otherwise, and the
#: shipped matrices' problem: 4 experts, one with no rows, one with a single row, two whose rows
#: are not multiples of 128.
DEFAULT_PROBLEM = Problem(experts=4, rows=(0, 1, 77, 300), n=384, k=512)


ListOf = BeforeValidator(_as_list)


class Axes(Strict):
    """The axes a suite, the defaults and a tile entry may set."""

    arch: Annotated[list[Arch], ListOf] | None = None
    dtype: Annotated[list[DTypes], ListOf] | None = None
    cluster: Annotated[list[ShapeField], ListOf] | None = None
    swap_ab: Annotated[list[bool], ListOf] | None = None
    fusion: Annotated[list[Fusion], ListOf] | None = None
    problems: Annotated[list[Problem], ListOf] | None = None


class TileEntry(Axes):
    """A tile, optionally overriding the suite's other axes for this tile only."""

    shape: ShapeField

    @model_validator(mode="before")
    @classmethod
    def _from_shape(cls, value: Any) -> Any:
        if isinstance(value, (str, list)):
            return {"shape": value}
        return value


class Suite(Axes):
    name: str | None = None
    tile: Annotated[list[TileEntry], ListOf, Field(min_length=1)]


class Expectation(Strict):
    """A known-bad case: the stage it is rejected at and why. Written by ``--tile-update``."""

    stage: Literal[EXPECTATIONS[1:]]  # type: ignore[valid-type]
    reason: str | None = None
    status: str | None = None
    smem: int | None = None
    limit: int | None = None
    source: str | None = None


class Matrix(Strict):
    version: Literal[1]
    backend: str
    defaults: Axes = Axes()
    suites: list[Suite] = Field(min_length=1)
    expectations: dict[str, Expectation] | None = None
