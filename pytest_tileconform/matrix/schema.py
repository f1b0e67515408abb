"""The matrix file format (version 1), as pydantic models: the core's frame.

A matrix names a backend, optional defaults and a list of suites. Each suite is a cartesian
product over arch x dtype x the backend's axes x problem (:mod:`.kinds`: FlashInfer's cluster,
fusion, ... are its own); a tile entry may be a mapping that overrides the suite's other axes for
that tile. :func:`matrix_model` joins a backend's axes to this frame. A problem is given by its
rows or by the name of a preset (:mod:`.problems`). Known-bad cases are listed under
``expectations`` by case id.

Tile shapes are CTA M x N x K with K counted in *elements* of the activation type (the
TensorRT-LLM enum names, e.g. ``CtaShape128x128x64B``, count K in bytes).
"""

from __future__ import annotations

import json
import re
from functools import cache, lru_cache
from typing import Annotated, Any, Literal

from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Discriminator,
    Field,
    StrictBool,
    StrictInt,
    Tag,
    create_model,
    model_validator,
)

from ..dtypes import Role, canonical_name, dtype_label
from ..verdict import EXPECTATIONS
from .bounds import HOST_MAX_ELEMENTS, MAX_DIM, MAX_ELEMENTS, MAX_EXPERTS, MAX_NAME, NAME_ALPHABET
from .problems import MAX_SEED, UnknownPreset, presets_named

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
        if isinstance(value, str):
            return {"act": value, "weight": value, "out": value}
        return value

    @property
    def label(self) -> str:
        return dtype_label(self.act, self.weight, self.out)


class Problem(Strict):
    """One grouped problem: ``rows`` per expert (a list, or one count with ``experts``).

    ``bias``: the GEMM adds a per-expert bias row (gpt-oss); ``seed``: the seed of whatever
    the matrix does not list about the problem (a preset's routing); ``tokens`` and ``top_k``:
    the batch the rows were routed from, when known (presets), which the ``finalize``
    epilogue's output has one row per token of.
    """

    name: Name | None = None
    experts: StrictInt | None = Field(default=None, gt=0, le=MAX_EXPERTS)
    rows: tuple[Annotated[StrictInt, Field(ge=0, le=MAX_DIM)], ...] = Field(max_length=MAX_EXPERTS)
    n: StrictInt = Field(gt=0, le=MAX_DIM)
    k: StrictInt = Field(gt=0, le=MAX_DIM)
    bias: StrictBool = False
    seed: StrictInt = Field(default=0, ge=0, le=MAX_SEED)
    tokens: StrictInt | None = Field(default=None, gt=0, le=MAX_DIM)
    top_k: StrictInt | None = Field(default=None, gt=0, le=MAX_EXPERTS)

    @model_validator(mode="before")
    @classmethod
    def _expand_rows(cls, value: Any) -> Any:
        """``rows: 64`` with ``experts: 8`` means 64 rows for each of the 8 experts (at most
        :data:`MAX_EXPERTS`: the list is built here, before any bound is checked)."""
        rows = value.get("rows") if isinstance(value, dict) else None
        if isinstance(rows, int) and not isinstance(rows, bool):
            experts = value.get("experts")
            if not isinstance(experts, int) or isinstance(experts, bool) or experts <= 0:
                raise ValueError("a single 'rows' count needs 'experts'")
            if experts > MAX_EXPERTS:
                raise ValueError(f"experts={experts} is more than {MAX_EXPERTS}")
            if not 0 <= rows <= MAX_DIM:  # once, not once per expert
                raise ValueError(f"rows={rows} is not between 0 and {MAX_DIM}")
            return {**value, "rows": [rows] * experts}
        return value

    @model_validator(mode="after")
    def _experts_agree(self) -> Problem:
        if not self.rows:
            raise ValueError("rows is empty")
        if self.experts is not None and self.experts != len(self.rows):
            raise ValueError(f"experts={self.experts} but rows lists {len(self.rows)} experts")
        if self.elements > MAX_ELEMENTS:
            raise ValueError(
                f"the problem's operands have {self.elements:,} elements (A rows x k, B experts x n x k, "
                f"D rows x n); at most {MAX_ELEMENTS:,} are allowed"
            )
        self._check_routing()
        return self

    def _check_routing(self) -> None:
        """``tokens`` and ``top_k`` go together and must be a routing that gives these rows:
        each token to ``top_k`` distinct experts."""
        if (self.tokens is None) != (self.top_k is None):
            raise ValueError("'tokens' and 'top_k' are given together or not at all")
        if self.tokens is None or self.top_k is None:
            return
        if self.top_k > len(self.rows):
            raise ValueError(f"top_k={self.top_k} is more than the {len(self.rows)} experts")
        if sum(self.rows) != self.tokens * self.top_k:
            raise ValueError(
                f"rows sum to {sum(self.rows):,}, not tokens x top_k = {self.tokens * self.top_k:,}"
            )
        if max(self.rows) > self.tokens:
            raise ValueError(f"an expert has {max(self.rows):,} rows, more than the {self.tokens:,} tokens")

    @property
    def rows_per_expert(self) -> tuple[int, ...]:
        return tuple(self.rows)

    @property
    def elements(self) -> int:
        """Elements of the operands together: A (rows x k), B (experts x n x k), D (rows x n)."""
        total = sum(self.rows)
        return total * self.k + len(self.rows) * self.n * self.k + total * self.n

    def host_refusal(self) -> str | None:
        """Why this problem's inputs and reference cannot be made on the CPU, or None if they
        can (:data:`.bounds.HOST_MAX_ELEMENTS` states the rule)."""
        if self.elements <= HOST_MAX_ELEMENTS:
            return None
        return (
            f"the problem's operands have {self.elements:,} elements, more than the "
            f"{HOST_MAX_ELEMENTS:,} whose inputs and reference are made on the CPU: it is judged "
            "only where a GPU makes them"
        )

    def flow(self) -> str:
        """The problem as one YAML flow mapping, as a matrix file may write it."""
        parts = [] if self.name is None else [f"name: {json.dumps(self.name)}"]
        if self.experts is not None:
            parts.append(f"experts: {self.experts}")
        parts += [f"rows: [{', '.join(map(str, self.rows))}]", f"n: {self.n}", f"k: {self.k}"]
        parts += [f"{key}: {json.dumps(value)}" for key, value in self.recorded().items()]
        return "{" + ", ".join(parts) + "}"

    def recorded(self) -> dict[str, Any]:
        """The fields past rows, n and k that differ from their defaults (a problem written
        before they existed reads and records as it did)."""
        found: dict[str, Any] = {}
        if self.bias:
            found["bias"] = True
        if self.seed:
            found["seed"] = self.seed
        if self.tokens is not None:
            found["tokens"] = self.tokens
            found["top_k"] = self.top_k
        return found


