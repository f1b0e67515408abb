"""What a backend is: the object that judges cases.

A backend judges one case at a time and may prepare many at once (a compiling backend
builds the selected cases in parallel before the first one runs). One that changes anything
process-wide while judging (threads, the garbage collector) also has ``finish``
(:class:`FinishingBackend`), so the process is as it was when the session ends. One that can
tell before judging whether this host can judge its cases at all (a toolkit, sources) has
``check_environment`` (:class:`CheckingBackend`) and raises :class:`~.verdict.UnusableEnvironment`. One
that knows before judging how far its device will judge a case (a virtual device stops at
``launch``) has ``judged_through`` (:class:`ForeseeingBackend`).
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Protocol, runtime_checkable

from .matrix.cases import Case
from .verdict import Stage, Verdict


@runtime_checkable
class Backend(Protocol):
    #: The name a matrix's ``backend:`` key refers to.
    name: str

    def prepare(self, cases: Sequence[Case]) -> None:
        """Called once per worker with the cases it will run, before the first one runs."""

    def judge(self, case: Case) -> Verdict:
        """Establish the verdict for ``case``.

        Raise :class:`~pytest_tileconform.verdict.NotJudgeable` when the case cannot be
        judged here (for instance its arch is not present); the case is then skipped.
        """
        ...  # pragma: no cover


@runtime_checkable
class FinishingBackend(Backend, Protocol):
    """A backend with something to undo when the session ends (``finish`` is optional)."""

    def finish(self) -> None:
        """Called once per process when the session ends, whether or not a case was judged:
        restore what judging changed in the process."""


@runtime_checkable
class PlacingBackend(Backend, Protocol):
    """A backend whose messages quote files under directories of its own (sources, toolkits)."""

    def places(self) -> Mapping[str, Path]:
        """Stable names for those directories (``{"<flashinfer>": root}``), so a recorded
        reason reads the same on every host (:func:`.reasons.stable_reason`). Cheap: only what
        is known already."""
        ...  # pragma: no cover


@runtime_checkable
class ArchBackend(Backend, Protocol):
    """A backend that has kernels for some archs only: a matrix case of another arch is refused
    when the matrix loads, with the archs it has, instead of being skipped at run time."""

    #: the archs it can judge (``sm90``, ...)
    archs: Collection[str]


@runtime_checkable
class DTypeBackend(Backend, Protocol):
    """A backend that instantiates some dtype combinations on an arch only: a matrix case of
    another is refused when the matrix loads, with the combinations it has, instead of being
    judged as a build failure that ``--tile-update`` would record as known-bad."""

    def dtypes_on(self, arch: str) -> Collection[tuple[str, str, str]] | None:
        """The (act, weight, out) combinations it has kernels of on ``arch`` (None: any). Cheap:
        no compile."""
        ...  # pragma: no cover


@runtime_checkable
class CheckingBackend(Backend, Protocol):
    """A backend that can tell, before judging anything, whether this host can judge its cases."""

    def check_environment(self, cases: Sequence[Case]) -> None:
        """Raise :class:`~.verdict.UnusableEnvironment` if ``cases`` (this backend's, at least one) cannot
        be judged here. Cheap: no compile, no device initialisation."""


@runtime_checkable
class ForeseeingBackend(Backend, Protocol):
    """A backend that knows at collection how far it will judge a case here."""

    def judged_through(self, case: Case) -> Stage | None:
        """The last stage ``case`` (this backend's) will be judged through here (None: it cannot
        say before judging). Cheap: no compile, no device initialisation.

        A stage before ``run`` (a virtual device's ``launch``) gives the case the
        ``tileconform_unrun`` marker, so ``-m "not tileconform_unrun"`` leaves out what will not
        run the kernel. The outcome itself always comes from the verdict.
        """
        ...  # pragma: no cover


class BackendRegistry:
    def __init__(self, backends: Sequence[Backend]) -> None:
        self._by_name: dict[str, Backend] = {}
        for backend in backends:
            if backend.name in self._by_name:
                raise ValueError(f"two plugins register a backend named {backend.name!r}")
            self._by_name[backend.name] = backend

    def names(self) -> list[str]:
        return sorted(self._by_name)

    def archs(self) -> dict[str, Collection[str]]:
        """The archs of each backend that names them (:class:`ArchBackend`)."""
        return {name: b.archs for name, b in self._by_name.items() if isinstance(b, ArchBackend)}

    def dtypes(self) -> dict[str, Callable[[str], Collection[tuple[str, str, str]] | None]]:
        """The dtype combinations by arch of each backend that names them (:class:`DTypeBackend`)."""
        return {name: b.dtypes_on for name, b in self._by_name.items() if isinstance(b, DTypeBackend)}

    def __getitem__(self, name: str) -> Backend:
        return self._by_name[name]

    def __iter__(self) -> Iterator[Backend]:
        return iter(self._by_name.values())
