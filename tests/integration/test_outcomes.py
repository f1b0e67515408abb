"""Stage-aware expectations: what pytest reports for each (expected, observed) pair."""

from __future__ import annotations

from helpers.fake_backend import TileRun, verbose_outcomes
from helpers.fake_matrices import OUTCOMES_MATRIX as MATRIX
from helpers.fake_matrices import OUTCOMES_VERDICTS as VERDICTS


def run(tc: TileRun, *args: str):  # type: ignore[no-untyped-def]
    tc.matrix(MATRIX)
    tc.verdicts(VERDICTS)
    return tc.run("-v", "-rsxX", *args)


def test_outcome_counts(tc: TileRun) -> None:
    result = run(tc)
    result.assert_outcomes(passed=1, failed=3, xfailed=2, skipped=2)
    assert result.ret == 1


def test_outcome_per_case(tc: TileRun) -> None:
    assert verbose_outcomes(run(tc)) == {
        "m.yaml::sm90-bf16-64x64x64-c1x1x1-none": "PASSED",
        "m.yaml::sm90-bf16-128x64x64-c1x1x1-none": "FAILED",
        "m.yaml::sm90-bf16-128x128x64-c1x1x1-none": "XFAIL",
        "m.yaml::sm90-bf16-128x256x64-c1x1x1-none": "FAILED",
        "m.yaml::sm90-bf16-256x128x64-c1x1x1-none": "FAILED",
        "m.yaml::sm90-bf16-256x256x64-c1x1x1-none": "SKIPPED",
        "m.yaml::sm90-bf16-64x128x64-c1x1x1-none": "XFAIL",
        "m.yaml::sm100-bf16-64x64x64-c1x1x1-none": "SKIPPED",
    }


def test_unexpected_rejection_names_the_stage(tc: TileRun) -> None:
    result = run(tc)
    result.stdout.fnmatch_lines(
        [
            "*_ sm90-bf16-128x64x64-c1x1x1-none _*",
            "expected pass, but rejected at stage initialize",
            "  verdict: initialize smem=240000/232448 [[]fake[]]",
            "  case: {'arch': 'sm90', *'tile': '128x64x64'*",
        ]
    )


def test_rejection_at_another_stage_than_expected_fails(tc: TileRun) -> None:
    result = run(tc)
    result.stdout.fnmatch_lines(
        [
            "*_ sm90-bf16-128x256x64-c1x1x1-none _*",
            "expected rejection at stage initialize, but rejected at stage compile",
            "  verdict: compile static_assert failed [[]fake[]]",
        ]
    )


def test_expected_failure_that_passes_is_a_strict_xpass(tc: TileRun) -> None:
    result = run(tc)
    result.stdout.fnmatch_lines(
        [
            "*_ sm90-bf16-256x128x64-c1x1x1-none _*",
            "[[]XPASS(strict)[]] known bad at initialize (expected stage: initialize; if this "
            "passes, the matrix is out of date: rerun with --tile-update to record the observed "
            "verdict)",
        ]
    )


def test_xfail_reason_is_the_expectation_reason(tc: TileRun) -> None:
    result = run(tc)
    result.stdout.fnmatch_lines(
        [
            "XFAIL m.yaml::sm90-bf16-128x128x64-c1x1x1-none - smem over the opt-in limit "
            "(expected stage: initialize; *",
        ]
    )


def test_not_judgeable_skips_naming_the_arch_found(tc: TileRun) -> None:
    result = run(tc)
    result.stdout.fnmatch_lines(["SKIPPED [[]1[]] *: sm100 is not present (found sm90)"])


def test_virtual_verdict_cannot_judge_a_run_failure(tc: TileRun) -> None:
    result = run(tc)
    result.stdout.fnmatch_lines(
        [
            "SKIPPED [[]1[]] *: expected to fail at run, which virtual:sm90 cannot judge "
            "(it judges through launch); passed through launch"
        ]
    )


def test_known_bad_at_every_stage(tc: TileRun) -> None:
    stages = ["compile", "can_implement", "initialize", "launch", "run", "numerics"]
    tiles = [f"{64 * (i + 1)}x64x64" for i in range(len(stages))]
    ids = [f"sm90-bf16-{t}-c1x1x1-none" for t in tiles]
    tc.matrix(
        "version: 1\nbackend: fake\nsuites:\n  - arch: sm90\n    dtype: bf16\n"
        f"    tile: [{', '.join(tiles)}]\n"
        "    problems: {experts: 1, rows: 8, n: 64, k: 64}\nexpectations:\n"
        + "".join(f"  {i}: {{stage: {s}}}\n" for i, s in zip(ids, stages, strict=True))
    )
    tc.verdicts(dict(zip(ids, stages, strict=True)))
    tc.run().assert_outcomes(xfailed=6)
    # each stage is its own failure: shift every verdict one stage later -> all fail
    tc.verdicts(dict(zip(ids, [*stages[1:], "compile"], strict=True)))
    tc.run().assert_outcomes(failed=6)


def test_backend_exception_is_an_error_of_the_case(tc: TileRun) -> None:
    tc.matrix(MATRIX)
    (tc.path / "verdicts.json").write_text("{not json")
    result = tc.run("--tb=no", "-rf")
    result.assert_outcomes(failed=7, skipped=1)
    result.stdout.fnmatch_lines(["FAILED m.yaml::sm90-bf16-64x64x64-c1x1x1-none - *JSONDecodeError*"])
