"""The GPU architectures this package knows, and the one spelling of an architecture's name.

An architecture is named ``sm<number>``, the number being its compute capability as major*10 +
minor (``sm120`` is 12.0): matrices, case ids, options and results files spell it so. Every
other list of architectures is a subset of :data:`KNOWN`: the virtual device has a profile
for each (:mod:`.virtual.profiles`), and a backend says which of them it has kernels for.
"""

from __future__ import annotations

#: Every architecture the package knows, oldest first.
KNOWN: tuple[str, ...] = ("sm90", "sm100", "sm103", "sm120", "sm121")


def arch_number(arch: str) -> int:
    """``sm120`` -> 120; ValueError for a name that is not ``sm<number>``."""
    digits = arch.removeprefix("sm")
    if digits == arch or not digits.isdigit():
        raise ValueError(f"{arch!r} is not an architecture name (sm<number>)")
    return int(digits)


def arch_name(number: int) -> str:
    """120 -> ``sm120``."""
    return f"sm{number}"


def arch_order(arch: str) -> tuple[int, str]:
    """A sort key: by number, a name that is not ``sm<number>`` last."""
    try:
        return (arch_number(arch), arch)
    except ValueError:
        return (1 << 30, arch)