#: The problem generated matrices and ``tileconform bisect`` judge unless told otherwise, and the
#: shipped matrices' problem: 4 experts, one with no rows, one with a single row, two whose rows
#: are not multiples of 128.
DEFAULT_PROBLEM = Problem(experts=4, rows=(0, 1, 77, 300), n=384, k=512)
#: The same rows for SM90's mixed-input kernels: N a multiple of every CTA M (256) and K of every
#: CTA K (512), as their layouts need (nothing checks a K tile that overruns K); the prefill
#: small-K kernel takes K <= 384 only, the rolling one K > 384 (the launcher's checks).
MIXED_PROBLEM = Problem(experts=4, rows=(0, 1, 77, 300), n=512, k=1024)
SMALL_K_PREFILL_PROBLEM = Problem(experts=4, rows=(0, 1, 77, 300), n=512, k=384)


class PresetRef(Strict):
    """A problem, or several, named from the preset registry (:mod:`.problems`): written as the
    name alone or as ``{preset: NAME, seed: N}``."""

    preset: Name
    seed: StrictInt = Field(default=0, ge=0, le=MAX_SEED)

    @model_validator(mode="before")
    @classmethod
    def _from_name(cls, value: Any) -> Any:
        return {"preset": value} if isinstance(value, str) else value

    @model_validator(mode="after")
    def _known(self) -> PresetRef:
        """The name is checked here; the routing is drawn only when cases are made, after the
        loader has bounded what drawing every preset of the file costs (:data:`.bounds.MAX_ROUTED_ROWS`)."""
        try:
            presets_named(self.preset)
        except UnknownPreset as exc:
            raise ValueError(str(exc)) from None
        return self

    @property
    def count(self) -> int:
        """How many problems the name stands for."""
        return len(presets_named(self.preset))

    def routings(self) -> set[tuple[int, int, int, int]]:
        """The routings its problems need drawn, as :func:`.problems.route` takes them (experts,
        tokens, top_k, seed): a model's two GEMMs at one token count share one."""
        return {(p.model.experts, p.tokens, p.model.top_k, self.seed) for p in presets_named(self.preset)}

    def problems(self) -> tuple[Problem, ...]:
        """The problems the name stands for, their rows routed with ``seed``."""
        return _preset_problems(self.preset, self.seed)


@lru_cache(maxsize=256)
def _preset_problems(name: str, seed: int) -> tuple[Problem, ...]:
    return tuple(
        Problem(
            name=p.problem_name(seed),
            rows=p.rows(seed),
            n=p.n,
            k=p.k,
            bias=p.model.bias,
            seed=seed,
            tokens=p.tokens,
            top_k=p.model.top_k,
        )
        for p in presets_named(name)
    )


def _problem_kind(value: Any) -> str:
    """Which model a ``problems`` item is: a name or ``{preset: ...}`` is a preset reference.
    The tags are in parentheses so that error positions leave them out (:mod:`.load`)."""
    named = isinstance(value, (str, PresetRef)) or (isinstance(value, dict) and "preset" in value)
    return "(preset)" if named else "(problem)"


#: One item of a ``problems`` list: a problem written out, or preset names.
ProblemItem = Annotated[
    Annotated[Problem, Tag("(problem)")] | Annotated[PresetRef, Tag("(preset)")],
    Discriminator(_problem_kind),
]


def item_problems(item: Problem | PresetRef) -> tuple[Problem, ...]:
    """The problems one ``problems`` item gives."""
    return (item,) if isinstance(item, Problem) else item.problems()


ListOf = BeforeValidator(_as_list)


class Axes(Strict):
    """The frame's axes a suite, the defaults and a tile entry may set (a backend adds its own,
    :func:`matrix_model`)."""

    arch: Annotated[list[Arch], ListOf] | None = None
    dtype: Annotated[list[DTypes], ListOf] | None = None
    problems: Annotated[list[ProblemItem], ListOf] | None = None


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
