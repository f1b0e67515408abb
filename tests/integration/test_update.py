"""--tile-update: rewriting a matrix's expectations to the observed verdicts, end to end."""

from __future__ import annotations

import json

import pytest
from helpers.fake_backend import BASIC, BASIC_IDS, TileRun, matrix_errors, verbose_outcomes
from helpers.fake_matrices import OBSERVED, ORIGINAL, UPDATED


def test_round_trip_preserves_everything_but_changed_entries(tc: TileRun) -> None:
    path = tc.matrix(ORIGINAL)
    tc.verdicts(OBSERVED)
    result = tc.run("--tile-update")
    result.assert_outcomes(passed=0, failed=3, xfailed=1)
    assert path.read_text() == UPDATED


def test_update_summary_lists_changes(tc: TileRun) -> None:
    path = tc.matrix(ORIGINAL)
    tc.verdicts(OBSERVED)
    result = tc.run("--tile-update")
    result.stdout.fnmatch_lines(
        [
            "*= tileconform --tile-update =*",
            f"{path}: 3 expectation(s) updated",
            "  sm90-bf16-128x64x64-c1x1x1-none: pass -> initialize",
            "  sm90-bf16-256x128x64-c1x1x1-none: initialize -> pass",
            "  sm90-bf16-64x64x64-c1x1x1-none: compile -> can_implement",
        ]
    )


def test_updated_matrix_runs_green(tc: TileRun) -> None:
    tc.matrix(ORIGINAL)
    tc.verdicts(OBSERVED)
    assert tc.run("--tile-update").ret == 0  # it recorded every failure it saw
    result = tc.run("-v")
    result.assert_outcomes(passed=1, xfailed=3)
    assert result.ret == 0
    assert verbose_outcomes(result)["m.yaml::sm90-bf16-256x128x64-c1x1x1-none"] == "PASSED"


def test_update_that_records_every_failure_exits_0(tc: TileRun) -> None:
    tc.matrix(ORIGINAL)
    tc.verdicts(OBSERVED)
    result = tc.run("--tile-update")
    result.assert_outcomes(failed=3, xfailed=1)  # what the run saw, as pytest reports it
    assert result.ret == 0
    result.stdout.fnmatch_lines(
        [
            "every failure of this run (3) is recorded in its matrix: exit status 0 (review the diff; "
            "a rerun without --tile-update checks it)"
        ]
    )


def test_update_exits_1_for_a_failure_it_did_not_record(tc: TileRun) -> None:
    """A failure the update could not write, or one that is not a case's, keeps the exit status."""
    tc.matrix(BASIC + "expectations: {sm90-bf16-128x64x64-c1x1x1-none: {stage: run}}\n")
    result = tc.run("--tile-update")
    assert result.ret == 1
    result.stdout.fnmatch_lines(
        [f"1 failure(s) of this run NOT recorded in a matrix ({BASIC_IDS[0]}): the exit status stays 1"]
    )
    tc.matrix(BASIC)
    tc.verdicts({BASIC_IDS[0]: "compile"})
    tc.pytester.makepyfile(test_other="def test_other():\n    assert False\n")
    result = tc.run("--tile-update", "test_other.py")
    result.assert_outcomes(passed=2, failed=2)
    assert result.ret == 1
    result.stdout.fnmatch_lines(["1 failure(s) of this run NOT recorded in a matrix (test_other): *"])
    # the case's failure was recorded all the same
    assert "sm90-bf16-128x64x64-c1x1x1-none: {stage: compile" in (tc.path / "m.yaml").read_text()


STALE = (
    BASIC + "expectations:\n"
    "  sm90-bf16-128x64x64-c1x1x1-none: {stage: run}\n"
    "  sm90-bf16-64x64x64-c1x1x1-none: {stage: compile}   # its tile was deleted\n"
    "  sm90-fp16-128x64x64-c1x1x1-none: {stage: launch}\n"
)


def test_update_removes_expectations_of_cases_no_longer_in_the_matrix(tc: TileRun) -> None:
    """As a snapshot tool deletes the snapshots no test uses: an entry whose case is gone (its
    tile or dtype was deleted) fails the matrix's load, and --tile-update removes it, naming it,
    whatever the run selects."""
    path = tc.matrix(STALE)
    tc.verdicts({BASIC_IDS[0]: "run"})
    assert matrix_errors(tc.run(), path) == [
        f"{line}:3: expectation for {case_id!r}, which is not a case of this matrix "
        "(--tile-update removes it)"
        for line, case_id in ((10, "sm90-bf16-64x64x64-c1x1x1-none"), (11, "sm90-fp16-128x64x64-c1x1x1-none"))
    ]
    result = tc.run("--tile-update", "-k", "256x128x64")
    assert result.ret == 0
    result.stdout.fnmatch_lines(
        [
            f"{path}: 2 expectation(s) updated",
            "  sm90-bf16-64x64x64-c1x1x1-none: compile -> removed: no longer a case of this matrix",
            "  sm90-fp16-128x64x64-c1x1x1-none: launch -> removed: no longer a case of this matrix",
        ]
    )
    assert path.read_text() == BASIC + "expectations:\n  sm90-bf16-128x64x64-c1x1x1-none: {stage: run}\n"
    tc.run().assert_outcomes(passed=2, xfailed=1)


