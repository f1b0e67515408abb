"""A case's outcome against its expectation, in the words a reviewer acts on.

A verdict alone says what happened (``pass`` or the stage a case was rejected at); the matrix
says what should have happened. ``report merge`` and ``report diff`` show the two together, so
that a failure the matrix already knows about (known-bad) is never read as a regression, and a
strict XPASS (a known-bad case that now passes, which fails the pytest run) is never read as a
plain pass, and a pass whose kernel did not run (a virtual device judges through ``launch``) is
never read as a pass on a GPU. :func:`categorize` is the one place that decides it; everything
that shows a category calls it.
"""

from __future__ import annotations

import enum

from ..matrix.expect import status_matches
from ..verdict import UNRUN, Stage, kernel_ran, output_checked
from .model import CaseEntry


class Category(str, enum.Enum):
    """In the order a reader should look at them: what needs action first."""

    REGRESSION = "regression"  # expected pass (or another stage) and failed differently
    FIXED = "fixed"  # expected to fail, passed every stage that was judged (XPASS)
    KNOWN_BAD = "known-bad"  # failed at exactly the stage (and status) the matrix expects
    UNRUN = UNRUN  # expected to pass, passed every stage judged, but the kernel did not run
    PASS = "pass"  # expected to pass, and passed with the kernel run
    NOT_JUDGED = "not judged"  # skipped, errored before a verdict, or could not judge its expected stage

    @property
    def order(self) -> int:
        return list(Category).index(self)


#: What each category means, for the legends under the tables and in the diff.
MEANING: dict[Category, str] = {
    Category.PASS: "expected to pass, and passed with its kernel run",
    Category.UNRUN: "expected to pass, passed every stage judged, but the kernel did not run (a "
    "virtual device judges through launch): not known to work on a GPU",
    Category.KNOWN_BAD: "failed at its expected stage (and status, where the matrix records one)",
    Category.REGRESSION: "failed where it was not expected to (expected pass, or another stage or status)",
    Category.FIXED: "expected to fail, passed (XPASS: update the matrix)",
    Category.NOT_JUDGED: "skipped, or its expected stage is past what the device judges",
}


def categorize(
    outcome: str | None,
    expected: str | None,
    verdict_outcome: str | None,
    judged_through: str | None,
    *,
    expected_status: str | None = None,
    status: str = "",
) -> Category:
    """The category of one case.

    ``outcome`` is pytest's word (passed, failed, xfailed, xpassed, skipped, error, or another
    plugin's), ``expected`` the matrix's (``pass`` or a stage), ``verdict_outcome`` the verdict's
    (``pass`` or the stage it failed at; None without a verdict) and ``judged_through`` the last
    stage the verdict speaks for; ``expected_status`` the status the expectation records (None:
    any) and ``status`` the verdict's.

    The verdict and the expectation decide; pytest's outcome is consulted only where they cannot:
    ``skipped`` (nothing was judged against the expectation, whatever the verdict says) and a
    missing expectation (a case that left its matrix before the report was written), where
    pytest's xfailed / xpassed still tell what had been expected. A strict XPASS is reported by
    pytest as ``failed``, which is why the word alone cannot tell a fix from a regression.
    """
    if verdict_outcome is None or outcome == "skipped":
        return Category.NOT_JUDGED
    passed = verdict_outcome == "pass"
    if expected is None:
        if outcome == "xfailed":
            return Category.KNOWN_BAD
        if outcome == "xpassed" or (outcome == "failed" and passed):
            return Category.FIXED
        expected = "pass"
    if expected == "pass":
        if not passed:
            return Category.REGRESSION
        ran = judged_through is None or kernel_ran(Stage(judged_through))
        return Category.PASS if ran else Category.UNRUN
    if verdict_outcome == expected:
        return Category.KNOWN_BAD if status_matches(expected_status, status) else Category.REGRESSION
    if passed:
        if judged_through is not None and Stage(expected).order > Stage(judged_through).order:
            return Category.NOT_JUDGED  # the stage it is known to fail at was never reached
        return Category.FIXED
    return Category.REGRESSION


def category_of(entry: CaseEntry) -> Category:
    """:func:`categorize` for one case of a results file."""
    verdict = entry.verdict
    return categorize(
        entry.outcome,
        entry.expected,
        verdict.outcome if verdict is not None else None,
        verdict.judged_through.value if verdict is not None else None,
        expected_status=entry.expected_status,
        status=verdict.status if verdict is not None else "",
    )


def partly_judged(entry: CaseEntry) -> str | None:
    """The last stage judged when a case counts as a pass, an unrun pass or a fix but its device
    did not check D (a virtual device stops at ``launch``): the pass holds only that far. None for
    a full judgment, for a rejection (the failure itself was judged) and for a case not judged."""
    verdict = entry.verdict
    if verdict is None or output_checked(verdict.judged_through):
        return None
    if category_of(entry) not in (Category.PASS, Category.UNRUN, Category.FIXED):
        return None
    return str(verdict.judged_through.value)
