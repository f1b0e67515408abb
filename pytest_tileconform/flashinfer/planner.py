"""How the cases to compile are split into shared translation units: what a unit costs in RAM and
in time, the unit size that builds a set of cases soonest on this host, and the units themselves.

Everything here is a free function of its inputs (the host's cores and memory are passed in), so
a plan can be computed and tested for any host.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass
from typing import TypeVar

from ..compile.cache import parallel_jobs
from ..dtypes import MIXED_INPUT_PAIRS
from .axes import MoeCase
from .buildscript import kernel_config
from .codegen import harness_apart
from .configs import sequence_partner

T = TypeVar("T")

#: Peak RAM of one compile, measured: SM90 3.7-4.6 GB with nvcc alone; SM120 NVFP4 about
#: 6.6 GB. Through :mod:`..compile.nvcc_pipeline` cudafe++ (1.9 GB) runs beside cicc: for SM90
#: while cicc nears its peak (bf16 128x128x64: 5.7 GB, cicc 3.76 + cudafe++ 1.90 at once, against
#: 3.8 GB for nvcc alone), so up to about 6.5 GB; for SM120 cicc peaks after cudafe++ has ended
#: (NVFP4 128x128x128: 6.0 GB, cicc 5.9), which the default still covers. SM90's figure is
#: where the line through its measured shared units starts (below).
RAM_PER_COMPILE = {90: 7_000_000_000}
RAM_PER_COMPILE_DEFAULT = 7_000_000_000
#: Extra peak RAM per further instantiation in a shared unit of one dtype (cicc's peak plus
#: cudafe++'s, which runs beside it). SM90 on a 16-core host (benchmarks/compile_steps.py): bf16
#: units of 8, 16, 36 in matrix order 7.7, 10.5, 12.9 GB; fp8 16 and 36 10.5 and 12.9 GB; the
#: line from one case's 7 GB with 0.25 GB per further one covers them all. SM120 NVFP4 grows
#: faster (one case 5.97 GB in cicc, 8 cases 9.96 GB: 0.57 GB per further one), so other archs
#: get 0.6 GB. Units of mixed dtypes need more (6 SM90 cases of mixed dtypes: 8.6 GB with nvcc
#: alone, 1 GB per further one), so a unit never mixes them (:func:`plan_groups`).
RAM_PER_EXTRA_INSTANTIATION = {90: 250_000_000}
RAM_PER_EXTRA_INSTANTIATION_DEFAULT = 600_000_000
#: Most instantiations per translation unit: the largest unit measured (FlashInfer's generator
#: writes 8 per file; what a run uses is :func:`unit_size`'s choice up to this).
DEFAULT_GROUP = 36


#: The RAM a unit of one needs beyond :data:`RAM_PER_COMPILE`, so that the compiles run at once
#: fit: its harness compiles apart (:func:`.codegen.harness_apart`), the harness's cudafe++
#: (1.6 GB) and cicc (1.3 GB) beside the kernel's (one SM90 bf16 case by
#: benchmarks/compile_steps.py). Its time is costed as the unit's together (:class:`UnitCost`):
#: apart shortens its path (the kernels' translation unit 91.5 CPU-s, against 102.1 with the
#: harness in it) for 67.2 CPU-s more, which a lone unit has idle cores for.
APART_RAM = 3_000_000_000


@dataclass(frozen=True)
class UnitCost:
    """What a shared unit of g instantiations costs relative to one case alone: its critical
    path (cicc, ptxas, host compile; cudafe++ and TensorRT-LLM's host files run beside them)
    is 1 + ``path_per_extra`` x (g - 1) times one case's, its CPU time 1 + ``cpu_per_extra`` x
    (g - 1) times one case's; ``cpu_per_path`` is one case's CPU seconds per second of its
    critical path, the cores a compile keeps busy. The front end (cudafe++, cicc's parse, the
    host compile) is what a unit shares."""

    path_per_extra: float
    cpu_per_extra: float
    cpu_per_path: float

    def path(self, size: int) -> float:
        return 1 + self.path_per_extra * (size - 1)

    def cpu(self, size: int) -> float:
        return self.cpu_per_path * (1 + self.cpu_per_extra * (size - 1))


#: Measured with benchmarks/compile_steps.py, cases in matrix order. SM90 bf16 and fp8 on a
#: 16-core host: critical path 55 s for one, 98 s for 8, 157 s for 16, 243 s for 36; CPU 90 CPU-s
#: for one, 136-148 for 8, 197 for 16, 289-297 for 36.
UNIT_COST = {90: UnitCost(path_per_extra=0.11, cpu_per_extra=0.07, cpu_per_path=1.64)}
#: Other archs, from SM120 NVFP4 on a 2-core host: critical path 92 s for one, 174 s for 8; CPU
#: 116 CPU-s for one, 213.5 for 8.
UNIT_COST_DEFAULT = UnitCost(path_per_extra=0.13, cpu_per_extra=0.12, cpu_per_path=1.26)
#: One case's critical path alone in seconds, what :class:`UnitCost` counts in, from the same
#: measurements: SM90 on the 16-core host, other archs from SM120 NVFP4 on the 2-core host.
PATH_SECONDS = {90: 55.0}
PATH_SECONDS_DEFAULT = 92.0
#: SM90's mixed-input kernels (another launcher: the mixed-input collectives and the
#: precomputed scheduler) compile far slower, and share less in a unit. On the 16-core H200
#: host: single kernels side by side 74-116 s each; 29 kernels in units of 2 built in 192 s and
#: 39 in 263 s; 116 in units of 9-10 ran past 595 s, the units' paths 320-560 s and more. So
#: one path of 95 s, growing by 0.39 of it per further kernel. A unit keeps about one core busy:
#: 16 units of 5 side by side on the 16 cores built in 216-231 s and 32 units of 3 (two rounds)
#: in about 300 s, where SM90's 1.64 cores per path predicted 355 s and 511 s.
#: RAM is not measured apart: SM90's line is used.
MIXED_PATH_SECONDS = 95.0
MIXED_UNIT_COST = UnitCost(path_per_extra=0.39, cpu_per_extra=0.32, cpu_per_path=1.0)


def compile_ram(sm: int, instantiations: int) -> int:
    """Peak RAM of compiling a unit of ``instantiations`` of one dtype for SM ``sm``."""
    one = RAM_PER_COMPILE.get(sm, RAM_PER_COMPILE_DEFAULT)
    apart = APART_RAM if harness_apart(instantiations) else 0
    return (
        one
        + apart
        + RAM_PER_EXTRA_INSTANTIATION.get(sm, RAM_PER_EXTRA_INSTANTIATION_DEFAULT) * (instantiations - 1)
    )


def _cost(sm: int, mixed: bool) -> tuple[float, UnitCost]:
    if mixed:
        return MIXED_PATH_SECONDS, MIXED_UNIT_COST
    return PATH_SECONDS.get(sm, PATH_SECONDS_DEFAULT), UNIT_COST.get(sm, UNIT_COST_DEFAULT)


def unit_seconds(sm: int, instantiations: int, mixed: bool = False) -> tuple[float, float]:
    """A unit of ``instantiations`` for SM ``sm`` (of SM90's mixed-input kernels with ``mixed``)
    by the cost model: its critical path alone and its CPU time, in seconds (what build progress
    estimates from; a host slower than the measured ones is learned while it builds,
    :mod:`..compile.progress`)."""
    one, cost = _cost(sm, mixed)
    return one * cost.path(instantiations), one * cost.cpu(instantiations)


def dtypes(case: MoeCase) -> tuple[str, str, str]:
    """A case's activation, weight and output dtypes: what the cases of one unit share."""
    return case.act, case.weight, case.out


def pair_key(case: MoeCase) -> Hashable:
    """What a case shares with the other GEMM of its tile's fc1 -> fc2 pair
    (:func:`.configs.sequence_partner`): the two are planned into one unit whether or not the
    sequence stage runs, so its unit (which then holds both) is the same unit, and a build cache
    filled in one mode serves the other."""
    config = kernel_config(case)
    partner = sequence_partner(config)
    return config if partner is None else min(config, partner, key=lambda c: c.name)


def is_mixed_input(case: MoeCase) -> bool:
    """One of SM90's mixed-input kernels: costed apart, never in a unit with uniform ones."""
    return case.sm == 90 and (case.act, case.weight) in MIXED_INPUT_PAIRS


def plan_groups(
    items: Sequence[T],
    most: int,
    family: Callable[[T], Hashable] | None = None,
    together: Callable[[T], Hashable] | None = None,
) -> list[list[T]]:
    """Split ``items`` (one arch) into as few groups of at most ``most`` as possible, as even as
    possible (the slowest group sets the wall time). :func:`unit_size` chooses ``most``.

    Without ``family`` the groups are contiguous runs of ``items``. With it, a group holds
    items of one family (the dtypes: they share less of the front end and need more memory
    together), in their order. Matrices interleave families (an fp8 suite with two output
    types alternates them every few cases), so the families are gathered first. Items of one
    ``together`` key are one group's (a tile's fc1 -> fc2 pair, :func:`pair_key`): gathered
    where the first of them is, never split, a group outgrowing ``most`` only where one key's
    items alone do."""
    families: dict[Hashable, dict[Hashable, list[T]]] = {}
    for n, item in enumerate(items):
        atoms = families.setdefault(None if family is None else family(item), {})
        atoms.setdefault(n if together is None else together(item), []).append(item)
    groups: list[list[T]] = []
    for atoms in families.values():
        total = sum(map(len, atoms.values()))
        parts = -(-total // max(1, most))
        split = _split(list(atoms.values()), most, parts)
        if len(split) > parts:  # pairs left room unused: the groups they need, evened out
            again = _split(list(atoms.values()), most, len(split))
            split = again if len(again) <= len(split) else split
        groups += split
    return groups


def _split(atoms: list[list[T]], most: int, parts: int) -> list[list[T]]:
    """``atoms`` in order, into about ``parts`` groups as even as they allow, none past ``most``
    unless one atom is."""
    pending = sum(map(len, atoms))  # items not yet in a closed group
    groups: list[list[T]] = []
    current: list[T] = []
    for atom in atoms:
        size = -(-pending // max(1, parts - len(groups)))  # what is left, spread evenly
        if current and (len(current) >= size or len(current) + len(atom) > most):
            groups.append(current)
            pending, current = pending - len(current), []
        current += atom
    if current:
        groups.append(current)
    return groups


def unit_size(
    families: Sequence[int], most: int, jobs_for: Callable[[int], int], cores: int, cost: UnitCost
) -> int:
    """The unit size (1 to ``most``), with the parallel compiles ``jobs_for(size)`` allows for
    it, that builds soonest the cases of ``families`` (how many cases each dtype has: a unit
    holds one dtype, :func:`plan_groups`). The build takes whichever is longer: its rounds of
    parallel compiles, each as long as one unit's critical path, or all units' CPU time spread
    over ``cores`` (both from the arch's ``cost``, in one case's critical paths). Larger units
    save compiler time but need more RAM each, so fewer of them run at once; ties go to the
    larger unit."""
    best: tuple[float, int] | None = None
    # past the largest family every bound plans the same units: a --tile-build-group of billions
    # means "one unit per family", not billions of plans
    for most_per_unit in range(1, max(1, min(most, max(families, default=1))) + 1):
        parts = [-(-cases // most_per_unit) for cases in families]  # as plan_groups splits them
        sizes = [-(-cases // n) for cases, n in zip(families, parts, strict=True)]
        size = max(sizes)
        jobs = max(1, jobs_for(size))
        rounds = -(-sum(parts) // jobs)
        path = rounds * cost.path(size)
        cpu = sum(n * cost.cpu(s) for n, s in zip(parts, sizes, strict=True))
        makespan = max(path, cpu / max(1, cores))
        if best is None or makespan <= best[0] + 1e-9:
            best = (makespan, size)
    assert best is not None
    return best[1]


def plan_units(
    cases: Sequence[MoeCase], most: int, *, cores: int, memory: int, jobs: int | None
) -> list[list[MoeCase]]:
    """``cases`` in units of at most ``most`` (:func:`unit_size`, :func:`plan_groups`), each of
    one arch and one dtype, the archs in the order they first appear. ``cores`` and ``memory``
    (bytes) are the host's; ``jobs`` the parallel compiles asked for (None: as many as the cores
    and the RAM a unit of each size needs allow)."""
    by_arch: dict[tuple[int, bool], list[MoeCase]] = {}
    for case in cases:
        by_arch.setdefault((case.sm, is_mixed_input(case)), []).append(case)
    units: list[list[MoeCase]] = []
    for (sm, mixed), arch_cases in by_arch.items():

        def jobs_for(size: int, sm: int = sm) -> int:
            return jobs or parallel_jobs([], cores=cores, memory=memory, per_job=compile_ram(sm, size))

        families = Counter(dtypes(c) for c in arch_cases)
        _, cost = _cost(sm, mixed)
        size = unit_size(list(families.values()), most, jobs_for, cores, cost)
        units += plan_groups(arch_cases, size, family=dtypes, together=pair_key)
    return units
