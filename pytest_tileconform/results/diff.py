"""``tileconform report diff OLD.json NEW.json``: what changed between two runs, case by case.

Where ``report compare`` asks whether two verdicts agree, this asks what a reviewer of NEW must
know against a baseline OLD: which cases became regressions (the gate), which were fixed, which
changed their verdict's stage or status or their expectation, which cases are new, gone, or no
longer judged. Each case is put in its :class:`~.category.Category` in both files (the verdict
against the matrix's expectation of that run), so a tile that was already known to be bad, or
was already a regression in OLD, does not fail the gate again.

Cases are matched as ``report compare`` matches them: by id, and by matrix file name and id
where either file judged one id in several matrices.
"""

from __future__ import annotations

import enum
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field

from .category import MEANING, Category, category_of, partly_judged
from .compare import match_cases
from .merge import CELL_ORDER, LOUD, mark, mark_meaning, md_table, number
from .model import CaseEntry, ResultsDocument

#: a skip reason longer than this is cut in the table
_REASON_CHARS = 90
#: sections that decide nothing are folded (a <details> block) when longer than this
FOLD_ROWS = 20


class Change(enum.Enum):
    """The sections of a diff, in the order they are shown; a case is in at most one."""

    NEW_REGRESSION = "New regressions"
    FIXED = "Fixes"
    CHANGED = "Changed verdict or expectation"
    NEWLY_NOT_JUDGED = "Newly not judged"
    STILL_REGRESSION = "Regressions in both runs"
    ADDED = "Added"
    REMOVED = "Removed"


#: what each section holds, printed under its heading
ABOUT = {
    Change.NEW_REGRESSION: "regressions in NEW that OLD did not have (new cases too): they fail the gate",
    Change.FIXED: "failed in OLD and pass in NEW, or newly pass against a known-bad expectation (XPASS); "
    "an unrun pass in NEW (the kernel did not run) is a change, not a fix",
    Change.CHANGED: "another stage, status or category, or another expectation in the matrix",
    Change.NEWLY_NOT_JUDGED: "judged in OLD, skipped or without a verdict in NEW",
    Change.STILL_REGRESSION: "regressions already in OLD: listed, not gating",
    Change.ADDED: "in NEW only (a regression among them is a new regression above)",
    Change.REMOVED: "in OLD only",
}


FOLDABLE = frozenset({Change.STILL_REGRESSION, Change.ADDED, Change.REMOVED})
#: a section in the one-line summary
SHORT = {
    Change.NEW_REGRESSION: "new regression(s)",
    Change.FIXED: "fix(es)",
    Change.CHANGED: "changed",
    Change.NEWLY_NOT_JUDGED: "newly not judged",
    Change.STILL_REGRESSION: "regression(s) in both",
    Change.ADDED: "added",
    Change.REMOVED: "removed",
}


@dataclass(frozen=True)
class State:
    """One case in one file, as the diff compares and shows it."""

    category: Category
    expected: str
    verdict: str  # pass, the stage it failed at, or "no verdict"
    status: str
    through: str | None  # a pass that holds only through this stage (an unrun one: how far it was judged)
    smem: str  # "102,400 B > 101,376" for a rejection, else ""
    reason: str  # why it was not judged, for a case without one

    def compared(self) -> tuple[Category, str, str, str]:
        return (self.category, self.expected, self.verdict, self.status)

    def text(self) -> str:
        """``regression: initialize (Error Internal, 102,400 B > 101,376)``, ``pass†``,
        ``unrun (through launch)``."""
        if self.category is Category.UNRUN:
            return f"{self.category.value} (through {self.through})" if self.through else self.category.value
        head = self.category.value + mark(self.through)
        if self.category is Category.NOT_JUDGED:
            return f"{head}: {self.reason}" if self.reason else head
        if self.verdict == "pass":
            return head if self.category is Category.PASS else f"{head}: passed"
        detail = [d for d in (self.status, self.smem) if d]
        return f"{head}: {self.verdict}" + (f" ({', '.join(detail)})" if detail else "")


def state_of(entry: CaseEntry) -> State:
    verdict = entry.verdict
    category = category_of(entry)
    reason = ""
    if category is Category.NOT_JUDGED:
        reason = entry.skip_reason or entry.outcome or "no verdict"
        if len(reason) > _REASON_CHARS:
            reason = reason[: _REASON_CHARS - 1] + "…"
    smem = ""
    if verdict is not None and verdict.outcome != "pass" and verdict.smem_requested is not None:
        limit = verdict.smem_limit
        over = f" > {number(limit)}" if limit is not None and verdict.smem_requested > limit else ""
        smem = f"{number(verdict.smem_requested)} B{over}"
    return State(
        category=category,
        expected=entry.expected or "?",
        verdict=verdict.reported if verdict is not None else "no verdict",
        status=verdict.status if verdict is not None else "",
        through=partly_judged(entry),
        smem=smem,
        reason=reason,
    )


@dataclass(frozen=True)
class Row:
    key: str  # the case id, or matrix::id where an id is in several matrices
    old: State | None
    new: State | None


@dataclass
class Diff:
    rows: dict[Change, list[Row]] = field(default_factory=lambda: {c: [] for c in Change})
    matched: int = 0  # cases in both files
    unchanged: int = 0
    old_devices: Counter[str] = field(default_factory=Counter)
    new_devices: Counter[str] = field(default_factory=Counter)

    @property
    def new_regressions(self) -> list[Row]:
        return self.rows[Change.NEW_REGRESSION]


