"""Why two cases of a matrix got the same id, said once per cause, with the fix.

A case id names arch, dtypes, tile and the backend's axes, some by a *name* (a problem's), so the
usual cause is a list of values without names: every case of every tile entry that uses the list
then collides. Reporting each colliding case would print the same complaint once per
tile, cluster and fusion; the cause is one place in the file, so it is reported there, once.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ..dtypes import shape_label
from .schema import DTypes

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


#: Two cases of a tile entry that differ only by items ``i`` and ``j`` of an axis but got one id:
#: the cause's key and the backend's advice (a list of problems without names), or None for the
#: core's ("lists it twice"); :attr:`.kinds.CaseKind.same_value`
SameValue = Callable[[str, Axis, int, int, str, Column], "tuple[Hashable, str] | None"]


def same_axis(
    where: Where,
    column: Column,
    axes: dict[str, Axis],
    first: tuple[int, ...],
    then: tuple[int, ...],
    case_id: str,
    same_value: Mapping[str, SameValue],
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
    advice = same_value.get(axis)
    found_advice = advice(axis, found, i, j, case_id, column) if advice is not None else None
    if found_advice is not None:
        key, message = found_advice
        return Duplicate(key, at, message)
    value = _label(found.values[j])
    return Duplicate(
        (found.loc, i),
        at,
        f"{axis} lists {value} twice (items {i + 1} and {j + 1}), so both give the same cases "
        f"(e.g. {case_id!r}): list it once",
    )


def across_entries(ids: Sequence[str], first: tuple[int, int], words: str, advice: str) -> str:
    """Cases a tile entry gives that an earlier one (at ``first``) gave already; ``words`` and
    ``advice``: the backend's words of a case id and how to tell two apart
    (:attr:`.kinds.CaseKind.id_pattern`)."""
    more = f" and {len(ids) - 1} more" if len(ids) > 1 else ""
    pattern = "-".join(part for part in ("arch-dtypes-tile", words) if part)
    return (
        f"duplicate case {ids[0]!r}{more}: the tile entry at line {first[0]} already gives it; a "
        f"case id is {pattern}, so remove one of the two or make them differ in one of these"
        + (f" (e.g. {advice})" if advice else "")
    )
