"""What a backend's tactic tables read of results files and matrices, whatever the backend: the
judged entries of an arch with the key the backend gives their case, the matrices' cases loaded
with every installed backend's kinds, and the words a table shows a verdict or an expectation in
(``outcome [device]``, ``outcome [matrix, source]``, counted)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from .output import message

if TYPE_CHECKING:
    from ..matrix.cases import Case
    from ..results.model import CaseEntry, CaseRecord, ResultsDocument, VerdictRecord

K = TypeVar("K")


def keyed(
    results: Iterable[ResultsDocument], arch: str, key_of: Callable[[CaseRecord], K | None]
) -> Iterator[tuple[ResultsDocument, CaseEntry, VerdictRecord, K]]:
    """The judged entries of ``arch`` in results files whose case ``key_of`` gives a key (None:
    another backend's case), each with that key and its document (whose host holds what a
    verdict does not record)."""
    for document in results:
        for entry, verdict in document.judged():
            key = None if entry.case is None or entry.case.arch != arch else key_of(entry.case)
            if key is not None:
                yield document, entry, verdict, key


def device_word(verdict: VerdictRecord) -> str:
    device = verdict.device
    if device is None:
        return "device not recorded"
    if device.kind == "hardware":
        return f"hardware {device.name}"
    if device.kind == "virtual":
        return f"virtual {device.arch or device.name}"
    return "build"


def verdict_word(verdict: VerdictRecord) -> str:
    """The verdict as every output reports it (``unrun``: a pass whose kernel did not run), with
    how far an unrun one was judged."""
    if verdict.unrun:
        return f"{verdict.reported} (through {verdict.judged_through.value})"
    return verdict.reported


def observed_words(
    results: Iterable[ResultsDocument], arch: str, key_of: Callable[[CaseRecord], K | None]
) -> dict[K, Counter[str]]:
    """The verdicts of ``arch`` in results files, ``outcome [device]`` counted per key."""
    found: dict[K, Counter[str]] = {}
    for _document, _entry, verdict, key in keyed(results, arch, key_of):
        found.setdefault(key, Counter())[f"{verdict_word(verdict)} [{device_word(verdict)}]"] += 1
    return found


def matrix_cases(matrices: Sequence[tuple[str, str]]) -> Iterator[tuple[str, Case[Any]]]:
    """The cases of ``matrices`` (name, YAML text) with their matrix's name, loaded with every
    installed backend's kinds (a matrix may hold several backends' suites); a matrix that does
    not load is warned about and left out."""
    from ..matrix.load import MatrixInvalid, load_matrix
    from .plugins import command_plugins

    kinds = command_plugins().kinds()
    for name, text in matrices:
        try:
            loaded = load_matrix(Path(name), kinds, set(kinds), text=text)
        except MatrixInvalid as exc:
            message(f"warning: matrix {name} does not load, not used: {str(exc).splitlines()[0]}")
            continue
        for case in loaded.cases:
            yield name, case


def expected_word(case: Case[Any], matrix: str) -> str:
    """What ``matrix`` expects of ``case``: ``outcome [matrix]``, a known-bad one's with the
    expectation's recorded source."""
    where = matrix
    if case.expectation is not None and case.expectation.source:
        where += f", {case.expectation.source}"
    return f"{case.expected} [{where}]"


def counted(counts: Counter[str] | None, nothing: str) -> str:
    """Words counted (``pass x3; compile``), passes first; ``nothing`` where there is none."""
    if not counts:
        return nothing
    order = sorted(counts, key=lambda w: (not w.startswith("pass"), w))
    return "; ".join(w if counts[w] == 1 else f"{w} x{counts[w]}" for w in order)
