"""Selecting and collecting matrix cases: options, ini, markers, -k, --lf, -x, ids, hooks."""

from __future__ import annotations

import pytest
from helpers.fake_backend import BASIC, BASIC_IDS, TileRun, matrix_errors, output, verbose_outcomes

THREE_ARCHS = """\
version: 1
backend: fake
suites:
  - arch: [sm90, sm100, sm120]
    dtype: bf16
    tile: 128x64x64
    problems: {experts: 1, rows: 8, n: 64, k: 64}
"""


def test_collect_only_lists_matrix_ids(tc: TileRun) -> None:
    tc.matrix(BASIC)
    result = tc.run("--collect-only", "-q")
    assert result.ret == 0
    assert result.outlines[:4] == [*(f"m.yaml::{i}" for i in BASIC_IDS), ""]
    result.stdout.fnmatch_lines(["3 tests collected in *"])


def test_runs_the_matrix_cases(tc: TileRun) -> None:
    tc.matrix(BASIC)
    result = tc.run("-v")
    result.assert_outcomes(passed=3)
    assert verbose_outcomes(result) == {f"m.yaml::{i}": "PASSED" for i in BASIC_IDS}


def test_tile_matrix_is_repeatable(tc: TileRun) -> None:
    tc.matrix(BASIC, "a.yaml")
    tc.matrix(THREE_ARCHS, "b.yaml")
    ids = tc.collect("--tile-matrix", "b.yaml", matrix="a.yaml")
    assert ids == [
        *(f"a.yaml::{i}" for i in BASIC_IDS),
        "b.yaml::sm90-bf16-128x64x64-c1x1x1-none",
        "b.yaml::sm100-bf16-128x64x64-c1x1x1-none",
        "b.yaml::sm120-bf16-128x64x64-c1x1x1-none",
    ]


def test_same_matrix_given_twice_runs_its_cases_once(tc: TileRun) -> None:
    tc.matrix(BASIC)
    result = tc.run("--tile-matrix", "m.yaml")
    result.assert_outcomes(passed=3)


def test_matrix_in_a_subdirectory(tc: TileRun) -> None:
    tc.matrix(BASIC, "matrices/hopper.yaml")
    assert tc.collect(matrix="matrices/hopper.yaml") == [f"matrices/hopper.yaml::{i}" for i in BASIC_IDS]


def test_missing_matrix_file_is_a_usage_error(tc: TileRun) -> None:
    result = tc.run(matrix="nope.yaml")
    assert result.ret == 4
    result.stderr.fnmatch_lines(["*/nope.yaml:1:1: cannot read matrix: No such file or directory"])
    assert "Traceback" not in output(result)


def test_ini_tile_matrix(tc: TileRun) -> None:
    tc.matrix(BASIC, "matrices/m.yaml")
    tc.pytester.makeini("[pytest]\ntile_matrix = matrices/m.yaml\n")
    result = tc.run("-v", matrix=None)
    result.assert_outcomes(passed=3)
    assert sorted(verbose_outcomes(result)) == sorted(f"matrices/m.yaml::{i}" for i in BASIC_IDS)


@pytest.fixture
def dummy_testpaths(tc: TileRun) -> TileRun:
    """testpaths points at a directory with an ordinary test that would otherwise run."""
    tc.matrix(BASIC)
    tc.pytester.makeini("[pytest]\ntestpaths = dummy\n")
    (tc.path / "dummy").mkdir()
    (tc.path / "dummy" / "test_dummy.py").write_text("def test_would_run():\n    pass\n")
    return tc


def test_testpaths_run_without_tile_matrix(dummy_testpaths: TileRun) -> None:
    result = dummy_testpaths.run("-v", matrix=None)
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(["dummy/test_dummy.py::test_would_run PASSED*"])


def test_tile_matrix_replaces_testpaths(dummy_testpaths: TileRun) -> None:
    result = dummy_testpaths.run("-v")
    result.assert_outcomes(passed=3)
    assert sorted(verbose_outcomes(result)) == sorted(f"m.yaml::{i}" for i in BASIC_IDS)
    assert "test_would_run" not in result.stdout.str()


def test_explicit_paths_run_alongside_tile_matrix(dummy_testpaths: TileRun) -> None:
    result = dummy_testpaths.run("dummy", "-v")
    result.assert_outcomes(passed=4)
    result.stdout.fnmatch_lines(["dummy/test_dummy.py::test_would_run PASSED*"])