def test_second_update_changes_nothing(tc: TileRun) -> None:
    path = tc.matrix(ORIGINAL)
    tc.verdicts(OBSERVED)
    tc.run("--tile-update")
    result = tc.run("--tile-update")
    result.assert_outcomes(passed=1, xfailed=3)
    result.stdout.fnmatch_lines(["no expectation changed: every case that ran agrees with its matrix"])
    assert path.read_text() == UPDATED


def test_without_tile_update_the_file_is_untouched(tc: TileRun) -> None:
    path = tc.matrix(ORIGINAL)
    tc.verdicts(OBSERVED)
    result = tc.run()
    result.assert_outcomes(failed=3, xfailed=1)
    assert path.read_text() == ORIGINAL
    assert "tileconform --tile-update" not in result.stdout.str()


def test_expectations_key_absent(tc: TileRun) -> None:
    path = tc.matrix(BASIC)
    tc.verdicts({BASIC_IDS[2]: "launch"})
    tc.run("--tile-update").assert_outcomes(passed=2, failed=1)
    assert path.read_text() == BASIC + (
        'expectations:\n  sm90-bf16-256x128x64-c1x1x1-none: {stage: launch, source: "fake"}\n'
    )
    tc.run().assert_outcomes(passed=2, xfailed=1)


def test_expectations_absent_and_no_trailing_newline(tc: TileRun) -> None:
    path = tc.matrix(BASIC.rstrip("\n"))
    tc.verdicts({BASIC_IDS[0]: "compile"})
    tc.run("--tile-update").assert_outcomes(passed=2, failed=1)
    assert path.read_text() == BASIC + (
        'expectations:\n  sm90-bf16-128x64x64-c1x1x1-none: {stage: compile, source: "fake"}\n'
    )


@pytest.mark.parametrize("empty", ["expectations:", "expectations: {}", "expectations: null"])
def test_expectations_key_empty(tc: TileRun, empty: str) -> None:
    head = "version: 1\nbackend: fake\n"
    path = tc.matrix(head + empty + "\n" + BASIC.removeprefix(head))
    tc.verdicts({BASIC_IDS[1]: "numerics", BASIC_IDS[2]: "run"})
    tc.run("--tile-update").assert_outcomes(passed=1, failed=2)
    assert path.read_text() == (
        head
        + "expectations:\n"
        + '  sm90-bf16-128x128x64-c1x1x1-none: {stage: numerics, source: "fake"}\n'
        + '  sm90-bf16-256x128x64-c1x1x1-none: {stage: run, source: "fake"}\n'
        + BASIC.removeprefix(head)
    )
    tc.run().assert_outcomes(passed=1, xfailed=2)


def test_removing_the_last_entry_leaves_a_loadable_matrix(tc: TileRun) -> None:
    path = tc.matrix(BASIC + "expectations:\n  sm90-bf16-128x64x64-c1x1x1-none: {stage: run}\n")
    tc.run("--tile-update").assert_outcomes(passed=2, failed=1)
    assert path.read_text() == BASIC + "expectations:\n"
    tc.run().assert_outcomes(passed=3)


def test_update_only_touches_cases_that_ran(tc: TileRun) -> None:
    text = (
        BASIC.replace("arch: sm90", "arch: [sm90, sm100]")
        + "expectations:\n"
        + "  sm100-bf16-128x64x64-c1x1x1-none: {stage: initialize}\n"
        + "  sm90-bf16-128x128x64-c1x1x1-none: {stage: initialize}\n"
    )
    path = tc.matrix(text)
    tc.verdicts({BASIC_IDS[0]: "compile", BASIC_IDS[2]: "compile"})
    # deselected (-k) and not-judgeable (sm100) cases keep their expectations
    result = tc.run("--tile-update", "-k", "not 256x128x64")
    result.assert_outcomes(failed=2, skipped=2, deselected=2)
    assert path.read_text() == text.replace(
        "  sm90-bf16-128x128x64-c1x1x1-none: {stage: initialize}\n",
        '  sm90-bf16-128x64x64-c1x1x1-none: {stage: compile, source: "fake"}\n',
    )


