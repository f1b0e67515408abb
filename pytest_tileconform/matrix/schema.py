"""The matrix file format (version 1), as pydantic models: the core's frame.

A matrix names a backend, optional defaults and a list of suites. Each suite is a cartesian
product over arch x dtype x the backend's axes (:mod:`.kinds`: a launcher's cluster, fusion,
problem, ... are the backend's own); a tile entry may be a mapping that overrides the suite's other axes for
that tile. :func:`matrix_model` joins a backend's axes to this frame. Known-bad cases are listed
under ``expectations`` by case id.

Tile shapes are CTA M x N x K with K counted in *elements* of the activation type (a
library's enum names may count K in bytes: :func:`..dtypes.tile_k_elements`).
"""

from __future__ import annotations

import re
from functools import cache
from typing import Annotated, Any, Literal

from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    StrictInt,
    create_model,
    model_validator,
)

from ..dtypes import Role, canonical_name, dtype_label, parse_dtypes
from ..verdict import EXPECTATIONS
from .bounds import MAX_NAME, NAME_ALPHABET

FORMAT_VERSION = 1

ARCH_PATTERN = re.compile(r"sm[0-9]{2,3}")
NAME_PATTERN = re.compile(r"[A-Za-z0-9._-]+")
#: A CTA tile or cluster dimension; real ones are at most a few hundred.
MAX_SHAPE = 4096

Shape = tuple[int, int, int]


def _parse_shape(value: Any) -> Shape:
    """``128x256x64`` (or a list of three ints) -> (128, 256, 64)."""
    if isinstance(value, str):
        parts = value.lower().split("x")
        if len(parts) == 3 and all(p.strip().isascii() and p.strip().isdigit() for p in parts):
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
    if any(v > MAX_SHAPE for v in shape):
        raise ValueError(f"shape {value!r} has a dimension above {MAX_SHAPE}")
    return shape  # type: ignore[return-value]


def _dtype_validator(role: Role) -> BeforeValidator:
    return BeforeValidator(lambda value: canonical_name(value, role))


def _as_list(value: Any) -> Any:
    """Axes accept a scalar as a one-element list."""
    return value if isinstance(value, list) else [value]


def _check_arch(value: Any) -> str:
    name = value.lower() if isinstance(value, str) and value.isascii() else ""
    if not ARCH_PATTERN.fullmatch(name):
        raise ValueError(f"arch {value!r} is not of the form sm<major><minor> (e.g. sm90, sm120)")
    return name


def _check_name(value: str) -> str:
    """Names become part of pytest node ids and case ids: ``::``, ``/`` or a space would split
    or misplace them, so only a safe alphabet is allowed."""
    if not NAME_PATTERN.fullmatch(value) or len(value) > MAX_NAME:
        raise ValueError(f"name {value!r} must be 1 to {MAX_NAME} of {NAME_ALPHABET}")
    return value


Name = Annotated[str, Field(strict=True), AfterValidator(_check_name)]


ShapeField = Annotated[Shape, BeforeValidator(_parse_shape)]
Arch = Annotated[str, BeforeValidator(_check_arch)]


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
        """A string is a combination as every ``--dtype`` spells it (:func:`..dtypes.parse_dtypes`,
        whose message a combination it cannot read gets); one bare name it cannot read is left to
        the fields, whose messages name the role that refuses it."""
        if isinstance(value, str):
            if "-" not in value and ":" not in value:
                return {"act": value, "weight": value, "out": value}
            act, weight, out = parse_dtypes(value)
            return {"act": act, "weight": weight, "out": out}
        return value

    @property
    def label(self) -> str:
        return dtype_label(self.act, self.weight, self.out)


ListOf = BeforeValidator(_as_list)


class Axes(Strict):
    """The frame's axes a suite, the defaults and a tile entry may set (a backend adds its own,
    :func:`matrix_model`)."""

    arch: Annotated[list[Arch], ListOf] | None = None
    dtype: Annotated[list[DTypes], ListOf] | None = None


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
    name: Name | None = None
    tile: Annotated[list[TileEntry], ListOf, Field(min_length=1)]


class Expectation(Strict):
    """A known-bad case: the stage it is rejected at and why. Written by ``--tile-update``."""

    stage: Literal[EXPECTATIONS[1:]]  # type: ignore[valid-type]
    reason: str | None = None
    status: str | None = None
    smem: StrictInt | None = None
    limit: StrictInt | None = None
    source: str | None = None


class Matrix(Strict):
    version: Literal[1]
    backend: Annotated[str, Field(strict=True)]
    defaults: Axes = Axes()
    suites: list[Suite] = Field(min_length=1)
    expectations: dict[str, Expectation] | None = None


class _Open(Strict):
    """The axes of a backend no plugin declares: its keys are its own, unread."""

    model_config = ConfigDict(extra="allow", frozen=True)


@cache
def matrix_model(axes: type[BaseModel] | None) -> type[Matrix]:
    """The frame joined with a backend's axes (:attr:`.kinds.CaseKind.axes`): each suite, tile
    entry and the defaults take them too. None: a backend no plugin declares, whose other keys
    are let through unread (the matrix is refused for its backend alone)."""
    own: type[BaseModel] = _Open if axes is None else axes
    joined = create_model("Axes", __base__=(Axes, own))
    tile = create_model("TileEntry", __base__=(TileEntry, own))
    suite = create_model(
        "Suite",
        __base__=(Suite, own),
        tile=(Annotated[list[tile], ListOf, Field(min_length=1)], ...),  # type: ignore[valid-type,arg-type]
    )
    model = create_model(
        "Matrix",
        __base__=Matrix,
        defaults=(joined, joined()),
        suites=(list[suite], Field(min_length=1)),  # type: ignore[valid-type]
    )
    return model