@pytest.mark.parametrize("archs", ["sm90,sm120", " SM120 , sm90 "])
def test_tile_arch_filters(tc: TileRun, archs: str) -> None:
    tc.matrix(THREE_ARCHS)
    assert tc.collect("--tile-arch", archs) == [
        "m.yaml::sm90-bf16-128x64x64-c1x1x1-none",
        "m.yaml::sm120-bf16-128x64x64-c1x1x1-none",
    ]


def test_tile_arch_limits_what_is_judged(tc: TileRun) -> None:
    tc.matrix(THREE_ARCHS)
    result = tc.run("--tile-arch", "sm100")
    result.assert_outcomes(skipped=1)
    assert tc.log("verdicts.jsonl") == []


def test_keyword_selection_and_prepare_sees_only_selected(tc: TileRun) -> None:
    tc.matrix(BASIC)
    result = tc.run("-k", "128x128")
    result.assert_outcomes(passed=1, deselected=2)
    assert tc.log("prepared.jsonl") == [{"worker": "main", "ids": ["sm90-bf16-128x128x64-c1x1x1-none"]}]
    assert tc.log("verdicts.jsonl") == [{"id": "sm90-bf16-128x128x64-c1x1x1-none", "outcome": "pass"}]


def test_prepare_is_called_once_with_all_cases(tc: TileRun) -> None:
    tc.matrix(BASIC)
    tc.run().assert_outcomes(passed=3)
    assert tc.log("prepared.jsonl") == [{"worker": "main", "ids": BASIC_IDS}]


def test_arch_markers(tc: TileRun) -> None:
    tc.matrix(THREE_ARCHS)
    result = tc.run("-m", "sm90", "--strict-markers", "-v")
    result.assert_outcomes(passed=1, deselected=2)
    assert verbose_outcomes(result) == {"m.yaml::sm90-bf16-128x64x64-c1x1x1-none": "PASSED"}


def test_tileconform_marker(tc: TileRun) -> None:
    tc.matrix(THREE_ARCHS)
    tc.run("-m", "tileconform and not sm90", "--strict-markers").assert_outcomes(skipped=2, deselected=1)
    tc.run("-m", "not tileconform").assert_outcomes(deselected=3)


def test_markers_are_registered(tc: TileRun) -> None:
    tc.matrix(THREE_ARCHS)
    result = tc.run("--markers")
    assert result.ret == 0
    for line in (
        "@pytest.mark.sm90: tile matrix cases of sm90",
        "@pytest.mark.sm100: tile matrix cases of sm100",
        "@pytest.mark.sm120: tile matrix cases of sm120",
        "@pytest.mark.tileconform: a tile matrix case",
    ):
        assert line in result.outlines


def test_last_failed_reruns_only_failing_cases(tc: TileRun) -> None:
    tc.matrix(BASIC)
    tc.verdicts({BASIC_IDS[1]: "initialize"})
    first = tc.run("-p", "cacheprovider")
    first.assert_outcomes(passed=2, failed=1)
    second = tc.run("-p", "cacheprovider", "--lf", "-v")
    second.assert_outcomes(failed=1, deselected=2)
    assert verbose_outcomes(second) == {f"m.yaml::{BASIC_IDS[1]}": "FAILED"}
    assert tc.log("prepared.jsonl")[-1] == {"worker": "main", "ids": [BASIC_IDS[1]]}


def test_exitfirst_stops_at_first_failure(tc: TileRun) -> None:
    tc.matrix(BASIC)
    tc.verdicts({i: "compile" for i in BASIC_IDS})
    result = tc.run("-x", "-v")
    result.assert_outcomes(failed=1)
    assert verbose_outcomes(result) == {f"m.yaml::{BASIC_IDS[0]}": "FAILED"}
    assert result.ret == 1


def test_collection_is_deterministic(tc: TileRun) -> None:
    tc.matrix(
        """\
        version: 1
        backend: fake
        defaults:
          problems:
            - {name: decode, experts: 8, rows: 1, n: 512, k: 256}
            - {name: prefill, experts: 8, rows: 300, n: 512, k: 256}
        suites:
          - arch: [sm120, sm90, sm100]
            dtype: [fp16, bf16]
            cluster: [2x1x1, 1x1x1]
            swap_ab: [true, false]
            tile: [256x128x64, 64x64x64, 128x256x128]
        """
    )
    first = tc.collect()
    second = tc.collect()
    assert len(first) == 3 * 2 * 2 * 2 * 3 * 2
    assert first == second
    # file order, not sorted: the first tile entry, arch and dtype as written
    assert first[:4] == [
        "m.yaml::sm120-fp16-256x128x64-c2x1x1-none-swapab-decode",
        "m.yaml::sm120-fp16-256x128x64-c2x1x1-none-swapab-prefill",
        "m.yaml::sm120-fp16-256x128x64-c2x1x1-none-decode",
        "m.yaml::sm120-fp16-256x128x64-c2x1x1-none-prefill",
    ]
    assert first[-1] == "m.yaml::sm100-bf16-128x256x128-c1x1x1-none-prefill"


