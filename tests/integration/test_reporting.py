"""What a run reports: the terminal grid, junit xml properties and the --tile-report JSON."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET

import pytest
from helpers.fake_backend import FAKE_CONFTEST, TileRun

from pytest_tileconform.results.model import FORMAT

MATRIX = """\
version: 1
backend: fake
suites:
  - arch: [sm90, sm100]
    dtype: [bf16, {act: fp8, weight: fp8, out: bf16}]
    tile: [128x64x64, 64x64x64]
    problems: {experts: 2, rows: 64, n: 256, k: 128}
  - arch: sm90
    dtype: bf16
    tile: 256x128x64
    cluster: [1x1x1, 2x1x1]
    problems: {experts: 2, rows: 64, n: 256, k: 128}
expectations:
  sm90-fp8_e4m3-bf16-64x64x64-c1x1x1-none: {stage: initialize}
  sm90-bf16-256x128x64-c2x1x1-none: {stage: launch}
"""

VERDICTS = {
    "sm90-bf16-128x64x64-c1x1x1-none": {"stage": "initialize", "smem": 240000, "limit": 232448},
    "sm90-fp8_e4m3-bf16-64x64x64-c1x1x1-none": {"stage": "initialize", "smem": 250000},
    "sm90-bf16-256x128x64-c2x1x1-none": "compile",
}

# sm90 bf16: 128x64x64 F, 64x64x64 ., 256x128x64 . and F (two clusters)
# sm90 fp8:  128x64x64 ., 64x64x64 x
# sm100: all skipped
GRID = [
    "arch   dtypes         64x64x64  128x64x64  256x128x64",
    "sm90   bf16           1.        1F         1. 1F     ",
    "sm90   fp8_e4m3-bf16  1x        1.                   ",
    "sm100  bf16           1s        1s                   ",
    "sm100  fp8_e4m3-bf16  1s        1s                   ",
    "",
    ". pass   u unrun: passed what was judged, the kernel did not run   x known-bad, failed at its "
    "expected stage   F fail   s skipped (not judged)",
]


def run(tc: TileRun, *args: str, skipped: int = 4):  # type: ignore[no-untyped-def]
    tc.matrix(MATRIX)
    tc.verdicts(VERDICTS)
    result = tc.run(*args)
    result.assert_outcomes(passed=3, failed=2, xfailed=1, skipped=skipped)
    return result


def test_terminal_grid(tc: TileRun) -> None:
    result = run(tc)
    lines = result.outlines
    start = next(
        i for i, line in enumerate(lines) if "tileconform verdicts (tiles: CTA MxNxK, K in elements)" in line
    )
    assert lines[start].startswith("=") and lines[start].endswith("=")
    assert lines[start + 1 : start + 1 + len(GRID)] == GRID


def test_no_grid_when_nothing_ran(tc: TileRun) -> None:
    tc.matrix(MATRIX)
    result = tc.run("-k", "nothing_matches_this")
    result.assert_outcomes(deselected=10)
    assert "tileconform verdicts" not in result.stdout.str()


def test_junit_properties(tc: TileRun) -> None:
    run(tc, "--junitxml", "junit.xml", "--tile-arch", "sm90", skipped=0)
    root = ET.parse(tc.path / "junit.xml").getroot()
    cases = {c.get("name"): c for c in root.iter("testcase")}
    assert len(cases) == 6
    expected = {
        "sm90-bf16-128x64x64-c1x1x1-none": ("128x64x64", "initialize", "240000"),
        "sm90-bf16-64x64x64-c1x1x1-none": ("64x64x64", "pass", ""),
        "sm90-fp8_e4m3-bf16-128x64x64-c1x1x1-none": ("128x64x64", "pass", ""),
        "sm90-fp8_e4m3-bf16-64x64x64-c1x1x1-none": ("64x64x64", "initialize", "250000"),
        "sm90-bf16-256x128x64-c1x1x1-none": ("256x128x64", "pass", ""),
        "sm90-bf16-256x128x64-c2x1x1-none": ("256x128x64", "compile", ""),
    }
    for name, (tile, stage, smem) in expected.items():
        props = {p.get("name"): p.get("value") for p in cases[name].iter("property")}
        assert props["arch"] == "sm90", name
        assert props["tile"] == tile, name
        assert props["stage"] == stage, name
        assert props["smem_requested"] == smem, name
    props = {
        p.get("name"): p.get("value") for p in cases["sm90-bf16-256x128x64-c2x1x1-none"].iter("property")
    }
    assert props["cluster"] == "2x1x1"
    assert props["expected"] == "launch"
    assert props["dtypes"] == "bf16/bf16/bf16"
    assert json.loads(props["tileconform_verdict"] or "")["failed_stage"] == "compile"


def test_tile_report_json(tc: TileRun) -> None:
    result = run(tc, "--tile-report", "out/results.json")
    path = tc.path / "out" / "results.json"
    result.stdout.fnmatch_lines([f"tileconform: results written to {path}"])
    document = json.loads(path.read_text())
    assert document["format"] == FORMAT == 3
    assert document["startup_s"] > 0  # the pytest process's age when the plugin started (Linux)
    by_id = {c["id"]: c for c in document["cases"]}
    assert len(document["cases"]) == len(by_id) == 10
    assert {i: (c["outcome"], c["expected"]) for i, c in by_id.items()} == {
        "sm90-bf16-128x64x64-c1x1x1-none": ("failed", "pass"),
        "sm90-bf16-64x64x64-c1x1x1-none": ("passed", "pass"),
        "sm90-fp8_e4m3-bf16-128x64x64-c1x1x1-none": ("passed", "pass"),
        "sm90-fp8_e4m3-bf16-64x64x64-c1x1x1-none": ("xfailed", "initialize"),
        "sm100-bf16-128x64x64-c1x1x1-none": ("skipped", "pass"),
        "sm100-bf16-64x64x64-c1x1x1-none": ("skipped", "pass"),
        "sm100-fp8_e4m3-bf16-128x64x64-c1x1x1-none": ("skipped", "pass"),
        "sm100-fp8_e4m3-bf16-64x64x64-c1x1x1-none": ("skipped", "pass"),
        "sm90-bf16-256x128x64-c1x1x1-none": ("passed", "pass"),
        "sm90-bf16-256x128x64-c2x1x1-none": ("failed", "launch"),
    }
    verdict = by_id["sm90-bf16-128x64x64-c1x1x1-none"]["verdict"]
    assert (verdict["outcome"], verdict["failed_stage"], verdict["judged_through"]) == (
        "initialize",
        "initialize",
        "numerics",
    )
    assert (verdict["smem_requested"], verdict["smem_limit"], verdict["source"]) == (
        240000,
        232448,
        "fake",
    )
    assert by_id["sm90-bf16-64x64x64-c1x1x1-none"]["verdict"]["outcome"] == "pass"
    skipped = by_id["sm100-bf16-64x64x64-c1x1x1-none"]
    assert skipped["verdict"] is None
    assert skipped["skip_reason"] == "sm100 is not present (found sm90)"
    assert by_id["sm90-bf16-256x128x64-c2x1x1-none"]["case"]["cluster"] == "2x1x1"
    assert {c["matrix"] for c in document["cases"]} == {str(tc.path / "m.yaml")}
    assert sorted(p.name for p in path.parent.iterdir()) == ["results.json"]


def test_tile_report_counts_each_case_once_when_teardown_fails(tc: TileRun) -> None:
    tc.matrix(MATRIX)
    tc.verdicts(VERDICTS)
    tc.pytester.makepyfile(
        conftest=(tc.path / "conftest.py").read_text()
        + "\n\nimport pytest\n\n\n@pytest.hookimpl(trylast=True)\n"
        "def pytest_runtest_teardown(item):\n"
        "    if item.name == 'sm90-bf16-64x64x64-c1x1x1-none':\n"
        "        raise RuntimeError('teardown broke')\n"
    )
    result = tc.run("--tile-report", "r.json", "--tile-arch", "sm90")
    result.assert_outcomes(passed=3, failed=2, xfailed=1, errors=1)
    ids = [c["id"] for c in json.loads((tc.path / "r.json").read_text())["cases"]]
    assert len(ids) == len(set(ids)) == 6


#: the fake backend, with each verdict's ``extra`` also taken from the table (as hardware verdicts
#: carry kernel_ms)
EXTRA_CONFTEST = FAKE_CONFTEST.replace(
    '"worker": os.environ.get("PYTEST_XDIST_WORKER", "main"),\n            },',
    '"worker": os.environ.get("PYTEST_XDIST_WORKER", "main"),\n'
    '                **entry.get("extra", {}),\n            },',
)


def timed_run(tc: TileRun, times: dict[str, float | None], *args: str) -> pytest.RunResult:
    assert EXTRA_CONFTEST != FAKE_CONFTEST
    tc.pytester.makeconftest(EXTRA_CONFTEST)
    tiles = [case_id.split("-")[2] for case_id in times]
    tc.matrix(
        "version: 1\nbackend: fake\nsuites:\n  - arch: sm90\n    dtype: bf16\n"
        f"    tile: [{', '.join(tiles)}]\n    problems: {{experts: 1, rows: 8, n: 64, k: 64}}\n"
    )
    tc.verdicts({case_id: {"stage": "pass", "extra": {"kernel_ms": ms}} for case_id, ms in times.items()})
    result = tc.run(*args)
    result.assert_outcomes(passed=len(times))
    return result


def test_kernel_times_in_the_summary_and_the_results_file(tc: TileRun) -> None:
    times = {
        "sm90-bf16-64x64x64-c1x1x1-none": 0.0123,
        "sm90-bf16-128x64x64-c1x1x1-none": 0.5,
        "sm90-bf16-128x128x64-c1x1x1-none": None,  # not timed (--tile-timing-iters 0)
    }
    result = timed_run(tc, times, "--tile-report", "r.json")
    result.stdout.fnmatch_lines(
        [
            "3 case(s) judged by fake, through numerics",
            "",
            "kernel_ms (mean time of one launcher call, CUDA events): 2 case(s) timed, slowest first",
            "      0.5000  sm90-bf16-128x64x64-c1x1x1-none",
            "      0.0123  sm90-bf16-64x64x64-c1x1x1-none",
        ]
    )
    cases = {c["id"]: c for c in json.loads((tc.path / "r.json").read_text())["cases"]}
    assert {i: c["verdict"]["extra"]["kernel_ms"] for i, c in cases.items()} == times


def test_many_kernel_times_show_the_slowest_and_the_fastest(tc: TileRun) -> None:
    times: dict[str, float | None] = {
        f"sm90-bf16-{64 * n}x64x64-c1x1x1-none": round(0.01 * n, 2) for n in range(1, 13)
    }
    lines = timed_run(tc, times).outlines
    start = lines.index(
        "kernel_ms (mean time of one launcher call, CUDA events): 12 case(s) timed, slowest first"
    )
    assert lines[start + 1 : start + 12] == [
        "      0.1200  sm90-bf16-768x64x64-c1x1x1-none",
        "      0.1100  sm90-bf16-704x64x64-c1x1x1-none",
        "      0.1000  sm90-bf16-640x64x64-c1x1x1-none",
        "      0.0900  sm90-bf16-576x64x64-c1x1x1-none",
        "      0.0800  sm90-bf16-512x64x64-c1x1x1-none",
        "         ...  (2 more)",
        "      0.0500  sm90-bf16-320x64x64-c1x1x1-none",
        "      0.0400  sm90-bf16-256x64x64-c1x1x1-none",
        "      0.0300  sm90-bf16-192x64x64-c1x1x1-none",
        "      0.0200  sm90-bf16-128x64x64-c1x1x1-none",
        "      0.0100  sm90-bf16-64x64x64-c1x1x1-none",
    ]
    assert lines[start + 12].startswith("=")  # the next section


def test_no_kernel_times_no_kernel_table(tc: TileRun) -> None:
    result = timed_run(tc, {"sm90-bf16-64x64x64-c1x1x1-none": None})
    assert "kernel_ms" not in result.stdout.str()
