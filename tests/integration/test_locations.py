"""A case's location is its tile entry in the matrix file: skip lines, failure reports, --tb=line
and JUnit point at the YAML, so CI annotations land on the line that defines the case."""

from __future__ import annotations

import xml.etree.ElementTree as ET

import pytest
from helpers.fake_backend import TileRun

MATRIX = """\
version: 1
backend: fake
suites:
  - name: hopper
    arch: sm90
    dtype: bf16
    problems: {experts: 2, rows: 64, n: 256, k: 128}
    tile:
      - 64x64x64
      - 128x64x64
      - {shape: 128x128x64, cluster: [1x1x1, 2x1x1]}
      - 256x128x64
  - arch: sm100
    dtype: bf16
    problems: {experts: 2, rows: 64, n: 256, k: 128}
    tile: 64x64x64
expectations:
  sm90-bf16-128x128x64-c2x1x1-none: {stage: run}
  sm90-bf16-256x128x64-c1x1x1-none: {stage: initialize}
"""

LINES = {  # case id -> line of its tile entry
    "sm90-bf16-64x64x64-c1x1x1-none": 9,
    "sm90-bf16-128x64x64-c1x1x1-none": 10,
    "sm90-bf16-128x128x64-c1x1x1-none": 11,
    "sm90-bf16-128x128x64-c2x1x1-none": 11,
    "sm90-bf16-256x128x64-c1x1x1-none": 12,
    "sm100-bf16-64x64x64-c1x1x1-none": 16,
}

VERDICTS = {
    "sm90-bf16-128x64x64-c1x1x1-none": {"stage": "initialize", "smem": 240000, "limit": 232448},
    "sm90-bf16-128x128x64-c2x1x1-none": {"stage": "pass", "judged_through": "launch", "source": "virtual"},
    "sm90-bf16-256x128x64-c1x1x1-none": {"stage": "compile", "detail": "static_assert failed"},
}


def run(tc: TileRun, *args: str, subprocess: bool = False, name: str = "m.yaml") -> pytest.RunResult:
    tc.matrix(MATRIX, name)
    tc.verdicts(VERDICTS)
    result = (tc.run_subprocess if subprocess else tc.run)(*args, matrix=name)
    result.assert_outcomes(passed=2, failed=2, skipped=2)
    return result


def test_skip_lines_point_at_the_tile_entry(tc: TileRun) -> None:
    run(tc, "-rs").stdout.fnmatch_lines(
        [
            "SKIPPED [[]1[]] m.yaml:11: expected to fail at run, which virtual cannot judge (it judges "
            "through launch); passed through launch",
            "SKIPPED [[]1[]] m.yaml:16: sm100 is not present (found sm90)",
        ],
        consecutive=False,
    )


def test_a_failure_ends_at_the_tile_entry_like_a_traceback(tc: TileRun) -> None:
    result = run(tc)
    result.stdout.fnmatch_lines(
        [
            "*_ sm90-bf16-128x64x64-c1x1x1-none _*",
            "expected pass, but rejected at stage initialize",
            "  verdict: initialize smem=240000/232448 [[]fake[]]",
            "  case: {*",
            "",
            "m.yaml:10: InitializeFailure",
        ]
    )


def test_a_failure_of_a_known_bad_case_names_its_expectation(tc: TileRun) -> None:
    run(tc).stdout.fnmatch_lines(
        [
            "*_ sm90-bf16-256x128x64-c1x1x1-none _*",
            "expected rejection at stage initialize, but rejected at stage compile",
            "  verdict: compile static_assert failed [[]fake[]]",
            "  case: {*",
            "  expectation: m.yaml:19",
            "",
            "m.yaml:12: CompileFailure",
        ]
    )


@pytest.mark.parametrize("subprocess", [False, True], ids=["in-process", "xdist"])
def test_tb_line_and_the_short_summary(tc: TileRun, subprocess: bool) -> None:
    args = ("--tb=line", "-rfs", *(("-n", "2") if subprocess else ()))
    result = run(tc, *args, subprocess=subprocess)
    for line in [  # in the order the cases finish, which xdist does not fix
        "m.yaml:10: expected pass, but rejected at stage initialize: initialize "
        "smem=240000/232448 [[]fake[]]",
        "m.yaml:12: expected rejection at stage initialize, but rejected at stage compile: compile "
        "static_assert failed [[]fake[]]",
        "FAILED m.yaml::sm90-bf16-128x64x64-c1x1x1-none - expected pass, but*",
        "SKIPPED [[]1[]] m.yaml:16: sm100 is not present (found sm90)",
    ]:
        result.stdout.fnmatch_lines([line])


def test_junit_xunit1_file_and_line(tc: TileRun) -> None:
    """xunit1 (pytest's legacy family) writes ``file`` and ``line``; the line is pytest's
    0-based one, as for every Python test (annotators add one)."""
    run(tc, "--junitxml", "junit.xml", "-o", "junit_family=xunit1")
    cases = {c.get("name"): c for c in ET.parse(tc.path / "junit.xml").getroot().iter("testcase")}
    assert {name: (c.get("file"), c.get("line")) for name, c in cases.items()} == {
        name: ("m.yaml", str(line - 1)) for name, line in LINES.items()
    }
    skipped = cases["sm100-bf16-64x64x64-c1x1x1-none"].find("skipped")
    assert skipped is not None
    assert (skipped.text or "").endswith("m.yaml:16: sm100 is not present (found sm90)")
    failure = cases["sm90-bf16-128x64x64-c1x1x1-none"].find("failure")
    assert failure is not None
    assert failure.get("message") == (
        "expected pass, but rejected at stage initialize: initialize smem=240000/232448 [fake]"
    )
    assert (failure.text or "").splitlines()[-1] == "m.yaml:10: InitializeFailure"


def test_junit_location_property_in_every_family(tc: TileRun) -> None:
    """The default family (xunit2) has no ``file``/``line`` attributes: a property says where the
    case is, 1-based, for every case, judged or skipped."""
    run(tc, "--junitxml", "junit.xml")
    for case in ET.parse(tc.path / "junit.xml").getroot().iter("testcase"):
        assert case.get("file") is None
        props = {p.get("name"): p.get("value") for p in case.iter("property")}
        assert props["location"] == f"m.yaml:{LINES[case.get('name') or '']}"


def test_a_matrix_in_a_subfolder_is_named_from_where_pytest_runs(tc: TileRun) -> None:
    run(tc, "-rs", name="matrices/m.yaml").stdout.fnmatch_lines(
        [
            "matrices/m.yaml:10: InitializeFailure",
            "  expectation: matrices/m.yaml:19",
            "SKIPPED [[]1[]] matrices/m.yaml:16: sm100 is not present (found sm90)",
        ],
        consecutive=False,
    )


def test_verbose_and_collect_only_still_name_cases_by_node_id(tc: TileRun) -> None:
    tc.matrix(MATRIX)
    assert tc.collect() == [f"m.yaml::{case_id}" for case_id in LINES]
