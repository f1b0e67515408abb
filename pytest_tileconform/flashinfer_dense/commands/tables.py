"""``tileconform tactics --dense`` and ``drift --dense``: FlashInfer's dense autotuner ids, what
each selects and what is known of it, per runner and output type.

A dense runner's tactic id is an index into its ``getConfigs()`` (:mod:`..offered`), the same for
every output type of the runner (the module's template takes the output type, not the list). One
section per runner and output type lists every id with its tile (the enum and the CTA shape its
dispatch instantiates), cluster, swap_ab and scheduler, what the matrices expect and, with results
files, what they observed. Drift flags an offered tactic whose CTA shape the generator does not
render (it could not link), one that no matrix and no results file judges, and one that always
fails.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from ...dtypes import shape_label
from ..offered import Tactic
from ..runners import Runner
from .verdicts import UNJUDGED, Verdicts, counted, tactic_key

FLAG_NOT_INSTANTIATED = "offered, not instantiated"
FLAG_UNJUDGED = "offered, unjudged"
FLAG_ALWAYS_FAILS = "offered, always fails"


@dataclass(frozen=True)
class Row:
    runner: Runner
    dtypes: str
    tactic: Tactic
    expected: str
    observed: str | None  # None: no results file given

    @property
    def instantiated(self) -> bool:
        return set(self.tactic.ctas) <= set(self.runner.family.instantiated)

    @property
    def flags(self) -> list[str]:
        flags = [] if self.instantiated else [FLAG_NOT_INSTANTIATED]
        seen = [w for w in (self.expected, self.observed) if w is not None and w != UNJUDGED]
        if not seen:
            flags.append(FLAG_UNJUDGED)
        elif (
            self.observed not in (None, UNJUDGED)
            and "pass" not in self.observed
            and "unrun" not in self.observed
        ):
            flags.append(FLAG_ALWAYS_FAILS)
        return flags

    def as_dict(self) -> dict[str, Any]:
        t, r = self.tactic, self.runner
        return {
            "arch": r.arch,
            "runner": r.runner_class,
            "custom_ops": list(r.custom_ops),
            "module": r.family.module,
            "dtypes": self.dtypes,
            "tactic": t.index,
            "tile_config": t.tile,
            "tile": shape_label(t.cta),
            "ctas": [shape_label(c) for c in t.ctas],
            "cluster": shape_label(t.cluster),
            "swap_ab": t.swap_ab,
            "stream_k": t.stream_k,
            "instantiated": self.instantiated,
            "expected": self.expected,
            "observed": self.observed,
        }


def rows_of(runners: Sequence[Runner], expected: Verdicts, observed: Verdicts | None) -> list[Row]:
    """Every id of every runner, once per output type, in the runner's order."""
    rows = []
    for runner in runners:
        for dtypes in runner.labels():
            for t in runner.family.tactics:
                key = tactic_key(dtypes, t)
                seen = None if observed is None else counted(observed.get(key))
                rows.append(Row(runner, dtypes, t, counted(expected.get(key)), seen))
    return rows


COLUMNS = [
    "tactic",
    "tile config",
    "CTA (K in elements)",
    "cluster",
    "swap_ab",
    "scheduler",
    "expected (matrices)",
]


def _cells(row: Row, with_observed: bool, with_flags: bool) -> list[str]:
    t = row.tactic
    cta = shape_label(t.cta)
    if len(t.ctas) > 1:
        cta += " (else " + ", ".join(shape_label(c) for c in t.ctas[:-1]) + ")"
    cells = [
        str(t.index),
        t.tile,
        cta,
        shape_label(t.cluster),
        str(t.swap_ab).lower(),
        "stream-K" if t.stream_k else "data-parallel",
        row.expected,
    ]
    if with_observed:
        cells.append(row.observed or UNJUDGED)
    if with_flags:
        cells += ["yes" if row.instantiated else "no", ", ".join(f"**{f}**" for f in row.flags)]
    return [c.replace("|", "\\|") for c in cells]


def section_title(runner: Runner, dtypes: str) -> str:
    ops = ", ".join(runner.custom_ops) or "no autotuner op found"
    last = len(runner.family.tactics) - 1
    return (
        f"{runner.arch} {dtypes}: {runner.runner_class} ({ops}; module {runner.family.module}; ids 0-{last})"
    )


def to_markdown(
    rows: Sequence[Row], header: Sequence[str], *, with_observed: bool, drift: bool = False
) -> str:
    columns = [*COLUMNS, *(["observed (results)"] if with_observed else [])]
    columns += ["generated", "flags"] if drift else []
    lines = list(header)
    sections: dict[tuple[str, str], list[Row]] = {}
    for row in rows:
        sections.setdefault((row.runner.family.module, row.dtypes), []).append(row)
    for chosen in sections.values():
        first = chosen[0]
        lines += ["", f"## {section_title(first.runner, first.dtypes)}", ""]
        lines += ["| " + " | ".join(columns) + " |", "| " + " | ".join("---" for _ in columns) + " |"]
        lines += ["| " + " | ".join(_cells(r, with_observed, drift)) + " |" for r in chosen]
    return "\n".join(lines) + "\n"


def drift_summary(arch: str, rows: Sequence[Row]) -> str:
    flags: dict[str, int] = {}
    for row in rows:
        for flag in row.flags:
            flags[flag] = flags.get(flag, 0) + 1
    listed = ", ".join(f"{n} {f}" for f, n in sorted(flags.items())) or "nothing flagged"
    return f"{len(rows)} dense tactic(s) x output type for {arch}: {listed}."
