"""The FlashInfer MoE backend's problem: a grouped GEMM's rows per expert, n and k, as a matrix
writes it (rows, or a preset name, :mod:`.presets`), and the problems generated matrices and
``tileconform bisect`` judge. The core knows none of it: the ``problems`` axis is this backend's
(:mod:`.axes`)."""

from __future__ import annotations

import json
from collections.abc import Hashable, Sequence
from functools import lru_cache
from typing import Annotated, Any

from pydantic import Discriminator, Field, StrictBool, StrictInt, Tag, model_validator

from ..matrix.duplicates import Axis, Column, Loc
from ..matrix.schema import Name, Strict
from .presets import MAX_SEED, UnknownPreset, presets_named

#: Rows per expert, ``n`` and ``k``: above 16 M a dimension is a typo, not a test (the element
#: bound below is what keeps a problem's memory sane; a long thin one may still be wanted).
MAX_DIM = 1 << 24
#: Experts of one problem (the largest MoE models have a few hundred).
MAX_EXPERTS = 1024
#: Elements of one problem's operands together (A: rows x k, B: experts x n x k, D: rows x n)
#: that a matrix may ask for: twice the largest preset (DeepSeek-V3's gate/up GEMM at 16k
#: tokens, 9.0 G elements, B alone 256 x 4096 x 7168), 16 GiB at one byte an element. Loading
#: spends nothing per element; this bound keeps what a judge could be asked to allocate finite.
MAX_ELEMENTS = 1 << 34
#: The most elements whose inputs and reference are made on the CPU (2^31: 8 GiB at fp32, and
#: the CPU reference's copies several times that). The rule: a larger problem is judged only by
#: a backend that makes its data on the GPU (hardware with the GPU reference); one that would
#: make it on the CPU does not judge it and says why (``Problem.host_refusal``). The virtual
#: device stops at launch and needs the problem's shape, not its data. Deterministic (not the
#: host's free memory), so a case is judged or refused the same way on every host of a kind.
HOST_MAX_ELEMENTS = 1 << 31
#: Token-to-expert picks one file's presets may draw (tokens x top_k of each distinct model,
#: token count and seed): every preset at seed 0 draws 0.45 M, about a second of pure Python;
#: this allows four seeds of all of them and stops a file of a thousand seeds before it is drawn.
MAX_ROUTED_ROWS = 1 << 21


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
        can (:data:`HOST_MAX_ELEMENTS` states the rule)."""
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
    """A problem, or several, named from the preset registry (:mod:`.presets`): written as the
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
        loader has bounded what drawing every preset of the file costs
        (:data:`MAX_ROUTED_ROWS`)."""
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
        """The routings its problems need drawn, as :func:`.presets.route` takes them (experts,
        tokens, top_k, seed): a model's two GEMMs at one token count share one."""
        return {(p.model.experts, p.tokens, p.model.top_k, self.seed) for p in presets_named(self.preset)}

    def expand(self) -> tuple[Problem, ...]:
        """The problems the name stands for, their rows routed with ``seed``
        (:class:`..matrix.kinds.Expanding`)."""
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
    The tags are in parentheses so that error positions leave them out (:mod:`..matrix.load`)."""
    named = isinstance(value, (str, PresetRef)) or (isinstance(value, dict) and "preset" in value)
    return "(preset)" if named else "(problem)"


#: One item of a ``problems`` list: a problem written out, or preset names.
ProblemItem = Annotated[
    Annotated[Problem, Tag("(problem)")] | Annotated[PresetRef, Tag("(preset)")],
    Discriminator(_problem_kind),
]


def check_routing(layers: Sequence[tuple[Any, Loc]]) -> tuple[Loc, str] | None:
    """Where drawing the routings of a matrix's presets would take more than
    :data:`MAX_ROUTED_ROWS` picks (the preset that crosses it), before any is
    drawn, and why; None when it would not (the ``check`` of :class:`..matrix.kinds.CaseKind`)."""
    drawn: set[tuple[int, int, int, int]] = set()
    picks = 0
    for layer, loc in layers:
        for i, item in enumerate(getattr(layer, "problems", None) or ()):
            if not isinstance(item, PresetRef):
                continue
            for routing in item.routings() - drawn:
                drawn.add(routing)
                _, tokens, top_k, _ = routing
                picks += tokens * top_k
            if picks > MAX_ROUTED_ROWS:
                return (*loc, "problems", i), (
                    f"the presets up to here route {picks:,} token picks, more than the "
                    f"{MAX_ROUTED_ROWS:,} a matrix may draw; use fewer seeds or presets, or list the rows"
                )
    return None


def _series(numbers: Sequence[int]) -> str:
    words = [str(n) for n in numbers]
    return words[0] if len(words) == 1 else f"{', '.join(words[:-1])} and {words[-1]}"


def _flow(item: Problem | PresetRef) -> str:
    if isinstance(item, Problem):
        return item.flow()
    return item.preset if item.seed == 0 else f"{{preset: {item.preset}, seed: {item.seed}}}"


def _named_problems(items: Sequence[Problem | PresetRef], col: int | None) -> list[str]:
    """The problems list with every problem that has no name given one: in block style at
    ``col``, or as one flow line where the list sits in a flow mapping (``col`` None). Preset
    names stay as they are: their problems are named."""
    problems = [item for item in items if isinstance(item, Problem)]
    taken = {p.name for p in problems if p.name}
    names = iter(f"p{n}" for n in range(1, 10 * len(items) + 2) if f"p{n}" not in taken)
    named = []
    for item in items:
        if isinstance(item, Problem) and not item.name:
            item = item.model_copy(update={"name": next(names)})
        named.append(_flow(item))
    if col is None:
        return [f"    problems: [{', '.join(named)}]"]
    indent = " " * (col - 1)
    return [f"{indent}problems:", *(f"{indent}  - {flow}" for flow in named)]


def same_problem(
    axis: str, found: Axis, i: int, j: int, case_id: str, column: Column
) -> tuple[Hashable, str] | None:
    """Why two problems of one list give the same case ids, and the fix (a case id tells problems
    apart only by their names): :attr:`..matrix.kinds.CaseKind.same_value` of ``problems``."""
    problems: list[Problem] = found.values
    assert found.loc is not None  # a list of the file's
    name = problems[i].name
    if name:
        one, other = found.item(i), found.item(j)
        presets = [k + 1 for k in (one, other) if isinstance((found.given or problems)[k], PresetRef)]
        what = (
            f"are both named {name!r}"
            if not presets
            else f"both give a problem named {name!r} (a preset's name is its problem's)"
        )
        return (found.loc, "name", name), (
            f"problems {one + 1} and {other + 1} of this list {what}, so they give the same "
            f"case ids (e.g. {case_id!r}): give each problem its own name"
            + (", and name each preset once" if presets else "")
        )
    unnamed = [found.item(k) + 1 for k, p in enumerate(problems) if not p.name]
    hint = "\n".join(_named_problems(found.given or problems, column(found.loc)))
    return (found.loc, "unnamed"), (
        f"problems {_series(unnamed)} of this list have no name, so they give the same case "
        f"ids (e.g. {case_id!r}): a case id tells problems apart only by their names. "
        f"Name them, e.g.\n{hint}"
    )