def test_virtual_verdict_does_not_drop_a_run_expectation(tc: TileRun) -> None:
    text = BASIC + "expectations:\n  sm90-bf16-128x64x64-c1x1x1-none: {stage: run}\n"
    path = tc.matrix(text)
    tc.verdicts({BASIC_IDS[0]: {"stage": "pass", "judged_through": "launch"}})
    result = tc.run("--tile-update")
    result.assert_outcomes(passed=2, skipped=1)
    assert path.read_text() == text
    result.stdout.fnmatch_lines(["no expectation changed: *"])


def test_a_virtual_pass_is_unrun_in_the_summary(tc: TileRun) -> None:
    """A virtual device passes a case expected to fail at initialize: the entry goes (the stage it
    names was judged), and the summary says the case is unrun, never that it passed."""
    text = BASIC + "expectations:\n  sm90-bf16-128x64x64-c1x1x1-none: {stage: initialize}\n"
    path = tc.matrix(text)
    tc.verdicts({BASIC_IDS[0]: {"stage": "pass", "judged_through": "launch"}})
    result = tc.run("--tile-update")
    assert path.read_text() == BASIC + "expectations:\n"
    result.stdout.fnmatch_lines(
        [
            f"{path}: 1 expectation(s) updated",
            f"  {BASIC_IDS[0]}: initialize -> unrun (entry removed: expect a pass; the kernel did not run)",
        ]
    )
    assert "-> pass" not in result.stdout.str()


def test_flow_style_expectations_are_not_rewritten(tc: TileRun) -> None:
    text = BASIC + "expectations: {sm90-bf16-128x64x64-c1x1x1-none: {stage: run}}\n"
    path = tc.matrix(text)
    result = tc.run("--tile-update")
    result.assert_outcomes(passed=2, failed=1)
    assert path.read_text() == text
    result.stdout.fnmatch_lines(
        [
            f"{path}: not updated: {path}:8:1: --tile-update needs 'expectations' in block "
            "style, one entry per line; here it is one flow mapping {...}"
        ]
    )


