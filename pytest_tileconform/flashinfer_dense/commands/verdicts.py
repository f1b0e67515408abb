"""What is known of a dense tactic: what the matrices expect of it and what results files observed.

A case and a tactic meet on a :class:`Key`: the dtypes label (an output type of the runner), the
CTA shape, the cluster, swap_ab and the scheduler. A record without a cluster is of a 1x1x1 tactic
(the axis records only where it is not).
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

from ...commands.output import message
from ...dtypes import dtype_label
from ...results.model import CaseEntry, CaseRecord, ResultsDocument, VerdictRecord
from ..axes import DenseAxes, DenseMatrixAxes
from ..offered import Shape, Tactic

UNJUDGED = "unjudged"
_SHAPE = re.compile(r"\d+x\d+x\d+")
Verdicts = dict["Key", Counter[str]]


@dataclass(frozen=True, order=True)
class Key:
    dtypes: str
    cta: Shape
    cluster: Shape
    swap_ab: bool
    stream_k: bool


def tactic_key(dtypes: str, tactic: Tactic) -> Key:
    return Key(dtypes, tactic.cta, tactic.cluster, tactic.swap_ab, tactic.stream_k)


def record_key(case: CaseRecord) -> Key | None:
    """The tactic a results file's case judged; None for another backend's case (its record has
    keys a dense case does not record)."""
    coordinates = case.coordinates()
    if "mnk" not in coordinates or not set(coordinates) <= set(DenseMatrixAxes.model_fields):
        return None
    m, n, k = (int(v) for v in case.tile.split("x"))
    cluster = coordinates.get("cluster", "1x1x1")
    if not isinstance(cluster, str) or not _SHAPE.fullmatch(cluster):
        return None
    return Key(
        dtype_label(case.act, case.weight, case.out),
        (m, n, k),
        _shape(cluster),
        bool(coordinates.get("swap_ab", False)),
        bool(coordinates.get("stream_k", False)),
    )


def _shape(label: str) -> Shape:
    m, n, k = (int(v) for v in label.split("x"))
    return m, n, k


def expected_verdicts(arch: str, matrices: Sequence[tuple[str, str]]) -> Verdicts:
    """What ``matrices`` (name, YAML text) expect of each dense tactic of ``arch``, counted over
    their cases (problems): ``outcome [matrix]``, a known-bad one ``stage [matrix, source]``."""
    from ...commands.plugins import command_plugins
    from ...matrix.load import MatrixInvalid, load_matrix
    from .. import NAME

    kinds = command_plugins().kinds()
    found: Verdicts = {}
    for name, text in matrices:
        try:
            loaded = load_matrix(Path(name), kinds, set(kinds), text=text)
        except MatrixInvalid as exc:
            message(f"warning: matrix {name} does not load, not used: {str(exc).splitlines()[0]}")
            continue
        for case in loaded.cases:
            if case.backend != NAME or case.arch != arch or not isinstance(case.axes, DenseAxes):
                continue
            key = Key(case.dtype_label, case.tile, case.axes.cluster, case.axes.swap_ab, case.axes.stream_k)
            where = name
            if case.expectation is not None and case.expectation.source:
                where += f", {case.expectation.source}"
            found.setdefault(key, Counter())[f"{case.expected} [{where}]"] += 1
    return found


def _device(verdict: VerdictRecord) -> str:
    device = verdict.device
    if device is None:
        return "device not recorded"
    if device.kind == "hardware":
        return f"hardware {device.name}"
    if device.kind == "virtual":
        return f"virtual {device.arch or device.name}"
    return "build"


def judged(
    results: Iterable[ResultsDocument], arch: str
) -> Iterator[tuple[ResultsDocument, CaseEntry, VerdictRecord, Key]]:
    """The judged dense entries of ``arch`` in results files, each with the tactic it judged and
    its document (whose host holds what a verdict does not record)."""
    for document in results:
        for entry, verdict in document.judged():
            key = None if entry.case is None or entry.case.arch != arch else record_key(entry.case)
            if key is not None:
                yield document, entry, verdict, key


def observed_verdicts(results: Iterable[ResultsDocument], arch: str) -> Verdicts:
    """The dense verdicts of ``arch`` in results files, ``outcome [device]`` counted per tactic
    (``unrun (through launch)``: a pass whose kernel did not run)."""
    found: Verdicts = {}
    for _document, _entry, verdict, key in judged(results, arch):
        word = verdict.reported
        if verdict.unrun:
            word += f" (through {verdict.judged_through.value})"
        found.setdefault(key, Counter())[f"{word} [{_device(verdict)}]"] += 1
    return found


def counted(counts: Counter[str] | None) -> str:
    if not counts:
        return UNJUDGED
    order = sorted(counts, key=lambda w: (not w.startswith("pass"), w))
    return "; ".join(w if counts[w] == 1 else f"{w} x{counts[w]}" for w in order)
