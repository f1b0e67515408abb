"""A case's category (pass, known-bad, regression, fixed, not judged) on every combination of
pytest outcome, expectation, verdict and the stage the verdict was judged through."""

from __future__ import annotations

import itertools

import pytest

from pytest_tileconform.results.category import Category, categorize
from pytest_tileconform.verdict import EXPECTATIONS, Stage

OUTCOMES = ("passed", "failed", "xfailed", "xpassed", "skipped", "error", "rerun", None)
EXPECTED = (None, *EXPECTATIONS)
VERDICTS = (None, *EXPECTATIONS)
THROUGH = tuple(s.value for s in Stage)
STAGES = tuple(s.value for s in Stage)


def _order(stage: str) -> int:
    return Stage(stage).order


@pytest.mark.parametrize(
    ("expected", "verdict", "through", "category"),
    [
        ("pass", "pass", "numerics", Category.PASS),
        ("pass", "pass", "launch", Category.UNRUN),  # a virtual pass: the kernel did not run
        ("pass", "pass", "compile", Category.UNRUN),  # compile only
        ("pass", "pass", "run", Category.PASS),  # the kernel ran (D unchecked: merge marks it)
        ("pass", "initialize", "launch", Category.REGRESSION),
        ("pass", "numerics", "numerics", Category.REGRESSION),
        ("initialize", "initialize", "launch", Category.KNOWN_BAD),
        ("compile", "compile", "compile", Category.KNOWN_BAD),
        ("initialize", "can_implement", "launch", Category.REGRESSION),  # failed earlier
        ("initialize", "run", "numerics", Category.REGRESSION),  # failed later
        ("initialize", "pass", "launch", Category.FIXED),  # XPASS(strict)
        ("numerics", "pass", "numerics", Category.FIXED),
        ("run", "pass", "launch", Category.NOT_JUDGED),  # the virtual device cannot reach run
        ("numerics", "pass", "launch", Category.NOT_JUDGED),
        ("launch", "pass", "launch", Category.FIXED),  # launch itself was judged
    ],
)
def test_verdict_against_expectation(expected: str, verdict: str, through: str, category: Category) -> None:
    # whatever pytest said (except skipped), the verdict and the expectation decide
    for outcome in ("passed", "failed", "xfailed", "xpassed", "error", "rerun", None):
        assert categorize(outcome, expected, verdict, through) is category, outcome


def test_no_verdict_or_skipped_is_not_judged() -> None:
    for outcome, expected, through in itertools.product(OUTCOMES, EXPECTED, THROUGH):
        assert categorize(outcome, expected, None, through) is Category.NOT_JUDGED
    for expected, verdict, through in itertools.product(EXPECTED, VERDICTS, THROUGH):
        assert categorize("skipped", expected, verdict, through) is Category.NOT_JUDGED


@pytest.mark.parametrize(
    ("outcome", "verdict", "category"),
    [
        ("xfailed", "initialize", Category.KNOWN_BAD),
        ("xpassed", "pass", Category.FIXED),
        ("failed", "pass", Category.FIXED),  # how pytest reports a strict XPASS
        ("passed", "pass", Category.PASS),
        ("failed", "initialize", Category.REGRESSION),
        ("error", "initialize", Category.REGRESSION),
        (None, "pass", Category.PASS),
        (None, "run", Category.REGRESSION),
    ],
)
def test_without_an_expectation_pytest_tells_what_was_expected(
    outcome: str | None, verdict: str, category: Category
) -> None:
    """A case that left its matrix before the report was written records no expectation."""
    assert categorize(outcome, None, verdict, "numerics") is category


def test_every_combination() -> None:
    """Each rule, stated on its own, holds on the whole product of the four inputs."""
    seen = set()
    for outcome, expected, verdict, through in itertools.product(OUTCOMES, EXPECTED, VERDICTS, THROUGH):
        category = categorize(outcome, expected, verdict, through)
        seen.add(category)
        if verdict is None or outcome == "skipped":
            assert category is Category.NOT_JUDGED
            continue
        if expected is None:
            continue  # test_without_an_expectation_pytest_tells_what_was_expected
        rejected = verdict != "pass"
        if expected == "pass":
            passed = Category.PASS if _order(through) >= _order("run") else Category.UNRUN
            assert category is (Category.REGRESSION if rejected else passed)
        elif verdict == expected:
            assert category is Category.KNOWN_BAD
        elif rejected:
            assert category is Category.REGRESSION  # at another stage than expected
        elif _order(expected) > _order(through):
            assert category is Category.NOT_JUDGED  # the expected stage was never reached
        else:
            assert category is Category.FIXED
        # a pytest pass never hides a rejection; only a failure matching its expectation is known-bad
        assert (category is Category.KNOWN_BAD) == (rejected and verdict == expected)
    assert seen == set(Category)
    assert len(OUTCOMES) * len(EXPECTED) * len(VERDICTS) * len(THROUGH) == 8 * 13 * 13 * 11


def test_category_order_puts_what_needs_action_first() -> None:
    assert sorted(Category, key=lambda c: c.order) == [
        Category.REGRESSION,
        Category.FIXED,
        Category.KNOWN_BAD,
        Category.UNRUN,
        Category.PASS,
        Category.NOT_JUDGED,
    ]


@pytest.mark.parametrize(
    ("expected_status", "status", "category"),
    [
        (None, "Error Internal", Category.KNOWN_BAD),  # no status recorded: any status
        ("Error Internal", "Error Internal", Category.KNOWN_BAD),
        ("Error Internal", "Error Invalid Problem", Category.REGRESSION),
        ("Error Internal", "", Category.REGRESSION),
    ],
)
def test_a_known_bad_case_matches_stage_and_recorded_status(
    expected_status: str | None, status: str, category: Category
) -> None:
    for outcome in ("xfailed", "failed"):
        got = categorize(
            outcome, "initialize", "initialize", "launch", expected_status=expected_status, status=status
        )
        assert got is category
