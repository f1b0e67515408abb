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

from ...commands.judged import counted as counted_words
from ...commands.judged import expected_word, keyed, matrix_cases, observed_words
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
    from .. import NAME

    found: Verdicts = {}
    for name, case in matrix_cases(matrices):
        if case.backend != NAME or case.arch != arch or not isinstance(case.axes, DenseAxes):
            continue
        key = Key(case.dtype_label, case.tile, case.axes.cluster, case.axes.swap_ab, case.axes.stream_k)
        found.setdefault(key, Counter())[expected_word(case, name)] += 1
    return found


def judged(
    results: Iterable[ResultsDocument], arch: str
) -> Iterator[tuple[ResultsDocument, CaseEntry, VerdictRecord, Key]]:
    """The judged dense entries of ``arch`` in results files, each with the tactic it judged and
    its document (whose host holds what a verdict does not record)."""
    return keyed(results, arch, record_key)


def observed_verdicts(results: Iterable[ResultsDocument], arch: str) -> Verdicts:
    """The dense verdicts of ``arch`` in results files, ``outcome [device]`` counted per tactic
    (``unrun (through launch)``: a pass whose kernel did not run)."""
    return observed_words(results, arch, record_key)


def counted(counts: Counter[str] | None) -> str:
    """The words counted, passes first; ``unjudged`` where there is none."""
    return counted_words(counts, UNJUDGED)
