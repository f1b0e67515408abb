"""A verdict against its case's expectation: stage, and status where the matrix records one.

A known-bad case counts as an expected failure only when it fails at the stage its expectation
names *and*, if the expectation records a status (CUTLASS's or the runtime's, as
``--tile-update`` wrote it), with that status: the same stage for another reason is a different
failure. This module is the one place that decides it; the test items, ``--tile-update`` and the
results readers (:mod:`..results.category`) call it.
"""

from __future__ import annotations

from ..reasons import shorten, stable_reason
from ..verdict import Verdict
from .rewrite import Change
from .schema import Expectation
from .update import entry_line, expectation_change


def status_matches(expected_status: str | None, status: str) -> bool:
    """An expectation without a status accepts any; one with a status, exactly that one (both
    are recorded with :func:`..reasons.stable_reason`, so the texts compare as they are)."""
    return expected_status is None or expected_status == status


def meets(expected: str, expected_status: str | None, outcome: str, status: str) -> bool:
    """Whether a verdict's ``outcome`` (``pass`` or a stage) and ``status`` are what a case
    expecting ``expected`` (``pass`` or a stage) with ``expected_status`` expects."""
    if outcome != expected:
        return False
    return expected == "pass" or status_matches(expected_status, status)


def describe_expected(stage: str, status: str | None) -> str:
    """``initialize (status 'Error Internal')``: an expected rejection as mismatches show it."""
    return stage if status is None else f"{stage} (status {status!r})"


def describe_observed(verdict: Verdict) -> str:
    """``initialize (status 'Error Internal')``: a rejection as mismatches show it."""
    if verdict.passed:
        return verdict.reported
    return describe_expected(verdict.outcome, verdict.status or None)


class StatusMismatch(Exception):
    """A case failed at its expected stage with another status than its expectation records.

    Not a :class:`..verdict.StageFailure`, so the case's strict xfail (which catches only its
    stage's failure) does not take it: pytest reports a failure, showing both."""

    def __init__(self, expectation: Expectation, verdict: Verdict) -> None:
        self.expectation = expectation
        self.verdict = verdict
        super().__init__(mismatch_text(expectation, verdict))


def mismatch_text(expectation: Expectation | None, verdict: Verdict) -> str:
    """``expected rejection at stage initialize (status 'A'), but rejected at stage initialize
    (status 'B')``: expected and actual stage and status, both always shown."""
    observed = describe_observed(verdict)
    if expectation is None:
        return f"expected pass, but rejected at stage {observed}"
    expected = describe_expected(expectation.stage, expectation.status)
    if verdict.passed:
        return f"expected rejection at stage {expected}, but {observed}"
    return f"expected rejection at stage {expected}, but rejected at stage {observed}"


def status_mismatch(expectation: Expectation | None, verdict: Verdict) -> StatusMismatch | None:
    """The mismatch of a verdict that failed at its expected stage with another status, else None."""
    if expectation is None or verdict.outcome != expectation.stage:
        return None
    if status_matches(expectation.status, verdict.status):
        return None
    return StatusMismatch(expectation, verdict)


def renewed_details(expectation: Expectation | None, verdict: Verdict) -> list[str]:
    """The recorded details (smem, limit, reason) that a verdict of the expectation's stage and
    source now gives otherwise: what the same device says today, not what another one said."""
    if expectation is None or expectation.source is None or expectation.source != verdict.source:
        return []
    if verdict.outcome != expectation.stage or not status_matches(expectation.status, verdict.status):
        return []
    fresh = {
        "smem": verdict.smem_requested,
        "limit": verdict.smem_limit,
        "reason": shorten(stable_reason(verdict.detail)) or None,
    }
    return [name for name, value in fresh.items() if getattr(expectation, name) != value]


def expectation_update(case_id: str, expectation: Expectation | None, verdict: Verdict) -> Change | None:
    """What ``--tile-update`` writes for a case: the new stage
    (:func:`.update.expectation_change`), or, at the same stage with another status than the one
    recorded, the entry with the status the verdict now has, so the matrix keeps the status it
    matches on; at the same stage and status from the same source, the entry with the details it
    gives now (:func:`renewed_details`), so a matrix does not keep a reason its source no longer
    gives."""
    mismatch = status_mismatch(expectation, verdict)
    if mismatch is None:
        expected = expectation.stage if expectation is not None else "pass"
        renewed = renewed_details(expectation, verdict)
        if renewed:
            return Change(
                case_id, expected, f"{expected} ({', '.join(renewed)} renewed)", entry_line(case_id, verdict)
            )
        return expectation_change(case_id, expected, verdict)
    before = describe_expected(mismatch.expectation.stage, mismatch.expectation.status)
    return Change(case_id, before, describe_observed(verdict), entry_line(case_id, verdict))
