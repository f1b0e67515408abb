"""Compiling one worker's cases in shared translation units: how many compiles run at once, the
units of a plan, and planning a failed unit again in smaller ones until the case at fault is
alone (its compile error is then its own verdict)."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from ..compile.cache import BuildCache, BuildResult, BuildSpec, available_cores, parallel_jobs
from . import planner
from .axes import MoeCase
from .settings import Settings


class UnitBuilder:
    """The backend's builds, as units of several cases: one per backend, sharing its cache."""

    def __init__(
        self,
        cache: BuildCache,
        settings: Settings,
        spec_of: Callable[[Sequence[MoeCase]], BuildSpec],
        alias_of: Callable[[MoeCase, Sequence[MoeCase]], BuildSpec | None],
    ) -> None:
        """``spec_of(cases)`` is the build spec of one unit of ``cases``; ``alias_of(case,
        unit)`` another entry of ``case`` that the unit of ``unit``'s cases also serves (None:
        none), pointed at it beside the case's own."""
        self.cache = cache
        self.settings = settings
        self._spec_of = spec_of
        self._alias_of = alias_of

    def jobs(self, specs: Sequence[BuildSpec]) -> tuple[int, int]:
        """Parallel compiles of ``specs`` for the host and for this process: --tile-build-jobs
        (a total for the host, shared by the xdist workers) or what cores and RAM allow."""
        workers = max(1, self.settings.worker_count)
        host = self.settings.jobs or parallel_jobs(specs)
        return host, max(1, -(-host // workers))

    def cores(self) -> float:
        """This process's share of the cores, which its compiles' progress is estimated on."""
        return available_cores() / max(1, self.settings.worker_count)

    def claim(self, specs: Sequence[BuildSpec]) -> int:
        """How many of ``specs`` this process takes on at once: its xdist worker's part, so the
        workers build side by side and each keeps its jobs busy without waiting for rounds."""
        return max(1, -(-len(specs) // max(1, self.settings.worker_count)))

    def build_shared(
        self, missing: list[MoeCase], specs: dict[MoeCase, BuildSpec], most: int, deadline: float | None
    ) -> None:
        """Compile ``missing`` in shared units and point each case's entry at its unit.

        A unit that fails to compile is planned again, its cases in units of at most half its
        size, until the units are of 2 or 3; the cases of those that still fail are left to be
        built one by one, where a failure is the case's verdict. One bad case among 36 then
        costs a few rounds of smaller units, not 36 compiles of one case each (a unit of 36
        costs 3.3x the CPU of one case alone, :data:`.planner.UNIT_COST`). A unit that failed for
        the host's sake (killed, out of memory: :mod:`..compile.failure`) is not planned again:
        its cases are built alone, which needs the least memory. Past ``deadline`` nothing more
        is compiled."""
        pending = self.plan_units(missing, most)
        while pending:
            start = self.settings.worker_index * len(pending) // max(1, self.settings.worker_count)
            pending = pending[start:] + pending[:start]
            unit_specs = [spec for _, spec in pending]
            try:
                built = self.cache.build(
                    unit_specs, self.jobs(unit_specs)[1], self.claim(unit_specs), self.cores(), deadline
                )
            except KeyboardInterrupt:  # the units that were done are cached: find them by case too
                self._link_finished(pending, specs)
                raise
            failed: list[list[MoeCase]] = []
            alone = 0  # cases of failed units too small to split: built one by one later
            for group, spec in pending:
                if (unit := built.get(spec.key)) is None:  # not built before the deadline
                    continue
                if unit.ok:
                    self._link(group, specs, unit)
                elif unit.environment is None and len(group) >= 4:
                    failed.append(group)
                elif unit.environment is None:
                    alone += len(group)
            pending = [unit for group in failed for unit in self.plan_units(group, len(group) // 2)]
            self._say_replanned(failed, len(pending), alone)

    def _say_replanned(self, failed: list[list[MoeCase]], units: int, alone: int) -> None:
        """Tell the user that failed units are compiled again (their good cases too), so the
        time it takes is not a mystery."""
        if failed:
            cases = sum(len(group) for group in failed)
            self.cache.progress(
                f"{len(failed)} translation unit(s) of {cases} case(s) failed to compile: planned again "
                f"as {units} unit(s) of at most {max(len(g) for g in failed) // 2} to find the case(s) at "
                "fault; their cases that compile are compiled again"
            )
        if alone:
            self.cache.progress(
                f"{alone} case(s) of failed units of 2 or 3 are compiled one by one: a compile error "
                "there is the case's own verdict"
            )

    def _link_finished(
        self, units: list[tuple[list[MoeCase], BuildSpec]], specs: dict[MoeCase, BuildSpec]
    ) -> None:
        """Point each case of a unit that was built at it, so that a later run finds the case
        whatever units it plans."""
        for group, spec in units:
            unit = self.cache.lookup(spec)
            if unit is not None and unit.ok:
                self._link(group, specs, unit)

    def _link(self, group: list[MoeCase], specs: dict[MoeCase, BuildSpec], unit: BuildResult) -> None:
        """Point the entries of ``group``'s cases (each one's own and its alias) at ``unit``."""
        for case in group:
            self.cache.link(specs[case], unit)
            if (alias := self._alias_of(case, group)) is not None:
                self.cache.link(alias, unit)

    def plan_units(self, cases: list[MoeCase], most: int) -> list[tuple[list[MoeCase], BuildSpec]]:
        """``cases`` in units of at most ``most`` (:func:`.planner.plan_units`, for this host's
        cores and memory, looked at once per plan), each with its build spec."""
        cores, memory = self.cache.capacity()  # this host's, or a build farm's
        groups = planner.plan_units(cases, most, cores=cores, memory=memory, jobs=self.settings.jobs)
        return [(group, self._spec_of(group)) for group in groups]
