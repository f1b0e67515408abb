"""Why two cases of a matrix got the same id, said once per cause, with the fix.

A case id names arch, dtypes, tile, the backend's axes and the problem's *name*, so the
usual cause is a list of problems without names: every case of every tile entry that uses the
list then collides. Reporting each colliding case would print the same complaint once per
tile, cluster and fusion; the cause is one place in the file, so it is reported there, once.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass
from typing import Any

from ..dtypes import shape_label
from .schema import DTypes, PresetRef, Problem

Loc = tuple[str | int, ...]
Where = Callable[[Loc], tuple[int, int]]  # a document path -> its 1-based (line, col)
Column = Callable[[Loc], "int | None"]  # a key's 1-based column if it is in a block mapping


@dataclass(frozen=True)
class Axis:
    """One axis of a tile entry: its values and where the list is (None: a built-in default).

    ``items``: for each value, the index of the item in the file's list that gave it, where an
    item may give several (a preset group); None: value ``i`` is item ``i``.
    """

    values: list[Any]
    loc: Loc | None
    items: list[int] | None = None
    given: list[Any] | None = None  #: the file's list, where it differs from ``values``

    def item(self, value: int) -> int:
        return value if self.items is None else self.items[value]


@dataclass(frozen=True)
class Duplicate:
    key: Hashable  # the cause: the same key is the same mistake, reported once
    where: tuple[int, int]
    message: str


def _label(value: Any) -> str:
    if isinstance(value, DTypes):
        return value.label
    if isinstance(value, tuple):
        return shape_label(value)
    return str(value).lower() if isinstance(value, bool) else str(value)


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


def same_axis(
    where: Where,
    column: Column,
    axes: dict[str, Axis],
    first: tuple[int, ...],
    then: tuple[int, ...],
    case_id: str,
) -> Duplicate | None:
    """Two cases of one tile entry with the same id, told apart only by one axis: what to change.

    ``first`` and ``then`` are the cases' indices into each axis, in the order of ``axes``. Cases
    that differ on several axes are skipped: the cases between them differ on one, and name it.
    """
    differ = [(axis, i, j) for (axis, i, j) in zip(axes, first, then, strict=True) if i != j]
    if len(differ) != 1:
        return None
    axis, i, j = differ[0]
    found = axes[axis]
    assert found.loc is not None  # a built-in default lists each value once
    at = where((*found.loc, found.item(j)))
    if axis == "problems":
        problems: list[Problem] = found.values
        name = problems[i].name
        if name:
            one, other = found.item(i), found.item(j)
            presets = [k + 1 for k in (one, other) if isinstance((found.given or problems)[k], PresetRef)]
            what = (
                f"are both named {name!r}"
                if not presets
                else f"both give a problem named {name!r} (a preset's name is its problem's)"
            )
            return Duplicate(
                (found.loc, "name", name),
                at,
                f"problems {one + 1} and {other + 1} of this list {what}, so they give the same "
                f"case ids (e.g. {case_id!r}): give each problem its own name"
                + (", and name each preset once" if presets else ""),
            )
        unnamed = [found.item(k) + 1 for k, p in enumerate(problems) if not p.name]
        hint = "\n".join(_named_problems(found.given or problems, column(found.loc)))
        return Duplicate(
            (found.loc, "unnamed"),
            at,
            f"problems {_series(unnamed)} of this list have no name, so they give the same case "
            f"ids (e.g. {case_id!r}): a case id tells problems apart only by their names. "
            f"Name them, e.g.\n{hint}",
        )
    value = _label(found.values[j])
    return Duplicate(
        (found.loc, i),
        at,
        f"{axis} lists {value} twice (items {i + 1} and {j + 1}), so both give the same cases "
        f"(e.g. {case_id!r}): list it once",
    )


def across_entries(ids: Sequence[str], first: tuple[int, int], words: str) -> str:
    """Cases a tile entry gives that an earlier one (at ``first``) gave already; ``words``: the
    backend's words of a case id (:attr:`.kinds.CaseKind.id_pattern`)."""
    more = f" and {len(ids) - 1} more" if len(ids) > 1 else ""
    pattern = "-".join(part for part in ("arch-dtypes-tile", words) if part)
    return (
        f"duplicate case {ids[0]!r}{more}: the tile entry at line {first[0]} already gives it; a "
        f"case id is {pattern}[-problem name], so remove one of the two or make them differ in one "
        "of these (e.g. give their problems different names)"
    )