def test_modify_cases_hook_can_drop_cases(tc: TileRun) -> None:
    tc.matrix(BASIC)
    tc.pytester.makepyfile(
        conftest=(tc.path / "conftest.py").read_text()
        + "\n\ndef pytest_tileconform_modify_cases(config, cases):\n"
        "    cases[:] = [c for c in cases if c.tile != (128, 128, 64)]\n"
    )
    assert tc.collect() == [f"m.yaml::{BASIC_IDS[0]}", f"m.yaml::{BASIC_IDS[2]}"]
    tc.run().assert_outcomes(passed=2)
    assert tc.log("prepared.jsonl")[-1] == {"worker": "main", "ids": [BASIC_IDS[0], BASIC_IDS[2]]}


def test_modify_cases_hook_can_reorder_cases(tc: TileRun) -> None:
    tc.matrix(BASIC)
    tc.pytester.makepyfile(
        conftest=(tc.path / "conftest.py").read_text()
        + "\n\ndef pytest_tileconform_modify_cases(config, cases):\n    cases.reverse()\n"
    )
    assert tc.collect() == [f"m.yaml::{i}" for i in reversed(BASIC_IDS)]


def test_verdict_hook_called_once_per_verdict(tc: TileRun) -> None:
    tc.matrix(THREE_ARCHS.replace("tile: 128x64x64", "tile: [128x64x64, 64x64x64]"))
    tc.verdicts({"sm90-bf16-64x64x64-c1x1x1-none": "launch"})
    tc.run().assert_outcomes(passed=1, failed=1, skipped=4)
    # NotJudgeable cases (sm100, sm120) have no verdict, so the hook is not called for them
    assert tc.log("verdicts.jsonl") == [
        {"id": "sm90-bf16-128x64x64-c1x1x1-none", "outcome": "pass"},
        {"id": "sm90-bf16-64x64x64-c1x1x1-none", "outcome": "launch"},
    ]


def test_two_backends_with_the_same_name_is_a_usage_error(tc: TileRun) -> None:
    tc.matrix(BASIC)
    tc.pytester.makepyfile(
        conftest=(tc.path / "conftest.py")
        .read_text()
        .replace("return [FakeBackend()]", "return [FakeBackend(), FakeBackend()]")
    )
    result = tc.run()
    assert result.ret == 4
    result.stderr.fnmatch_lines(["ERROR: two plugins register a backend named 'fake'"])
    assert "Traceback" not in output(result)


def test_no_tile_matrix_leaves_pytest_alone(tc: TileRun) -> None:
    tc.matrix(BASIC)
    tc.pytester.makepyfile(test_plain="def test_plain():\n    pass\n")
    result = tc.run("-v", matrix=None)
    result.assert_outcomes(passed=1)
    assert "tileconform verdicts" not in result.stdout.str()


NO_KERNELS = """\
version: 1
backend: flashinfer-cutlass-moe
suites:
  - arch: [sm90, sm89]
    dtype: bf16
    tile: [128x64x64, 128x128x64]
    problems: {experts: 1, rows: 8, n: 64, k: 64}
  - arch: sm80
    dtype: bf16
    tile: 128x64x64
    problems: {experts: 1, rows: 8, n: 64, k: 64}
"""


def test_an_arch_the_backend_has_no_kernels_for_is_refused_at_collection(pytester: pytest.Pytester) -> None:
    """FlashInfer's launcher has no SM89 or SM80 path: the matrix is refused where it names them
    (once per place, not per tile), instead of its cases being skipped with advice that leads to
    a missing virtual profile. No compiler is needed to say so."""
    path = pytester.path / "m.yaml"
    path.write_text(NO_KERNELS)
    result = pytester.runpytest("--tile-matrix", "m.yaml", "--collect-only", "-p", "no:cacheprovider")
    judges = "(it judges sm90, sm100, sm103, sm120, sm121)"
    assert matrix_errors(result, path) == [
        f"4:18: arch 'sm89': backend 'flashinfer-cutlass-moe' has no kernels for it {judges}",
        f"8:5: arch 'sm80': backend 'flashinfer-cutlass-moe' has no kernels for it {judges}",
    ]