def test_refused_when_ci_is_set(tc: TileRun, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tc.matrix(BASIC)
    tc.verdicts({BASIC_IDS[0]: "compile"})
    monkeypatch.setenv("CI", "true")
    result = tc.run("--tile-update")
    assert result.ret == 4
    result.stderr.fnmatch_lines(
        [
            "ERROR: --tile-update refuses to rewrite matrices when CI is set; "
            "add --tile-update-force to do it anyway"
        ]
    )
    assert path.read_text() == BASIC
    # without --tile-update, CI changes nothing
    tc.run().assert_outcomes(passed=2, failed=1)


def test_forced_when_ci_is_set(tc: TileRun, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tc.matrix(BASIC)
    tc.verdicts({BASIC_IDS[0]: "compile"})
    monkeypatch.setenv("CI", "1")
    tc.run("--tile-update", "--tile-update-force").assert_outcomes(passed=2, failed=1)
    assert path.read_text() == BASIC + (
        'expectations:\n  sm90-bf16-128x64x64-c1x1x1-none: {stage: compile, source: "fake"}\n'
    )


def test_two_matrices_updated_independently(tc: TileRun) -> None:
    a = tc.matrix(BASIC, "a.yaml")
    b = tc.matrix(BASIC.replace("bf16", "fp16"), "b.yaml")
    tc.verdicts({"sm90-fp16-128x64x64-c1x1x1-none": "launch"})
    tc.run("--tile-update", "--tile-matrix", "b.yaml", matrix="a.yaml").assert_outcomes(passed=5, failed=1)
    assert a.read_text() == BASIC
    assert b.read_text() == BASIC.replace("bf16", "fp16") + (
        'expectations:\n  sm90-fp16-128x64x64-c1x1x1-none: {stage: launch, source: "fake"}\n'
    )


def test_crlf_matrix_keeps_its_line_endings(tc: TileRun) -> None:
    text = BASIC + "expectations:\n  sm90-bf16-128x64x64-c1x1x1-none: {stage: run}  # flaky\n"
    path = tc.path / "m.yaml"
    path.write_bytes(text.replace("\n", "\r\n").encode())
    tc.verdicts({BASIC_IDS[0]: "launch"})
    tc.run("--tile-update").assert_outcomes(passed=2, failed=1)
    expected = text.replace("{stage: run}", '{stage: launch, source: "fake"}').replace("\n", "\r\n")
    assert path.read_bytes() == expected.encode()


def test_recorded_reasons_have_stable_paths(tc: TileRun) -> None:
    """A compile error quoted from a temporary build folder under the cache is recorded as the
    file's own name, in the matrix, the terminal and the results file alike."""
    cache = tc.path / "cache"
    key = "0123456789abcdef0123456789abcdef"
    detail = (
        f"{cache}/.build-k3j2x9q1/{key}/tu.cu(13): error: static assertion failed; "
        f"log {cache}/01/{key}/build.log"
    )
    stable = f"tu.cu(13): error: static assertion failed; log <cache>/01/{key}/build.log"
    path = tc.matrix(BASIC)
    tc.verdicts({BASIC_IDS[0]: {"stage": "compile", "detail": detail}})
    result = tc.run("--tile-update", "--tile-cache-dir", str(cache), "--tile-report", "r.json")
    result.stdout.fnmatch_lines([f"  verdict: compile {stable} [[]fake[]]"])
    assert f'{BASIC_IDS[0]}: {{stage: compile, source: "fake", reason: "{stable}"}}' in path.read_text()
    cases = {c["id"]: c for c in json.loads((tc.path / "r.json").read_text())["cases"]}
    assert cases[BASIC_IDS[0]]["verdict"]["detail"] == stable
    xfail = tc.run("-rx")
    xfail.assert_outcomes(passed=2, xfailed=1)
    xfail.stdout.fnmatch_lines([f"XFAIL m.yaml::{BASIC_IDS[0]} - {stable} (expected stage: compile; *"])


def test_read_only_matrix_is_refused_with_a_message(tc: TileRun) -> None:
    path = tc.matrix(BASIC)
    path.chmod(0o444)
    tc.verdicts({BASIC_IDS[0]: "compile"})
    result = tc.run("--tile-update")
    result.assert_outcomes(passed=2, failed=1)
    result.stdout.fnmatch_lines(
        [
            f"{path}: not updated: the matrix is read-only; nothing written*",
            f"{path}: 1 expectation(s) NOT written:",
            f"  {BASIC_IDS[0]}: pass -> compile",
        ]
    )
    assert path.read_text() == BASIC
    assert sorted(p.name for p in tc.path.iterdir() if p.name.startswith(".m.yaml")) == []


def test_recorded_reasons_name_the_backends_places_and_drop_backtraces(tc: TileRun) -> None:
    """A reason quoting the backend's own sources and a native backtrace (as TensorRT-LLM's
    errors carry) is recorded the same on every host: the place named, the frames gone."""
    path = tc.matrix(BASIC)
    detail = (
        f"{tc.path}/sources/cutlass/gemm.hpp(139): error: static assertion failed\n"
        "1       0x7f1ce7a69a87 tensorrt_llm::common::throwRuntimeError(char const*, int) + 97\n"
        "2       0x5592e27f4814 /tmp/x/runner(+0x17814) [0x5592e27f4814]\n"
        "after the frames"
    )
    tc.verdicts({BASIC_IDS[0]: {"stage": "compile", "status": "compile error", "detail": detail}})
    tc.run("--tile-update")
    text = path.read_text()
    assert "<fake-sources>/cutlass/gemm.hpp(139): error: static assertion failed\\nafter the frames" in text
    assert "0x" not in text and str(tc.path) not in text


def test_a_stale_reason_of_the_same_source_is_renewed(tc: TileRun) -> None:
    """Same stage, status and source, other words: the entry takes what the source says now,
    and the summary names what was renewed. Another source's entry is kept as it is."""
    old = '{stage: initialize, smem: 102400, source: "fake", reason: "smem; an older message"}'
    other = '{stage: initialize, source: "H200", reason: "what the GPU said"}'
    path = tc.matrix(BASIC + f"expectations:\n  {BASIC_IDS[0]}: {old}\n  {BASIC_IDS[1]}: {other}\n")
    tc.verdicts(
        {
            BASIC_IDS[0]: {"stage": "initialize", "smem": 102400, "detail": "smem"},
            BASIC_IDS[1]: {"stage": "initialize", "detail": "fake words"},
        }
    )
    result = tc.run("--tile-update")
    result.stdout.fnmatch_lines([f"  {BASIC_IDS[0]}: initialize -> initialize (reason renewed)"])
    text = path.read_text()
    assert f'{BASIC_IDS[0]}: {{stage: initialize, smem: 102400, source: "fake", reason: "smem"}}' in text
    assert f"{BASIC_IDS[1]}: {other}" in text
    again = tc.run("--tile-update")
    again.stdout.fnmatch_lines(["no expectation changed*"])