def classify(old: State | None, new: State | None) -> Change | None:
    """The section of a case (None: unchanged)."""
    if new is None:
        return Change.REMOVED
    if new.category is Category.REGRESSION:
        if old is None or old.category is not Category.REGRESSION:
            return Change.NEW_REGRESSION
        return Change.STILL_REGRESSION
    if old is None:
        return Change.ADDED
    if new.category is Category.NOT_JUDGED and old.category is not Category.NOT_JUDGED:
        return Change.NEWLY_NOT_JUDGED
    was_failing = old.category in (Category.REGRESSION, Category.KNOWN_BAD)
    passes = new.category in (Category.PASS, Category.FIXED)
    if (was_failing and passes) or (new.category is Category.FIXED and old.category is not Category.FIXED):
        return Change.FIXED
    return None if old.compared() == new.compared() else Change.CHANGED


def _devices(document: ResultsDocument) -> Counter[str]:
    return Counter(
        v.device.name if v.device is not None else v.source.split(" (", 1)[0] for _, v in document.judged()
    )


def diff(old: ResultsDocument, new: ResultsDocument) -> Diff:
    cases_old, cases_new = match_cases(old, new)
    result = Diff(old_devices=_devices(old), new_devices=_devices(new))
    for key in sorted(cases_old.keys() | cases_new.keys()):
        before = state_of(cases_old[key]) if key in cases_old else None
        after = state_of(cases_new[key]) if key in cases_new else None
        if before is not None and after is not None:
            result.matched += 1
        change = classify(before, after)
        if change is None:
            result.unchanged += 1
        else:
            result.rows[change].append(Row(key, before, after))
    return result


# -- Markdown ------------------------------------------------------------------------------------
def _file_line(label: str, name: str, document: ResultsDocument, devices: Counter[str]) -> str:
    judged = ", ".join(f"{device} ({n})" for device, n in sorted(devices.items())) or "nothing judged"
    created = f", created {document.created}" if document.created else ""
    return f"- {label} `{name}`: {len(document.cases)} case(s){created}; judged by {judged}"


def _expected(row: Row) -> str:
    old, new = (row.old.expected if row.old else None), (row.new.expected if row.new else None)
    if old is None or new is None or old == new:
        return str(new or old)
    return f"{old} → {new}"


def _state(state: State | None, *, loud: bool) -> str:
    if state is None:
        return "—"
    text = state.text()
    return f"**{text}**" if loud and state.category in LOUD else text


def summary(result: Diff) -> str:
    """``**1 new regression** · 1 fix · ... · 30 unchanged``."""
    counts = {change: len(rows) for change, rows in result.rows.items()}
    parts = [f"{counts[c]} {SHORT[c]}" for c in Change]
    parts[0] = f"**{parts[0]}**" if counts[Change.NEW_REGRESSION] else parts[0]
    return " · ".join([*parts, f"{result.unchanged} unchanged"])


def _legend(states: Iterable[State]) -> list[str]:
    lines = [f"- {'**' + c.value + '**' if c in LOUD else c.value}: {MEANING[c]}" for c in CELL_ORDER]
    stages: dict[str, set[str]] = {}
    for state in states:
        if state.through is not None and state.category is not Category.UNRUN:
            stages.setdefault(mark(state.through), set()).add(state.through)
    lines += [f"- {symbol}: {mark_meaning(found)}" for symbol, found in sorted(stages.items())]
    return lines


def to_markdown(
    result: Diff, old: ResultsDocument, new: ResultsDocument, old_name: str, new_name: str
) -> str:
    lines = [
        "# Tile conformance: what changed",
        "",
        _file_line("OLD", old_name, old, result.old_devices),
        _file_line("NEW", new_name, new, result.new_devices),
        "",
        f"{result.matched} case(s) in both. " + summary(result) + ".",
        "",
    ]
    if not any(rows for change, rows in result.rows.items() if change is not Change.STILL_REGRESSION):
        lines += ["No case changed its category, verdict, status or expectation.", ""]
    shown: list[State] = []
    for change in Change:
        rows = result.rows[change]
        if not rows:
            continue
        lines += [f"## {change.value} ({len(rows)})", "", ABOUT[change] + ".", ""]
        loud = change in (Change.NEW_REGRESSION, Change.FIXED)
        table = [
            [f"`{row.key}`", _expected(row), _state(row.old, loud=False), _state(row.new, loud=loud)]
            for row in rows
        ]
        rendered = md_table(["case", "expected", "OLD", "NEW"], table)
        if change in FOLDABLE and len(rows) > FOLD_ROWS:  # GitHub renders it folded
            rendered = [f"<details><summary>{len(rows)} case(s)</summary>", "", *rendered, "", "</details>"]
        lines += [*rendered, ""]
        shown += [s for row in rows for s in (row.old, row.new) if s is not None]
    if shown:
        lines += ["Categories:", "", *_legend(shown), ""]
    lines.append(
        "The gate (exit status 1): a case that is a regression in NEW and was not one in OLD, a "
        "case new in NEW included. Nothing else fails it: not regressions OLD already had, fixes, "
        "changes, cases newly not judged, added cases that are not regressions, or removed cases."
    )
    return "\n".join(lines)
