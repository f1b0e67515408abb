"""What a backend can build, checked as a matrix loads: a case of an arch the backend has no
kernels for, or of a dtype combination it instantiates no kernel of on that arch, could only be
skipped with advice that leads nowhere, or be recorded by ``--tile-update`` as a known failure
that is no finding. Each is refused at its place in the file instead, once per place (a suite's
arch and dtype are shared by its tile entries), saying what the backend has."""

from __future__ import annotations

from collections.abc import Callable, Collection, Hashable
from typing import Any

from .duplicates import Axis, Loc

#: a backend's dtype combinations (act, weight, out) on one arch; None: it takes any
DTypesOn = Callable[[str], "Collection[tuple[str, str, str]] | None"]


def unsupported(
    backend: str,
    axes: dict[str, Axis],
    archs: Collection[str] | None,
    dtypes_on: DTypesOn | None,
    reported: set[Hashable],
    where: Callable[[Loc], tuple[int, int]],
) -> list[tuple[tuple[int, int], str]]:
    """(position, message) of each arch of the tile entry's ``axes`` not in ``archs`` and each
    dtype combination not in ``dtypes_on`` of an arch that is (None: no such check)."""
    arch_axis, dtype_axis = axes.get("arch"), axes.get("dtype")
    if arch_axis is None:
        return []
    found = []
    for i, arch in enumerate(arch_axis.values):
        key: Hashable = ("arch", arch_axis.loc, arch_axis.item(i))
        if archs is not None and arch not in archs:
            if key not in reported:
                reported.add(key)
                message = (
                    f"arch {arch!r}: backend {backend!r} has no kernels for it (it judges {', '.join(archs)})"
                )
                found.append((_at(where, arch_axis, i), message))
            continue
        if dtype_axis is None or dtype_axis.loc is None or dtypes_on is None:
            continue
        possible = dtypes_on(arch)
        if possible is None:
            continue
        for j, value in enumerate(dtype_axis.values):
            combo = (value.act, value.weight, value.out)
            key = ("dtype", dtype_axis.loc, dtype_axis.item(j), arch)
            if combo in possible or key in reported:
                continue
            reported.add(key)
            found.append((_at(where, dtype_axis, j), _dtype_message(backend, arch, value, possible)))
    return found


def _at(where: Callable[[Loc], tuple[int, int]], axis: Axis, i: int) -> tuple[int, int]:
    return where((*axis.loc, axis.item(i))) if axis.loc else (1, 1)


def _dtype_message(backend: str, arch: str, value: Any, possible: Collection[tuple[str, str, str]]) -> str:
    from ..dtypes import dtype_label

    labels = ", ".join(sorted(dtype_label(*combo) for combo in possible))
    return (
        f"dtype {value.label} (act {value.act}, weight {value.weight}, out {value.out}) on {arch}: "
        f"backend {backend!r} instantiates no kernel of it there; on {arch} it has {labels}"
    )
